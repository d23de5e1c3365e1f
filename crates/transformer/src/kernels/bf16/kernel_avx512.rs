//! The AVX512-BF16 kernel: an [`MR`] x [`NR`] tile of sums in 24 registers; per pair of `k`
//! values, four 64-byte loads of `B`'s panel, and per row a broadcast of its pair (from the
//! row's own stream of pairs) and four `vdpbf16ps` (each adds two bf16 products into each of
//! 16 f32 lanes).

use std::arch::x86_64::*;

use super::pack::{MR, NR};

/// Adds `MR` rows of `A` (`kp` pairs each, rows `a_stride` words apart) times `B`'s panel
/// (`kp` pairs) to the `MR x NR` block of `c` whose rows start `c_stride` floats apart: a
/// whole tile of the product in place, or a scratch tile at its edges.
///
/// # Safety
/// The CPU must have AVX512F and AVX512-BF16; `a` holds `(MR - 1) * a_stride + kp` words and
/// `b` `kp * NR`; `c` holds `MR` rows of `NR` floats, `c_stride` apart (`c_stride >= NR`).
#[target_feature(enable = "avx512f,avx512bf16")]
pub(super) unsafe fn tile(
    kp: usize,
    (a, a_stride): (&[u32], usize),
    b: &[u32],
    c: *mut f32,
    c_stride: usize,
) {
    debug_assert!(a.len() >= (MR - 1) * a_stride + kp && b.len() >= kp * NR && c_stride >= NR);
    let (a, b, t) = (a.as_ptr(), b.as_ptr(), c);
    let mut sums = [[_mm512_setzero_ps(); 4]; MR];
    for (r, row) in sums.iter_mut().enumerate() {
        for (v, sum) in row.iter_mut().enumerate() {
            // SAFETY: the caller's `c` holds MR rows of NR floats, c_stride apart.
            *sum = unsafe { _mm512_loadu_ps(t.add(r * c_stride + v * 16)) };
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
            // SAFETY: `a` holds (MR - 1) * a_stride + kp words.
            let pair = unsafe { *a.add(r * a_stride + p) } as i32;
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
            unsafe { _mm512_storeu_ps(t.add(r * c_stride + v * 16), *sum) };
        }
    }
}
