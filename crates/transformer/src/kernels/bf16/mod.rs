//! Matrix products with bf16 inputs and f32 sums, for mixed-precision training on the CPU
//! (`training.dtype = "bf16"`), as PyTorch's autocast computes them: each operand is rounded
//! to bf16 (round to nearest, ties to even) as it is packed, and the products are summed in
//! f32. Master weights, gradients and every other op stay f32.
//!
//! The engine is chosen once at run time ([`engine`]): AMX tiles where the CPU has AMX-BF16
//! and the operating system grants it (Sapphire Rapids and later; checked on a product whose
//! answer is known before it is trusted), else AVX512-BF16's `vdpbf16ps` (two bf16 products
//! into each f32 lane per instruction: Zen 4, Zen 5, Sapphire Rapids), else the same packed
//! data multiplied in f32 (emulated: the same rounding, f32's speed at best). All read one
//! layout of `B` ([`pack`]): pairs of consecutive `k` values side by side, the order
//! `vdpbf16ps` and `tdpbf16ps` take them in. `TRANSFORMER_BF16_ENGINE` (`amx-bf16`,
//! `avx512-bf16`, `emulated`) picks a slower engine the CPU also has, to compare them;
//! `TRANSFORMER_MAX_ISA` ([`super::isa`]) below `amx` or `avx512-bf16` rules those out.

#[cfg(target_arch = "x86_64")]
mod amx;
mod autocast;
#[cfg(target_arch = "x86_64")]
mod convert_avx512;
mod gemm;
#[cfg(target_arch = "x86_64")]
mod kernel_avx512;
mod kernel_emulated;
pub mod pack;
mod packed;
#[cfg(test)]
mod tests;

use std::sync::OnceLock;

pub use autocast::{active, autocast, rounded_in_scope, Autocast};
pub use gemm::{gemm, Operand};
pub use packed::PackedWeight;

/// The instructions bf16 products run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// AMX-BF16: `tdpbf16ps` on tile registers.
    Amx,
    /// AVX512-BF16: `vdpbf16ps` on 512-bit registers.
    Avx512Bf16,
    /// No bf16 instructions: the rounded inputs multiplied in f32.
    Emulated,
}

impl Engine {
    /// What it is called in logs and `bench`'s JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::Amx => "amx-bf16",
            Self::Avx512Bf16 => "avx512-bf16",
            Self::Emulated => "emulated",
        }
    }

    /// Whether this CPU runs bf16 products faster than f32 ones.
    pub fn is_native(self) -> bool {
        self != Self::Emulated
    }
}

/// The engine bf16 products run on here, chosen once: the best this CPU has (see the
/// module docs), or the one `TRANSFORMER_BF16_ENGINE` names if the CPU has it too.
pub fn engine() -> Engine {
    static CHOSEN: OnceLock<Engine> = OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let engines = available();
        let best = engines[0];
        let Some(asked) = std::env::var_os(ENGINE_VARIABLE).filter(|v| !v.is_empty()) else {
            return best;
        };
        // Shown as given (lossily, and cut short): a warning line, not an echo of anything.
        let asked = asked.to_string_lossy();
        let asked = match asked.chars().nth(40) {
            Some(_) => format!("{}...", asked.chars().take(40).collect::<String>()),
            None => asked.into_owned(),
        };
        let names = |engines: &[Engine]| {
            let names: Vec<_> = engines.iter().map(|e| e.name()).collect();
            names.join(", ")
        };
        match engines.iter().find(|e| e.name() == asked) {
            Some(&engine) => engine,
            None if ALL.iter().any(|e| e.name() == asked) => {
                use crate::kernels::isa::{self, Isa};
                let level = match asked.as_str() {
                    "amx-bf16" => Isa::Amx,
                    _ => Isa::Avx512Bf16,
                };
                let why = match level.on_this_cpu() && !level.runs() {
                    true => format!("{}={} rules it out", isa::CAP_VARIABLE, isa::cap().name()),
                    false => format!("this CPU has no {asked}"),
                };
                log::warn!(
                    "{ENGINE_VARIABLE}={asked:?}: {why} (engines here: {}); using {}",
                    names(engines),
                    best.name()
                );
                best
            }
            None => {
                log::warn!(
                    "{ENGINE_VARIABLE}={asked:?} is not a bf16 engine (one of {}); using {}",
                    names(&ALL),
                    best.name()
                );
                best
            }
        }
    })
}

