//! The packed layout the engines read. A product `C (m x n) = A (m x k) B (k x n)` packs
//! `A` row-major in bf16 and `B` in panels of [`NR`] columns. One `u32` holds a pair of
//! consecutive `k` values (`k` padded to even with a zero), the lower `k` in the low half: a
//! row of `A` is its pairs side by side (a bf16 row as it lies in memory), and a panel of `B`
//! has, for each pair, one word per column. Rows and columns past the matrix's edge (to whole
//! panels of [`MR`] rows and [`NR`] columns) are zeros, so that the kernels never test for
//! edges inside their loops.

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
}

/// `k` pairs: `k` rounded up to even, halved.
pub fn pairs(k: usize) -> usize {
    k.div_ceil(2)
}

/// Packs `a` (`m x k`) row-major, `pairs(k)` words a row, in whole panels of [`MR`] rows:
/// panel `p` is `pairs(k) * MR` words from `p * pairs(k) * MR`.
pub fn pack_a(a: Strided) -> Vec<u32> {
    pack_rows(a, pairs(a.cols), a.rows.next_multiple_of(MR))
}

/// Packs `b` (`k x n`) in panels of [`NR`] columns: panel `p` is `pairs(k) * NR` words from
/// `p * pairs(k) * NR`.
pub fn pack_b(b: Strided) -> Vec<u32> {
    pack_b_padded(b, pairs(b.rows))
}

/// [`pack_b`] with each panel `panel_pairs` pairs long (at least `pairs(k)`; the pairs past
/// `k` are zeros), for kernels that read `k` in fixed-size steps.
pub fn pack_b_padded(b: Strided, panel_pairs: usize) -> Vec<u32> {
    pack_panels::<NR>(
        b.data,
        (b.cols, b.col_stride),
        (b.rows, b.row_stride),
        panel_pairs,
    )
}

/// `a` (`m x k`) row by row, each row's pairs side by side (a row-major bf16 matrix, `k`
/// padded to even), rows `row_pairs` words apart (at least `pairs(k)`; zeros past `k`), and
/// `rows` rows (at least `m`; zeros past `m`): the layout AMX tiles load.
pub fn pack_rows(a: Strided, row_pairs: usize, rows: usize) -> Vec<u32> {
    let mut packed = pack_panels::<1>(
        a.data,
        (a.rows, a.row_stride),
        (a.cols, a.col_stride),
        row_pairs,
    );
    packed.resize(rows.max(a.rows) * row_pairs, 0);
    packed
}

/// Panels of `W` lines of the matrix whose element (line, kk) is
/// `data[line * line_stride + kk * k_stride]`, for `lines` lines of `k` values; each panel
/// `panel_pairs * W` words (`panel_pairs >= pairs(k)`; the pairs past `k` stay zero).
fn pack_panels<const W: usize>(
    data: &[f32],
    (lines, line_stride): (usize, usize),
    (k, k_stride): (usize, usize),
    panel_pairs: usize,
) -> Vec<u32> {
    let kp = panel_pairs.max(pairs(k));
    let panels = lines.div_ceil(W);
    let mut packed = vec![0u32; panels * kp * W];
    if pairs(k) == 0 {
        return packed;
    }
    if line_stride == 1 && k_stride != 1 && native_pairs() {
        // Lines contiguous: each pair of `k` converted 16 lines an instruction, panels
        // narrower than a vector a group (about 64 lines) at a time.
        let group = if W < 16 { 64 / W } else { 1 };
        packed
            .par_chunks_mut(group * kp * W)
            .enumerate()
            .for_each(|(index, out)| {
                let first = index * group * W;
                let width = (group * W).min(lines - first);
                pack_contiguous_lines::<W>(&data[first..], (k, k_stride), width, kp, out);
            });
        return packed;
    }
    // Tasks of some thousands of words at least: a row of A alone is too little work.
    let least_panels = (4096 / (kp * W)).max(1);
    packed
        .par_chunks_mut(kp * W)
        .with_min_len(least_panels)
        .enumerate()
        .for_each(|(panel, out)| {
            let first = panel * W;
            let width = W.min(lines - first);
            let base = first * line_stride;
            if k_stride == 1 {
                pack_along_k(data, base, line_stride, width, k, W, out);
            } else {
                pack_across_lines(data, base, (line_stride, k_stride), width, k, W, out);
            }
        });
    packed
}

