//! Where a command computes: `--device` resolved (and said on stderr when the choice was not
//! the user's own), and `TRANSFORMER_KERNELS`, which sends every op down candle's composed
//! path on the CPU too.

use crate::device::{select, DeviceError};
use crate::errors::UsageError;
use crate::flags::DeviceArgs;
use crate::progress::Verbosity;

/// The environment variable that sends every op down candle's composed path on the CPU too
/// (`composed`), as a GPU runs it; `fused` or unset is the default.
pub const KERNELS_VARIABLE: &str = "TRANSFORMER_KERNELS";

/// Reads `TRANSFORMER_KERNELS`; a value other than `fused` or `composed` is a usage error.
pub(crate) fn choose_kernels() -> anyhow::Result<()> {
    match std::env::var(KERNELS_VARIABLE).as_deref() {
        Err(std::env::VarError::NotPresent) | Ok("fused") => Ok(()),
        Ok("composed") => {
            crate::kernels::use_composed_everywhere();
            Ok(())
        }
        Ok(other) => Err(UsageError(format!(
            "{KERNELS_VARIABLE}={other:?} is not a kernel choice; use fused or composed, or unset it"
        ))
        .into()),
        Err(std::env::VarError::NotUnicode(_)) => Err(UsageError(format!(
            "{KERNELS_VARIABLE} is not UTF-8; use fused or composed, or unset it"
        ))
        .into()),
    }
}

/// Resolves `--device`; says on stderr which device was chosen and why when the choice was
/// not the user's own (auto on a CUDA build). Quiet hides the news that a GPU was found,
/// never that none could be used.
pub(crate) fn device_from(
    args: &DeviceArgs,
    verbosity: Verbosity,
) -> anyhow::Result<candle_core::Device> {
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
