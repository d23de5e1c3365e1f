//! The packed layout both engines read. A product `C (m x n) = A (m x k) B (k x n)` packs
//! `A` in panels of [`MR`] rows and `B` in panels of [`NR`] columns; within a panel, for each
//! pair of `k` values (`k` padded to even with a zero), one `u32` per row (or column) holds
//! the two bf16s, the lower `k` in the low half. A panel's rows and columns past the matrix's
//! edge are zeros, so that the kernels never test for edges inside their loops.

use rayon::prelude::*;

use super::to_bf16;

/// Rows of `A` a kernel call multiplies at once.
pub const MR: usize = 6;
/// Columns of `B` a kernel call multiplies at once (four 16-lane registers).
pub const NR: usize = 64;

/// A strided f32 matrix: element `(i, j)` at `data[i * row_stride + j * col_stride]`. A
/// transposed operand is the same data with its strides swapped.
#[derive(Debug, Clone, Copy)]
pub struct Strided<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl Strided<'_> {
    /// Whether every element it names lies inside `data`.
    pub fn fits(&self) -> bool {
        if self.rows == 0 || self.cols == 0 {
            return true;
        }
        let last = (self.rows - 1)
            .checked_mul(self.row_stride)
            .zip((self.cols - 1).checked_mul(self.col_stride))
            .and_then(|(r, c)| r.checked_add(c));
        last.is_some_and(|last| last < self.data.len())
    }

    /// The transpose: the same elements, rows and columns swapped.
    pub fn t(self) -> Self {
        Self {
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            ..self
        }
    }

    #[inline(always)]
    fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.row_stride + j * self.col_stride]
    }
}

/// `k` pairs: `k` rounded up to even, halved.
pub fn pairs(k: usize) -> usize {
    k.div_ceil(2)
}

/// Packs `a` (`m x k`) in panels of [`MR`] rows: panel `p` is `pairs(k) * MR` words from
/// `p * pairs(k) * MR`.
pub fn pack_a(a: Strided) -> Vec<u32> {
    pack_panels::<MR>(a, |a, i, j| a.at(i, j), a.rows, a.cols)
}

/// Packs `b` (`k x n`) in panels of [`NR`] columns: panel `p` is `pairs(k) * NR` words from
/// `p * pairs(k) * NR`.
pub fn pack_b(b: Strided) -> Vec<u32> {
    pack_panels::<NR>(b, |b, i, j| b.at(j, i), b.cols, b.rows)
}

/// Panels of `W` lines (rows of `A`, columns of `B`) of the `lines x k` matrix that `read`
/// gives element `(line, kk)` of.
fn pack_panels<const W: usize>(
    matrix: Strided,
    read: fn(&Strided, usize, usize) -> f32,
    lines: usize,
    k: usize,
) -> Vec<u32> {
    let kp = pairs(k);
    let panels = lines.div_ceil(W);
    let mut packed = vec![0u32; panels * kp * W];
    if kp == 0 {
        return packed;
    }
    packed
        .par_chunks_mut(kp * W)
        .enumerate()
        .for_each(|(panel, out)| {
            let first = panel * W;
            let width = W.min(lines - first);
            for line in 0..width {
                for p in 0..kp {
                    let low = to_bf16(read(&matrix, first + line, 2 * p));
                    let high = if 2 * p + 1 < k {
                        to_bf16(read(&matrix, first + line, 2 * p + 1))
                    } else {
                        0
                    };
                    out[p * W + line] = u32::from(low) | (u32::from(high) << 16);
                }
            }
        });
    packed
}
