//! The x86-64 kernels: AVX-512 VNNI on the packed layout, AVX-VNNI and AVX2 on rows. Each
//! gives exactly the plain loop's sums; the caller runs one only where the CPU has its
//! features.

use std::arch::x86_64::*;
use std::ops::Range;

use super::quantize::QuantizedRows;
use super::{QuantizedMatrix, BLOCK};

/// The packed layout's kernel (see [`QuantizedMatrix`]): for each tile of up to 8 input
/// rows and each step of `B` blocks of 16 outputs, `T x B` accumulators of 16 sums; per
/// group of 4 inputs, one 64-byte load per block and, per row, a broadcast of its 4 bytes
/// and `B` `vpdpbusd`s. Several blocks a step keep enough independent sums in flight to
/// hide `vpdpbusd`'s latency when the tile has few rows (one row: four blocks).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn dots_packed(
    inputs: &QuantizedRows,
    w: &QuantizedMatrix,
    range: Range<usize>,
    sums: &mut [i32],
) {
    let mut r0 = 0;
    while r0 < inputs.rows {
        match inputs.rows - r0 {
            1 => packed_tile::<1, 4>(inputs, w, &range, r0, sums),
            2 => packed_tile::<2, 4>(inputs, w, &range, r0, sums),
            3 => packed_tile::<3, 4>(inputs, w, &range, r0, sums),
            4 => packed_tile::<4, 2>(inputs, w, &range, r0, sums),
            5 => packed_tile::<5, 2>(inputs, w, &range, r0, sums),
            6 => packed_tile::<6, 2>(inputs, w, &range, r0, sums),
            7 => packed_tile::<7, 2>(inputs, w, &range, r0, sums),
            _ => packed_tile::<8, 2>(inputs, w, &range, r0, sums),
        }
        r0 += (inputs.rows - r0).min(8);
    }
}

/// Rows `r0..r0 + T` against every block of `range`, `B` blocks a step (one at a time
/// for the blocks left over).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn packed_tile<const T: usize, const B: usize>(
    inputs: &QuantizedRows,
    w: &QuantizedMatrix,
    range: &Range<usize>,
    r0: usize,
    sums: &mut [i32],
) {
    let last = range.end.div_ceil(BLOCK);
    let mut block = range.start / BLOCK;
    while block + B <= last {
        packed_blocks::<T, B>(inputs, w, range, r0, block, sums);
        block += B;
    }
    while block < last {
        packed_blocks::<T, 1>(inputs, w, range, r0, block, sums);
        block += 1;
    }
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn packed_blocks<const T: usize, const B: usize>(
    inputs: &QuantizedRows,
    w: &QuantizedMatrix,
    range: &Range<usize>,
    r0: usize,
    first_block: usize,
    sums: &mut [i32],
) {
    let width = range.len();
    let groups = w.stride / 4;
    let block_bytes = groups * 4 * BLOCK;
    let weights = w.data.as_ptr().add(first_block * block_bytes);
    let mut acc = [[_mm512_setzero_si512(); B]; T];
    for g in 0..groups {
        let mut wv = [_mm512_setzero_si512(); B];
        for (b, wv) in wv.iter_mut().enumerate() {
            *wv = _mm512_loadu_si512(weights.add(b * block_bytes + g * 4 * BLOCK).cast());
        }
        for (t, acc) in acc.iter_mut().enumerate() {
            let x = inputs
                .shifted
                .as_ptr()
                .add((r0 + t) * inputs.stride + g * 4);
            let xb = _mm512_set1_epi32(x.cast::<i32>().read_unaligned());
            for (acc, wv) in acc.iter_mut().zip(&wv) {
                *acc = _mm512_dpbusd_epi32(*acc, xb, *wv);
            }
        }
    }
    for (t, acc) in acc.iter().enumerate() {
        for (b, acc) in acc.iter().enumerate() {
            let mut lanes = [0i32; BLOCK];
            _mm512_storeu_si512(lanes.as_mut_ptr().cast(), *acc);
            for (lane, sum) in lanes.iter().enumerate() {
                let j = (first_block + b) * BLOCK + lane;
                if range.contains(&j) {
                    sums[(r0 + t) * width + j - range.start] = sum - w.offsets[j];
                }
            }
        }
    }
}

/// Defines a kernel that fills `sums` `(rows, range)`: outputs outer and input rows inner,
/// so that each weight row is read from memory once and then from L1. Per output and row,
/// `$step` adds one register's worth (`$bytes`) of products of the `$inputs` bytes (shifted
/// or signed) and the weight row into an i32 accumulator, which `$sum` totals; `$offset`
/// subtracts the shift's share (`128 sum_k w`) or not.
macro_rules! dot_kernel {
    ($name:ident, $features:literal, $bytes:literal, $load:path, $inputs:ident,
     $offset:literal, $zero:expr, |$acc:ident, $x:ident, $w:ident| $step:expr, |$total:ident| $sum:expr) => {
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $name(
            inputs: &QuantizedRows,
            w: &QuantizedMatrix,
            range: Range<usize>,
            sums: &mut [i32],
        ) {
            let width = range.len();
            for (i, j) in range.enumerate() {
                let row = w.data.as_ptr().add(j * w.stride);
                for r in 0..inputs.rows {
                    let x = inputs.$inputs.as_ptr().add(r * inputs.stride);
                    let mut $acc = $zero;
                    for k in (0..w.stride).step_by($bytes) {
                        let $x = $load(x.add(k).cast());
                        let $w = $load(row.add(k).cast());
                        $acc = $step;
                    }
                    let $total = $acc;
                    let offset = if $offset { w.offsets[j] } else { 0 };
                    sums[r * width + i] = $sum - offset;
                }
            }
        }
    };
}

mod avx_vnni {
    use super::*;
    dot_kernel!(
        dots,
        "avx2,avxvnni",
        32,
        _mm256_loadu_si256,
        shifted,
        true,
        _mm256_setzero_si256(),
        |acc, x, w| _mm256_dpbusd_avx_epi32(acc, x, w),
        |acc| horizontal_sum(acc)
    );
}

mod avx2 {
    use super::*;
    // |x| (unsigned) times w with x's sign: at most 2 * 127 * 127 per pair, inside i16.
    dot_kernel!(
        dots,
        "avx2",
        32,
        _mm256_loadu_si256,
        signed,
        false,
        _mm256_setzero_si256(),
        |acc, x, w| _mm256_add_epi32(
            acc,
            _mm256_madd_epi16(
                _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(w, x)),
                _mm256_set1_epi16(1),
            ),
        ),
        |acc| horizontal_sum(acc)
    );
}

pub(super) use avx2::dots as dots_avx2;
pub(super) use avx_vnni::dots as dots_avx_vnni;

#[inline]
#[target_feature(enable = "avx2")]
unsafe fn horizontal_sum(v: __m256i) -> i32 {
    let halves = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let pairs = _mm_add_epi32(halves, _mm_shuffle_epi32::<0b01_00_11_10>(halves));
    let one = _mm_add_epi32(pairs, _mm_shuffle_epi32::<0b10_11_00_01>(pairs));
    _mm_cvtsi128_si32(one)
}
