//! One decoding step's attention on the CPU in f32: each row's one new query attends to keys
//! and values read in place wherever they are kept (the steps of a self-attention cache, or
//! the encoder memory of the row's sentence), with every head of a row in one task.
//!
//! Composed from candle ops this is a batched product per row and head, twice (about 1,300
//! tiny gemm calls per layer at beam 5 x 32 sentences), after the cache has been gathered into
//! one tensor. Here a row's scores are 64-float dot products, its softmax a few dozen values,
//! and nothing is copied: beam search's reordering becomes a table of which earlier row each
//! row continues ([`super::cached::CachedKeys`]).

use rayon::prelude::*;

use crate::kernels::log_softmax::LOWEST_EXPONENT;
use crate::kernels::simd::{dot, fma};

/// A `(rows, width)` matrix read in place: row `i` starts at `data[i * stride]`.
#[derive(Clone, Copy)]
pub struct Matrix<'a> {
    pub data: &'a [f32],
    pub stride: usize,
    pub width: usize,
}

impl<'a> Matrix<'a> {
    fn row(&self, i: usize) -> &'a [f32] {
        &self.data[i * self.stride..][..self.width]
    }
}

/// What each query row attends to: the `(matrix, row)` pairs `seen[starts[r]..starts[r + 1]]`
/// of the key and value matrices; `uniform[r]` for a row whose every position is masked,
/// which the reference's -1e9 fill makes a plain average of them all.
pub struct Visible {
    pub seen: Vec<(u32, u32)>,
    pub starts: Vec<usize>,
    pub uniform: Vec<bool>,
}

/// Rows per parallel task: a row is `heads x positions` dot products of `d_k`, a few
/// microseconds, so tasks of a single row would be mostly scheduling.
const ROWS_PER_TASK: usize = 8;

/// `queries` `(rows, heads * d_k)` -> the attended values, `(rows, heads * d_k)` row-major with
/// the heads side by side (already "concatenated").
pub fn attend(
    queries: Matrix,
    heads: usize,
    keys: &[Matrix],
    values: &[Matrix],
    visible: &Visible,
) -> Vec<f32> {
    let width = queries.width;
    let rows = visible.starts.len().saturating_sub(1);
    let mut out = vec![0f32; rows * width];
    if width == 0 || heads == 0 {
        return out;
    }
    let task = |(chunk, block): (usize, &mut [f32])| {
        let mut scores = Vec::new();
        for (i, out_row) in block.chunks_mut(width).enumerate() {
            let r = chunk * ROWS_PER_TASK + i;
            let seen = &visible.seen[visible.starts[r]..visible.starts[r + 1]];
            let query = queries.row(r);
            let uniform = visible.uniform.get(r).copied().unwrap_or(false);
            let row = Row {
                keys,
                values,
                seen,
                uniform,
            };
            attend_row(query, heads, row, &mut scores, out_row);
        }
    };
    if rows <= ROWS_PER_TASK {
        out.chunks_mut(ROWS_PER_TASK * width)
            .enumerate()
            .for_each(task);
    } else {
        out.par_chunks_mut(ROWS_PER_TASK * width)
            .enumerate()
            .for_each(task);
    }
    out
}

/// One query row's positions.
#[derive(Clone, Copy)]
struct Row<'a> {
    keys: &'a [Matrix<'a>],
    values: &'a [Matrix<'a>],
    seen: &'a [(u32, u32)],
    uniform: bool,
}

vectorized!(
    fn attend_row(query: &[f32], heads: usize, row: Row, scores: &mut Vec<f32>, out: &mut [f32]) {
        let d_k = query.len() / heads;
        let scale = (d_k as f32).sqrt();
        for h in 0..heads {
            let heads_part = h * d_k..(h + 1) * d_k;
            let q = &query[heads_part.clone()];
            scores.clear();
            let mut max = f32::NEG_INFINITY;
            for &(m, i) in row.seen {
                let k = &row.keys[m as usize].row(i as usize)[heads_part.clone()];
                let score = if row.uniform {
                    0.0
                } else {
                    dot::<FUSED, 16>(q, k) / scale
                };
                max = max.max(score);
                scores.push(score);
            }
            let mut total = 0.0;
            for score in scores.iter_mut() {
                *score = (*score - max).max(LOWEST_EXPONENT).exp();
                total += *score;
            }
            let o = &mut out[heads_part.clone()];
            for (&(m, i), &weight) in row.seen.iter().zip(scores.iter()) {
                let v = &row.values[m as usize].row(i as usize)[heads_part.clone()];
                let p = weight / total;
                for j in 0..d_k.min(v.len()) {
                    o[j] = fma::<FUSED>(p, v[j], o[j]);
                }
            }
        }
    }
);
