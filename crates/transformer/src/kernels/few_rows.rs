//! Linear-layer forward products with few rows: decoding (one new token per sentence) and
//! training on a handful of tokens (the toy pairs). These are bound by reading the weight, and
//! gemm packs the weight into panels before it multiplies: for a few rows the packing costs
//! more than the product. Here each product reads the weight once, in place, a row segment at
//! a time, and writes every output once. (The backward products of few rows stay with gemm:
//! written the same way they were slower than it.)
//!
//! The loops are plain Rust over 64-lane accumulators, compiled for the CPU's widest vectors
//! ([`super::simd`]).

use rayon::prelude::*;

use super::simd::{dot, fma};

/// Up to this many rows `x_times_w_t` beats gemm (training the base model on the toy pairs,
/// 12-16 rows: 1.2x faster steps).
pub const MAX_ROWS: usize = 16;

/// Up to this many rows `x_times_wt` beats gemm on `W^T`: one row (1.4x faster); at five
/// (beam 5) it was 1.2-1.4x slower, its accumulators no longer fitting in registers. Decoding
/// no longer comes here with one row: `linear_fixed` reads `W` in place for that
/// (`x_times_w_t`, twice as fast again on AMD, which streams rows better than segments).
pub const MAX_ROWS_TRANSPOSED: usize = 1;

/// Output features (or input features, for the column-split kernels) per parallel task.
const CHUNK: usize = 128;

/// `x` `(rows, in)`, row-major, as the kernels read it.
#[derive(Clone, Copy)]
pub struct Rows<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
}

impl Rows<'_> {
    fn row(&self, r: usize) -> &[f32] {
        &self.data[r * self.cols..(r + 1) * self.cols]
    }
}

/// `y += alpha x`.
#[inline(always)]
fn axpy<const FUSED: bool>(y: &mut [f32], alpha: f32, x: &[f32]) {
    let n = y.len().min(x.len());
    let (y, x) = (&mut y[..n], &x[..n]);
    for k in 0..n {
        y[k] = fma::<FUSED>(alpha, x[k], y[k]);
    }
}

type Range = std::ops::Range<usize>;

/// Runs `task` on each range of `chunk` columns of `0..n` in parallel and lays the tasks'
/// `(rows, width)` blocks side by side into one `(rows, n)` matrix: each task copies its own
/// block into place while it is still in cache, rather than one thread copying them all after.
pub(super) fn by_column_ranges(
    rows: usize,
    n: usize,
    chunk: usize,
    task: impl Fn(Range) -> Vec<f32> + Sync,
) -> Vec<f32> {
    let mut out = vec![0f32; rows * n];
    let columns: Vec<Range> = (0..n.div_ceil(chunk))
        .map(|c| c * chunk..((c + 1) * chunk).min(n))
        .collect();
    let blocks = columns.into_par_iter().map(|range| {
        let block = task(range.clone());
        (range, block)
    });
    // Each task's rows go to its own columns of `out`: the pieces never overlap, so a
    // mutable view per row, split at the block's columns, is taken inside the task.
    let out_rows = SharedRows {
        ptr: out.as_mut_ptr(),
        n,
    };
    blocks.for_each(|(range, block)| {
        let width = range.len();
        for (r, row) in block.chunks_exact(width.max(1)).take(rows).enumerate() {
            // SAFETY: `range` lies in 0..n and r < rows, so the slice is inside `out`; no
            // other task writes these columns.
            unsafe { out_rows.columns(r, range.clone()) }.copy_from_slice(row);
        }
    });
    out
}

/// [`by_column_ranges`] for kernels that compute whole panels of `panel` columns into a padded
/// block (the packed products): `task(panels)` gives `(padded_rows >= rows, panels.len() *
/// panel)` row-major, and each task drops what lies past row `rows` and column `n` and adds
/// `bias` while its block is in cache.
pub(super) fn by_panels(
    (rows, n): (usize, usize),
    (panel, panels_per_task): (usize, usize),
    bias: Option<&[f32]>,
    task: impl Fn(Range) -> Vec<f32> + Sync,
) -> Vec<f32> {
    by_column_ranges(rows, n, panel * panels_per_task, |range| {
        let block = task(range.start / panel..range.end.div_ceil(panel));
        let padded = range.len().next_multiple_of(panel);
        let mut out = Vec::with_capacity(rows * range.len());
        for row in block.chunks_exact(padded).take(rows) {
            let row = &row[..range.len()];
            match bias {
                Some(bias) => out.extend(row.iter().zip(&bias[range.clone()]).map(|(y, b)| y + b)),
                None => out.extend_from_slice(row),
            }
        }
        out
    })
}

/// A `(rows, n)` matrix that parallel tasks write in disjoint column ranges.
struct SharedRows {
    ptr: *mut f32,
    n: usize,
}

// SAFETY: tasks write disjoint parts only (see `by_column_ranges`).
unsafe impl Sync for SharedRows {}

