//! The x86-64 kernels, one per instruction set, all on the packed layout (see
//! [`QuantizedMatrix`]) and the shifted input bytes: AVX-512 VNNI on blocks of 16 outputs,
//! AVX-VNNI and AVX2 on blocks of 8. Each gives exactly the plain loop's sums; the caller runs
//! one only where the CPU has its features.
//!
//! For each tile of `T` input rows and each step of `B` blocks of outputs, `T x B` registers
//! of sums; per group of 4 inputs, one load per block and, per row, a broadcast of its 4
//! bytes and `B` multiply-adds. Several blocks a step keep enough independent sums in flight
//! to hide the multiply-add's latency when the tile has few rows (one row: four blocks); the
//! tile shapes keep sums, weights and the broadcast inside the register file (32 registers
//! for AVX-512, 16 for AVX2, which also holds `|x|` and a vector of ones).

use std::arch::x86_64::*;
use std::ops::Range;

use super::quantize::QuantizedRows;
use super::QuantizedMatrix;

/// Defines `$module::dots`, which fills `sums` `(rows, range)` from the shifted input bytes:
/// `$step` adds one register's products of a broadcast group of 4 input bytes `$x` and a
/// block's weights `$w` to the sums `$acc`, and the shift's share (`shift sum_k w`) is taken
/// off at the end. `tiles` maps the rows left to the tile shape `(T, B)`, the last arm being
/// the largest tile.
macro_rules! packed_dots {
    ($module:ident, $features:literal, $vector:ty, $lanes:literal,
     $zero:path, $load:path, $store:path, $broadcast:path,
     tiles { $($rows:literal => ($t:literal, $b:literal),)* _ => ($tmax:literal, $bmax:literal) },
     |$acc:ident, $x:ident, $w:ident| $step:expr) => {
        mod $module {
            use super::*;

            /// Outputs per block: one register of i32 sums.
            const BLOCK: usize = $lanes;

            #[target_feature(enable = $features)]
            pub(crate) unsafe fn dots(
                inputs: &QuantizedRows,
                w: &QuantizedMatrix,
                range: Range<usize>,
                sums: &mut [i32],
            ) {
                let mut r0 = 0;
                while r0 < inputs.rows {
                    let left = inputs.rows - r0;
                    match left {
                        $($rows => tile::<$t, $b>(inputs, w, &range, r0, sums),)*
                        _ => tile::<$tmax, $bmax>(inputs, w, &range, r0, sums),
                    }
                    r0 += left.min($tmax);
                }
            }

            /// Rows `r0..r0 + T` against every block of `range`, `B` blocks a step (one at a
            /// time for the blocks left over).
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn tile<const T: usize, const B: usize>(
                inputs: &QuantizedRows,
                w: &QuantizedMatrix,
                range: &Range<usize>,
                r0: usize,
                sums: &mut [i32],
            ) {
                let last = range.end.div_ceil(BLOCK);
                let mut block = range.start / BLOCK;
                while block + B <= last {
                    blocks::<T, B>(inputs, w, range, r0, block, sums);
                    block += B;
                }
                while block < last {
                    blocks::<T, 1>(inputs, w, range, r0, block, sums);
                    block += 1;
                }
            }

            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn blocks<const T: usize, const B: usize>(
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
                let mut acc: [[$vector; B]; T] = [[$zero(); B]; T];
                for g in 0..groups {
                    let mut wv: [$vector; B] = [$zero(); B];
                    for (b, wv) in wv.iter_mut().enumerate() {
                        *wv = $load(weights.add(b * block_bytes + g * 4 * BLOCK).cast());
                    }
                    for (t, acc) in acc.iter_mut().enumerate() {
                        let x = inputs.shifted.as_ptr().add((r0 + t) * inputs.stride + g * 4);
                        let $x = $broadcast(x.cast::<i32>().read_unaligned());
                        for (acc, $w) in acc.iter_mut().zip(&wv) {
                            let $w = *$w;
                            let $acc = *acc;
                            *acc = $step;
                        }
                    }
                }
                for (t, acc) in acc.iter().enumerate() {
                    for (b, acc) in acc.iter().enumerate() {
                        let mut lanes = [0i32; BLOCK];
                        $store(lanes.as_mut_ptr().cast(), *acc);
                        for (lane, sum) in lanes.iter().enumerate() {
                            let j = (first_block + b) * BLOCK + lane;
                            if range.contains(&j) {
                                let offset = inputs.shift * w.weight_sums[j];
                                sums[(r0 + t) * width + j - range.start] = sum - offset;
                            }
                        }
                    }
                }
            }
        }
    };
}

packed_dots!(
    avx512_vnni,
    "avx512f,avx512bw,avx512vnni",
    __m512i,
    16,
    _mm512_setzero_si512,
    _mm512_loadu_si512,
    _mm512_storeu_si512,
    _mm512_set1_epi32,
    tiles { 1 => (1, 4), 2 => (2, 4), 3 => (3, 4), 4 => (4, 2), 5 => (5, 2), 6 => (6, 2),
            7 => (7, 2), _ => (8, 2) },
    |acc, x, w| _mm512_dpbusd_epi32(acc, x, w)
);

packed_dots!(
    avx_vnni,
    "avx2,avxvnni",
    __m256i,
    8,
    _mm256_setzero_si256,
    _mm256_loadu_si256,
    _mm256_storeu_si256,
    _mm256_set1_epi32,
    tiles { 1 => (1, 4), 2 => (2, 4), 3 => (3, 3), 4 => (4, 2), 5 => (5, 2), _ => (6, 2) },
    |acc, x, w| _mm256_dpbusd_avx_epi32(acc, x, w)
);

// x in [1, 127] (7 bits plus 64) times w: at most 2 * 127 * 127 per pair, inside i16.
packed_dots!(
    avx2,
    "avx2",
    __m256i,
    8,
    _mm256_setzero_si256,
    _mm256_loadu_si256,
    _mm256_storeu_si256,
    _mm256_set1_epi32,
    tiles { 1 => (1, 4), 2 => (2, 4), 3 => (3, 3), 4 => (4, 2), 5 => (5, 2), _ => (6, 2) },
    |acc, x, w| _mm256_add_epi32(
        acc,
        _mm256_madd_epi16(_mm256_maddubs_epi16(x, w), _mm256_set1_epi16(1)),
    )
);

pub(super) use avx2::dots as dots_avx2;
pub(super) use avx512_vnni::dots as dots_avx512_vnni;
pub(super) use avx_vnni::dots as dots_avx_vnni;
