//! Choosing where tensors live: the only file that names CUDA or the CPU.

use std::str::FromStr;

use anyhow::bail;
use candle_core::Device;

/// What `--device` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceRequest {
    /// CUDA when this build has it and a GPU answers, else the CPU.
    Auto,
    Cpu,
    Cuda(usize),
}

impl FromStr for DeviceRequest {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        match s {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "cuda" => Ok(Self::Cuda(0)),
            _ => match s.strip_prefix("cuda:").map(str::parse::<usize>) {
                Some(Ok(ordinal)) => Ok(Self::Cuda(ordinal)),
                _ => bail!("{s:?} is not a device; use auto, cpu, cuda or cuda:N"),
            },
        }
    }
}

impl DeviceRequest {
    /// What this request means for a rank of a distributed run: `cuda` (`cuda:0`) is the
    /// GPU of the rank's place on its node, so that each rank has a GPU of its own.
    pub fn for_local_rank(self, local_rank: usize) -> Self {
        match self {
            Self::Cuda(0) => Self::Cuda(local_rank),
            other => other,
        }
    }
}

/// The device to run on and, where the choice was not the user's own, a one-line note
/// saying which and why (for stderr).
pub struct SelectedDevice {
    pub device: Device,
    pub note: Option<String>,
    /// Whether the note is only news (a GPU was found), which `--quiet` may hide, rather than
    /// a fallback to the CPU, which it never does.
    pub note_is_news: bool,
}

/// Whether `device` has int8 products (`--compute-type int8`): the CPU's kernels
/// (`kernels::int8`); a GPU decodes in float32.
pub fn multiplies_int8(device: &Device) -> bool {
    device.is_cpu()
}

/// Decoding steps between checks whether every sentence has ended: a check reads a flag back
/// to the host, which costs a GPU a synchronisation and the CPU nothing.
pub fn steps_between_end_checks(device: &Device) -> usize {
    if device.is_cpu() {
        1
    } else {
        8
    }
}

/// A device that cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// CUDA device `ordinal` was asked for and cannot be opened, for the reason `why`.
    #[error("cuda:{ordinal} is not available: {why}")]
    CudaUnavailable { ordinal: usize, why: String },
}

/// Resolves a request to a device; asking for CUDA where there is none is an error.
pub fn select(request: DeviceRequest) -> Result<SelectedDevice, DeviceError> {
    match request {
        DeviceRequest::Cpu => Ok(SelectedDevice {
            device: Device::Cpu,
            note: None,
            note_is_news: false,
        }),
        DeviceRequest::Cuda(ordinal) => {
            let device =
                open_cuda(ordinal).map_err(|why| DeviceError::CudaUnavailable { ordinal, why })?;
            Ok(SelectedDevice {
                device,
                note: None,
                note_is_news: false,
            })
        }
        // A CPU-only build has nowhere else to run: saying so on every command is noise.
        DeviceRequest::Auto if !candle_core::utils::cuda_is_available() => Ok(SelectedDevice {
            device: Device::Cpu,
            note: None,
            note_is_news: false,
        }),
        DeviceRequest::Auto => Ok(match open_cuda(0) {
            Ok(device) => SelectedDevice {
                device,
                note: Some("device: cuda:0 (auto: a CUDA GPU is present)".into()),
                note_is_news: true,
            },
            Err(why) => SelectedDevice {
                device: Device::Cpu,
                note: Some(format!("device: cpu (auto: {why})")),
                note_is_news: false,
            },
        }),
    }
}

/// Opens CUDA device `ordinal`, or says why not.
fn open_cuda(ordinal: usize) -> Result<Device, String> {
    if !candle_core::utils::cuda_is_available() {
        return Err("this build has no CUDA support; rebuild with \
                    `cargo build --release --features cuda`"
            .into());
    }
    Device::new_cuda(ordinal).map_err(|e| cuda_failure(&e.to_string()))
}

/// One line saying why CUDA could not be opened, from candle's (multi-line) error text.
fn cuda_failure(error: &str) -> String {
    // The driver's error name as cudarc prints it, e.g. `DriverError(CUDA_ERROR_NO_DEVICE, ..)`.
    let code = error
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find(|word| word.starts_with("CUDA_ERROR_"));
    let cause = match code {
        Some("CUDA_ERROR_STUB_LIBRARY") => {
            "no NVIDIA driver is installed (only the link-time stub libcuda.so was found)"
        }
        Some("CUDA_ERROR_NO_DEVICE") => "the NVIDIA driver sees no GPU",
        Some("CUDA_ERROR_INVALID_DEVICE") => "there is no GPU with that number",
        Some("CUDA_ERROR_INSUFFICIENT_DRIVER" | "CUDA_ERROR_UNSUPPORTED_PTX_VERSION") => {
            "the NVIDIA driver is older than the CUDA this binary was built with"
        }
        _ => {
            let first_line = error.lines().next().unwrap_or("").trim();
            return format!("no usable CUDA device ({first_line})");
        }
    };
    format!("{cause} ({})", code.unwrap_or_default())
}

/// The memory `device` holds, when known: the machine's (`MemTotal`) for the CPU; `None`
/// for a GPU, whose allocator reports its own failures.
pub fn memory_bytes(device: &Device) -> Option<u64> {
    if !device.is_cpu() {
        return None;
    }
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The device as the user names it with `--device`: `cpu`, `cuda:0`.
pub fn describe(device: &Device) -> String {
    match device.location() {
        candle_core::DeviceLocation::Cpu => "cpu".into(),
        candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
        candle_core::DeviceLocation::Metal { gpu_id } => format!("metal:{gpu_id}"),
    }
}

/// Lets float32 matrix products on a GPU use TF32 tensor cores (10-bit mantissas, f32
/// range), for the rest of the process: faster, less exact. Off by default, as in PyTorch
/// (`torch.backends.cuda.matmul.allow_tf32`). Nothing changes on the CPU.
pub fn allow_tf32_products() {
    candle_core::cuda::set_gemm_reduced_precision_f32(true);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_parse_and_nonsense_is_named() {
        assert_eq!(
            "auto".parse::<DeviceRequest>().unwrap(),
            DeviceRequest::Auto
        );
        assert_eq!(
            "cuda".parse::<DeviceRequest>().unwrap(),
            DeviceRequest::Cuda(0)
        );
        assert_eq!(
            "cuda:2".parse::<DeviceRequest>().unwrap(),
            DeviceRequest::Cuda(2)
        );
        let err = "gpu".parse::<DeviceRequest>().unwrap_err().to_string();
        assert!(err.contains("\"gpu\""), "{err}");
    }

    #[test]
    fn cuda_failures_become_one_line_that_names_the_cause() {
        let stub = "DriverError(CUDA_ERROR_STUB_LIBRARY, \"stub library\")\n   0: backtrace";
        assert_eq!(
            cuda_failure(stub),
            "no NVIDIA driver is installed (only the link-time stub libcuda.so was found) \
             (CUDA_ERROR_STUB_LIBRARY)"
        );
        let other = cuda_failure("something new\nmore");
        assert_eq!(other, "no usable CUDA device (something new)");
    }

    #[test]
    fn auto_in_a_cpu_only_build_runs_on_the_cpu_without_a_note() {
        let selected = select(DeviceRequest::Auto).unwrap();
        if candle_core::utils::cuda_is_available() {
            assert!(selected.note.unwrap().starts_with("device: "));
        } else {
            assert!(selected.device.is_cpu());
            assert!(selected.note.is_none());
        }
    }
}