impl SharedRows {
    /// Row `r`'s columns `range`.
    ///
    /// # Safety
    /// `r` and `range` must lie inside the matrix and no one else may touch those columns.
    #[allow(clippy::mut_from_ref)]
    unsafe fn columns(&self, r: usize, range: Range) -> &mut [f32] {
        std::slice::from_raw_parts_mut(self.ptr.add(r * self.n + range.start), range.len())
    }
}

vectorized!(
    fn dots_with_rows(x: Rows, w: &[f32], bias: Option<&[f32]>, range: Range) -> Vec<f32> {
        // block[r][j] = b[j] + x_r . W_j for j in range, W row-major with rows of x.cols.
        let mut block = Vec::with_capacity(x.rows * range.len());
        for r in 0..x.rows {
            let row = x.row(r);
            for j in range.clone() {
                let b = match bias {
                    Some(b) => b[j],
                    None => 0.0,
                };
                block.push(b + dot::<FUSED, 64>(row, &w[j * x.cols..(j + 1) * x.cols]));
            }
        }
        block
    }
);

vectorized!(
    fn sums_of_row_segments(x: Rows, m: &[f32], bias: Option<&[f32]>, range: Range) -> Vec<f32> {
        // block[r] = b + sum_i x[r][i] M_i[range], M row-major with rows of n: each row segment of
        // M is read once, for every row of x.
        let n = m.len() / x.cols.max(1);
        let width = range.len();
        let mut block = Vec::with_capacity(x.rows * width);
        for _ in 0..x.rows {
            match bias {
                Some(b) => block.extend_from_slice(&b[range.clone()]),
                None => block.resize(block.len() + width, 0.0),
            }
        }
        for i in 0..x.cols {
            let segment = &m[i * n + range.start..i * n + range.end];
            for r in 0..x.rows {
                axpy::<FUSED>(
                    &mut block[r * width..(r + 1) * width],
                    x.data[r * x.cols + i],
                    segment,
                );
            }
        }
        block
    }
);

/// `x W^T + b` for `x` `(rows, in)` and `W` `(out, in)`.
pub fn x_times_w_t(x: Rows, w: &[f32], bias: Option<&[f32]>) -> Vec<f32> {
    let out = w.len() / x.cols.max(1);
    by_column_ranges(x.rows, out, CHUNK, |range| {
        dots_with_rows(x, w, bias, range)
    })
}

/// `x WT + b` for `x` `(rows, in)` and `WT` `(in, out)`.
pub fn x_times_wt(x: Rows, wt: &[f32], bias: Option<&[f32]>) -> Vec<f32> {
    let out = wt.len() / x.cols.max(1);
    by_column_ranges(x.rows, out, CHUNK, |range| {
        sums_of_row_segments(x, wt, bias, range)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(rows: usize, cols: usize, seed: u32) -> Vec<f32> {
        (0..rows * cols)
            .map(|i| {
                ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) % 1000) as f32 / 500.0
                    - 1.0
            })
            .collect()
    }

    /// `a (m, k) b (k, n)` the slow way, in f64.
    fn product(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
        (0..m * n)
            .map(|e| {
                (0..k)
                    .map(|i| a[e / n * k + i] as f64 * b[i * n + e % n] as f64)
                    .sum()
            })
            .collect()
    }

    fn transpose(a: &[f32], rows: usize, cols: usize) -> Vec<f32> {
        (0..rows * cols)
            .map(|e| a[e % rows * cols + e / rows])
            .collect()
    }

    fn assert_close(got: &[f32], want: &[f64]) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((*g as f64 - w).abs() < 1e-4 * (1.0 + w.abs()), "{g} vs {w}");
        }
    }

    /// Both forward kernels and the column sums against the plain product, with sizes that are
    /// not multiples of the lanes or of a task's chunk, for 1, 3 and 16 rows.
    #[test]
    fn every_few_row_product_equals_the_plain_one() {
        let (input, output) = (37, 300);
        let w = matrix(output, input, 1);
        let wt = transpose(&w, output, input);
        let bias = matrix(1, output, 2);
        for rows in [1, 3, MAX_ROWS] {
            let x = matrix(rows, input, 3);
            let g = matrix(rows, output, 4);
            let x_rows = Rows {
                data: &x,
                rows,
                cols: input,
            };
            let mut y = product(&x, &wt, rows, input, output);
            assert_close(&x_times_w_t(x_rows, &w, None), &y);
            assert_close(&x_times_wt(x_rows, &wt, None), &y);
            for (e, v) in y.iter_mut().enumerate() {
                *v += bias[e % output] as f64;
            }
            assert_close(&x_times_w_t(x_rows, &w, Some(&bias)), &y);
            assert_close(&x_times_wt(x_rows, &wt, Some(&bias)), &y);
            // The bias gradient's column sums: a row of ones times g.
            let ones = vec![1f32; rows];
            let ones_row = Rows {
                data: &ones,
                rows: 1,
                cols: rows,
            };
            assert_close(
                &x_times_wt(ones_row, &g, None),
                &product(&ones, &g, 1, rows, output),
            );
        }
    }
}
