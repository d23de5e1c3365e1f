//! Matrix products with bf16 inputs and f32 sums, for mixed-precision training on the CPU
//! (`training.dtype = "bf16"`), as PyTorch's autocast computes them: each operand is rounded
//! to bf16 (round to nearest, ties to even) as it is packed, and the products are summed in
//! f32. Master weights, gradients and every other op stay f32.
//!
//! The engine is chosen once at run time ([`engine`]): AVX512-BF16's `vdpbf16ps` (two bf16
//! products into each f32 lane per instruction: Zen 4, Zen 5, Sapphire Rapids) where the CPU
//! has it, else the same packed data multiplied in f32 (emulated: the same rounding, f32's
//! speed at best). Both read one packed layout ([`pack`]): pairs of consecutive `k` values
//! side by side, the order `vdpbf16ps` takes them in.

mod autocast;
#[cfg(target_arch = "x86_64")]
mod convert_avx512;
mod gemm;
#[cfg(target_arch = "x86_64")]
mod kernel_avx512;
mod kernel_emulated;
pub mod pack;
#[cfg(test)]
mod tests;

use std::sync::OnceLock;

pub use autocast::{active, autocast, Autocast};
pub use gemm::{gemm, Operand};

/// The instructions bf16 products run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// AVX512-BF16: `vdpbf16ps` on 512-bit registers.
    Avx512Bf16,
    /// No bf16 instructions: the rounded inputs multiplied in f32.
    Emulated,
}

impl Engine {
    /// What it is called in logs and `bench`'s JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::Avx512Bf16 => "avx512-bf16",
            Self::Emulated => "emulated",
        }
    }

    /// Whether this CPU runs bf16 products faster than f32 ones.
    pub fn is_native(self) -> bool {
        self != Self::Emulated
    }
}

/// The best engine this CPU has, found once.
pub fn engine() -> Engine {
    static FOUND: OnceLock<Engine> = OnceLock::new();
    *FOUND.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bf16")
        {
            return Engine::Avx512Bf16;
        }
        Engine::Emulated
    })
}

/// `x` rounded to bf16 (nearest, ties to even), as its 16 bits; a NaN stays a (quiet) NaN.
#[inline(always)]
pub fn to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    let rounded = bits.wrapping_add(0x7fff + ((bits >> 16) & 1));
    let nan = (bits & 0x7fff_ffff) > 0x7f80_0000;
    // Branch-free, so that packing loops vectorize.
    let value = if nan {
        (bits >> 16) | 0x40
    } else {
        rounded >> 16
    };
    value as u16
}

/// The f32 a bf16 stands for (exact).
#[inline(always)]
pub fn from_bf16(x: u16) -> f32 {
    f32::from_bits(u32::from(x) << 16)
}