/// Why no native engine runs here, for a warning or an error: the CPU has none, or
/// `TRANSFORMER_MAX_ISA` rules out the ones it has.
pub fn no_native_engine() -> String {
    use crate::kernels::isa::{self, Isa};
    if Isa::Avx512Bf16.on_this_cpu() && !Isa::Avx512Bf16.runs() {
        return format!(
            "{}={} rules out this CPU's bf16 products (AVX512-BF16{})",
            isa::CAP_VARIABLE,
            isa::cap().name(),
            if Isa::Amx.on_this_cpu() {
                ", AMX-BF16"
            } else {
                ""
            }
        );
    }
    "this CPU has no bf16 products (neither AMX-BF16 nor AVX512-BF16)".into()
}

/// Whether `TRANSFORMER_BF16_ENGINE` chose the engine in use (so emulation was asked for,
/// not fallen back to).
pub fn engine_asked_for() -> bool {
    std::env::var(ENGINE_VARIABLE).is_ok_and(|asked| asked == engine().name())
}

/// Names the engine to use instead of the best (for comparing them).
const ENGINE_VARIABLE: &str = "TRANSFORMER_BF16_ENGINE";

/// Every engine, fastest first where a CPU has several.
const ALL: [Engine; 3] = [Engine::Amx, Engine::Avx512Bf16, Engine::Emulated];

/// The engines this CPU runs, best first (emulation always last); found once.
pub fn available() -> &'static [Engine] {
    static FOUND: OnceLock<Vec<Engine>> = OnceLock::new();
    FOUND.get_or_init(find_engines)
}

fn find_engines() -> Vec<Engine> {
    let mut engines = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        use crate::kernels::isa::Isa;
        let avx512 = Isa::Avx512Bf16.runs();
        let fallback = if avx512 {
            Engine::Avx512Bf16
        } else {
            Engine::Emulated
        };
        // Under an ISA cap below AMX the tiles are not even asked for.
        let tiles = match Isa::Amx.runs() {
            true => amx::tiles(),
            false => &amx::Tiles::Missing,
        };
        match tiles {
            amx::Tiles::Missing => {}
            amx::Tiles::Denied(reason) => log::warn!(
                "this CPU has AMX-BF16 but {reason}: bf16 products run on {} instead",
                fallback.name()
            ),
            amx::Tiles::Granted => match amx_checked() {
                Ok(()) => engines.push(Engine::Amx),
                Err(wrong) => log::warn!(
                    "AMX-BF16 tiles gave a wrong product ({wrong}): bf16 products run on {} \
                     instead",
                    fallback.name()
                ),
            },
        }
        if avx512 {
            engines.push(Engine::Avx512Bf16);
        }
    }
    engines.push(Engine::Emulated);
    engines
}

/// A product on the AMX tiles whose answer is known exactly (small multiples of 1/16, exact
/// in bf16, and sums exact in f32), across tile edges in every dimension: the kernel is
/// trusted only once it gives that answer.
#[cfg(target_arch = "x86_64")]
fn amx_checked() -> Result<(), String> {
    let (m, k, n) = (37, 70, 75);
    let value = |i: usize, j: usize| ((i * 7 + j * 13) % 33) as f32 / 16.0 - 1.0;
    let a: Vec<f32> = (0..m * k).map(|x| value(x / k, x % k)).collect();
    let b: Vec<f32> = (0..k * n).map(|x| value(x % n + 5, x / n)).collect();
    let operand = |data, rows, cols| pack::Strided {
        data,
        rows,
        cols,
        row_stride: cols,
        col_stride: 1,
    };
    let mut got = vec![0f32; m * n];
    // SAFETY: called only once the tiles are granted; the operands fit and are not empty.
    unsafe { amx::gemm_add(operand(&a, m, k), operand(&b, k, n), &mut got) };
    for (index, &got) in got.iter().enumerate() {
        let (i, j) = (index / n, index % n);
        let want: f32 = (0..k).map(|kk| a[i * k + kk] * b[kk * n + j]).sum();
        if got != want {
            return Err(format!("C[{i}][{j}] = {got}, not {want}"));
        }
    }
    Ok(())
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
