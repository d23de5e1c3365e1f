//! The kernel for CPUs without bf16 instructions: the same packed bf16 inputs, widened to
//! f32 (exactly: a bf16 is an f32's upper half) and multiplied with f32 multiply-adds. The
//! sums are the AVX512-BF16 kernel's up to the order of additions.

use super::pack::{MR, NR};
use crate::kernels::simd::fma;

vectorized! {
    /// Adds `MR` rows of `A` (`kp` pairs each, rows `a_stride` words apart) times `B`'s
    /// panel (`kp` pairs) to `tile` (`MR x NR`, row-major).
    pub(super) fn tile(kp: usize, a: &[u32], a_stride: usize, b: &[u32], tile: &mut [f32; MR * NR]) {
        let mut low = [0f32; NR];
        let mut high = [0f32; NR];
        for p in 0..kp {
            let panel = &b[p * NR..][..NR];
            for j in 0..NR {
                low[j] = f32::from_bits(panel[j] << 16);
                high[j] = f32::from_bits(panel[j] & 0xffff_0000);
            }
            for r in 0..MR {
                let pair = a[r * a_stride + p];
                let (a_low, a_high) = (f32::from_bits(pair << 16), f32::from_bits(pair & 0xffff_0000));
                let row = &mut tile[r * NR..][..NR];
                for j in 0..NR {
                    row[j] = fma::<FUSED>(a_high, high[j], fma::<FUSED>(a_low, low[j], row[j]));
                }
            }
        }
    }
}
