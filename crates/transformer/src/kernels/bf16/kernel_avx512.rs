//! The AVX512-BF16 kernel: an [`MR`] x [`NR`] tile of sums in 24 registers; per pair of `k`
//! values, four 64-byte loads of `B`'s panel, and per row a broadcast of its pair and four
//! `vdpbf16ps` (each adds two bf16 products into each of 16 f32 lanes).

use std::arch::x86_64::*;

use super::pack::{MR, NR};

/// Adds `A`'s panel times `B`'s panel (`kp` pairs each) to `tile` (`MR x NR`, row-major).
///
/// # Safety
/// The CPU must have AVX512F and AVX512-BF16; `a` holds `kp * MR` words and `b` `kp * NR`.
#[target_feature(enable = "avx512f,avx512bf16")]
pub(super) unsafe fn tile(kp: usize, a: &[u32], b: &[u32], tile: &mut [f32; MR * NR]) {
    debug_assert!(a.len() >= kp * MR && b.len() >= kp * NR);
    let (a, b, t) = (a.as_ptr(), b.as_ptr(), tile.as_mut_ptr());
    let mut sums = [[_mm512_setzero_ps(); 4]; MR];
    for (r, row) in sums.iter_mut().enumerate() {
        for (v, sum) in row.iter_mut().enumerate() {
            // SAFETY: the tile holds MR x NR floats.
            *sum = unsafe { _mm512_loadu_ps(t.add(r * NR + v * 16)) };
        }
    }
    for p in 0..kp {
        // SAFETY: `b` holds kp * NR words, so the four 16-word loads at p * NR are inside.
        let panel = unsafe { b.add(p * NR) };
        let columns: [__m512bh; 4] = std::array::from_fn(|v| {
            // SAFETY: as above; a __m512i and a __m512bh are the same 64 bytes.
            unsafe { std::mem::transmute(_mm512_loadu_si512(panel.add(v * 16).cast())) }
        });
        for (r, row) in sums.iter_mut().enumerate() {
            // SAFETY: `a` holds kp * MR words.
            let pair = unsafe { *a.add(p * MR + r) } as i32;
            // SAFETY: the same 64 bytes, read as 32 bf16s.
            let pair: __m512bh = unsafe { std::mem::transmute(_mm512_set1_epi32(pair)) };
            for (sum, column) in row.iter_mut().zip(columns) {
                *sum = _mm512_dpbf16_ps(*sum, pair, column);
            }
        }
    }
    for (r, row) in sums.iter().enumerate() {
        for (v, sum) in row.iter().enumerate() {
            // SAFETY: as for the loads.
            unsafe { _mm512_storeu_ps(t.add(r * NR + v * 16), *sum) };
        }
    }
}

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
