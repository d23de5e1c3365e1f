//! Rounding f32 to bf16 with AVX512-BF16's conversion, for packing: two lines' values at a
//! time, interleaved into the pairs the kernels read.

use std::arch::x86_64::*;

/// The pairs of `k` values `2p` and `2p + 1` of `width` contiguous lines (`low` and `high`:
/// the lines' values at the two `k`), rounded to bf16 by `vcvtne2ps2bf16` (to nearest even,
/// as [`super::to_bf16`]; denormals flush to zero) into `pairs`, 16 at a time.
///
/// # Safety
/// The CPU must have AVX512F, AVX512BW and AVX512-BF16; `low`, `high` and `pairs` hold
/// `width` values each.
#[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
pub(super) unsafe fn pack_pairs(low: &[f32], high: &[f32], pairs: &mut [u32]) {
    let width = pairs.len().min(low.len()).min(high.len());
    // bf16 lane i of the result is the low half of pair i/2 when i is even: take lane i/2 of
    // the low half (the `low` values), else lane 16 + i/2 (the `high` values).
    let order: [i16; 32] = std::array::from_fn(|i| (i / 2 + 16 * (i % 2)) as i16);
    // SAFETY: 64 bytes read from a 64-byte array.
    let order = unsafe { _mm512_loadu_si512(order.as_ptr().cast()) };
    let mut line = 0;
    while line + 16 <= width {
        // SAFETY: 16 floats from `line`, inside each slice; 16 words written inside `pairs`.
        unsafe {
            let x = _mm512_loadu_ps(low.as_ptr().add(line));
            let y = _mm512_loadu_ps(high.as_ptr().add(line));
            // Lanes 0..16: x rounded; 16..32: y rounded.
            let both: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(y, x));
            let interleaved = _mm512_permutexvar_epi16(order, both);
            _mm512_storeu_si512(pairs.as_mut_ptr().add(line).cast(), interleaved);
        }
        line += 16;
    }
    for i in line..width {
        pairs[i] = u32::from(super::to_bf16(low[i])) | (u32::from(super::to_bf16(high[i])) << 16);
    }
}
