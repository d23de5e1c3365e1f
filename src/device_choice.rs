//! Where a command computes: `--device` resolved (and said on stderr when the choice was not
//! the user's own), and `TRANSFORMER_KERNELS`, which sends every op down candle's composed
//! path on the CPU too.

use crate::device::{select, DeviceError};
use crate::errors::UsageError;
use crate::flags::DeviceArgs;
use crate::progress::Verbosity;

/// The environment variable that chooses the kernels: `fused` or unset, the default (the
/// CPU's fused ops, candle's composed ops on a GPU); `composed`, candle's composed ops on
/// the CPU too, as a GPU runs them; `cuda-fused`, the default plus the fused CUDA kernels
/// (Adam, LayerNorm) on a GPU, not yet checked on one.
pub const KERNELS_VARIABLE: &str = "TRANSFORMER_KERNELS";

/// Reads `TRANSFORMER_KERNELS`; any other value is a usage error.
pub fn choose_kernels() -> anyhow::Result<()> {
    const CHOICES: &str = "use fused, composed or cuda-fused, or unset it";
    match std::env::var(KERNELS_VARIABLE).as_deref() {
        // Blank counts as unset, as for TRANSFORMER_MAX_ISA and TRANSFORMER_TF32.
        Err(std::env::VarError::NotPresent) | Ok("fused") | Ok("") => Ok(()),
        Ok("composed") => {
            crate::kernels::use_composed_everywhere();
            Ok(())
        }
        Ok("cuda-fused") if cfg!(feature = "cuda") => {
            crate::kernels::use_cuda_fused();
            Ok(())
        }
        Ok("cuda-fused") => Err(UsageError(format!(
            "{KERNELS_VARIABLE}=cuda-fused needs a CUDA build (cargo build --release --features \
             cuda); this one has no CUDA kernels"
        ))
        .into()),
        Ok(other) => Err(UsageError(format!(
            "{KERNELS_VARIABLE}={} is not a kernel choice; {CHOICES}",
            shown(other)
        ))
        .into()),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(UsageError(format!("{KERNELS_VARIABLE} is not UTF-8; {CHOICES}")).into())
        }
    }
}

/// The environment variable that lets float32 products on a GPU use TF32 (`on`); `off` or
/// unset keeps them exact, as PyTorch's default does.
pub const TF32_VARIABLE: &str = "TRANSFORMER_TF32";

/// Reads `TRANSFORMER_TF32`; a value other than `on` or `off` is a usage error.
pub fn choose_tf32() -> anyhow::Result<()> {
    match std::env::var(TF32_VARIABLE).as_deref() {
        Err(std::env::VarError::NotPresent) | Ok("off") | Ok("") => Ok(()),
        Ok("on") => {
            crate::device::allow_tf32_products();
            Ok(())
        }
        Ok(other) => Err(UsageError(format!(
            "{TF32_VARIABLE}={} is not a choice; use on or off, or unset it",
            shown(other)
        ))
        .into()),
        Err(std::env::VarError::NotUnicode(_)) => Err(UsageError(format!(
            "{TF32_VARIABLE} is not UTF-8; use on or off, or unset it"
        ))
        .into()),
    }
}

/// A variable's value as a message quotes it: at most 40 characters, then `...`.
fn shown(value: &str) -> String {
    const MOST: usize = 40;
    match value.char_indices().nth(MOST) {
        Some((cut, _)) => format!("{:?}...", &value[..cut]),
        None => format!("{value:?}"),
    }
}

/// Resolves `--device`; says on stderr which device was chosen and why when the choice was
/// not the user's own (auto on a CUDA build). Quiet hides the news that a GPU was found,
/// never that none could be used.
pub fn device_from(args: &DeviceArgs, verbosity: Verbosity) -> anyhow::Result<candle_core::Device> {
    let selected = select(args.device).map_err(|error| match error {
        DeviceError::CudaUnavailable { ordinal, why } => {
            anyhow::anyhow!("--device cuda:{ordinal} is not available: {why}; use --device cpu")
        }
    })?;
    let hidden = verbosity == Verbosity::Quiet && selected.note_is_news;
    if let Some(note) = selected.note.filter(|_| !hidden) {
        eprintln!("{note}");
    }
    Ok(selected.device)
}