/// Whether the CPU converts pairs of lines with `vcvtne2ps2bf16` (AVX512-BF16 and BW).
/// (Not by way of `engine()`: choosing the engine packs a test product.)
fn native_pairs() -> bool {
    crate::kernels::isa::Isa::Avx512Bf16.runs()
}

/// Consecutive panels of `W` contiguous lines (`width` lines in all, from `data`'s start,
/// panels `panel_pairs * W` words apart), each pair of `k` converted for all of them at once:
/// straight into its place when they fit one panel, else spread to their panels.
fn pack_contiguous_lines<const W: usize>(
    data: &[f32],
    (k, k_stride): (usize, usize),
    width: usize,
    panel_pairs: usize,
    out: &mut [u32],
) {
    let kp = pairs(k);
    // The missing partner of an odd `k`'s last value.
    let zeros = if k % 2 == 1 {
        vec![0f32; width]
    } else {
        Vec::new()
    };
    let mut spread = if width > W {
        vec![0u32; width]
    } else {
        Vec::new()
    };
    for p in 0..kp {
        let low = &data[2 * p * k_stride..][..width];
        let high = if 2 * p + 1 < k {
            &data[(2 * p + 1) * k_stride..][..width]
        } else {
            &zeros
        };
        let pairs = if width > W {
            &mut spread[..]
        } else {
            &mut out[p * W..][..width]
        };
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller checked `native_pairs`; the slices hold `width` values.
        unsafe {
            super::convert_avx512::pack_pairs(low, high, pairs);
        }
        for (line, pair) in spread.iter().enumerate() {
            out[(line / W) * panel_pairs * W + p * W + line % W] = *pair;
        }
    }
}

vectorized! {
    /// One panel, reading each line's `k` values in order (they are contiguous): a line's
    /// pairs are two neighbouring floats.
    fn pack_along_k(
        data: &[f32],
        base: usize,
        line_stride: usize,
        width: usize,
        k: usize,
        w: usize,
        out: &mut [u32]
    ) {
        // Each line's pairs made side by side (a loop the compiler vectorizes): straight in
        // place for panels one line wide, else first aside, then spread to their places a
        // panel's width apart.
        if w == 1 {
            line_pairs(&data[base..][..k], &mut out[..k.div_ceil(2)]);
            return;
        }
        let mut made = vec![0u32; k.div_ceil(2)];
        for line in 0..width {
            line_pairs(&data[base + line * line_stride..][..k], &mut made);
            for (p, pair) in made.iter().enumerate() {
                out[p * w + line] = *pair;
            }
        }
    }
}

/// A line's `k` values as its pairs, the last one's partner zero when `k` is odd.
#[inline(always)]
fn line_pairs(line: &[f32], out: &mut [u32]) {
    let k = line.len();
    let (pairs, odd) = line.split_at(k & !1);
    for (pair, two) in out.iter_mut().zip(pairs.chunks_exact(2)) {
        *pair = u32::from(to_bf16(two[0])) | (u32::from(to_bf16(two[1])) << 16);
    }
    if let [last] = odd {
        out[k / 2] = u32::from(to_bf16(*last));
    }
}

vectorized! {
    /// One panel, a pair of `k` at a time across its lines (the lines contiguous, or neither
    /// dimension is).
    fn pack_across_lines(
        data: &[f32],
        base: usize,
        strides: (usize, usize),
        width: usize,
        k: usize,
        w: usize,
        out: &mut [u32]
    ) {
        let (line_stride, k_stride) = strides;
        for p in 0..k.div_ceil(2) {
            let low = base + 2 * p * k_stride;
            let pairs = &mut out[p * w..][..width];
            if 2 * p + 1 < k {
                let high = low + k_stride;
                for (line, pair) in pairs.iter_mut().enumerate() {
                    let (x, y) = (data[low + line * line_stride], data[high + line * line_stride]);
                    *pair = u32::from(to_bf16(x)) | (u32::from(to_bf16(y)) << 16);
                }
            } else {
                for (line, pair) in pairs.iter_mut().enumerate() {
                    *pair = u32::from(to_bf16(data[low + line * line_stride]));
                }
            }
        }
    }
}
