//! Fused CUDA kernels for training in f32 (`fused.cu`, compiled to PTX by build.rs): Adam in
//! one launch per parameter; LayerNorm's forward and backward passes in one and two launches;
//! attention's mask, softmax and dropout in one each way; a sublayer's residual with its
//! dropout, and the feed-forward's ReLU with its dropout, in one each way; where candle's
//! composed ops take six to twenty. They run only when asked for
//! (`TRANSFORMER_KERNELS=cuda-fused`, [`super::use_cuda_fused`]) until a GPU has passed
//! `transformer bench check-kernels --device cuda`, which compares each with the composed
//! path on the GPU.

/// `CustomOp3::cpu_fwd` for an op that runs on a GPU only: its entry point never hands it
/// tensors on the CPU, and says so if it were.
macro_rules! gpu_only_cpu_fwd {
    ($what:literal) => {
        fn cpu_fwd(
            &self,
            _: &candle_core::CpuStorage,
            _: &candle_core::Layout,
            _: &candle_core::CpuStorage,
            _: &candle_core::Layout,
            _: &candle_core::CpuStorage,
            _: &candle_core::Layout,
        ) -> candle_core::Result<(candle_core::CpuStorage, candle_core::Shape)> {
            candle_core::bail!(concat!($what, ": given tensors on the CPU"))
        }
    };
}

pub(super) mod adam;
pub(super) mod attention;
pub(super) mod dropout;
pub(super) mod layer_norm;

use candle_core::cuda_backend::cudarc::driver::LaunchConfig;

/// The kernels' PTX, built for `CUDA_COMPUTE_CAP`, loaded once per device under [`MODULE`]
/// (`CudaDevice::get_or_load_custom_func`).
const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/fused.ptx"));
const MODULE: &str = "transformer_fused";

/// A block per row of `width` elements: whole warps, enough for a row of 512 or 1024
/// features at a few elements a thread.
fn per_row(rows: usize, width: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (rows.max(1) as u32, 1, 1),
        block_dim: (
            (width.div_ceil(4).next_power_of_two().clamp(32, 256)) as u32,
            1,
            1,
        ),
        shared_mem_bytes: 0,
    }
}

/// A thread per column of `width`, times `chunks` blocks of rows.
fn per_column(width: usize, chunks: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (width.div_ceil(128) as u32, chunks as u32, 1),
        block_dim: (128, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A grid for `n` elements, each thread striding over several when there are many.
fn elementwise(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (n.div_ceil(256).clamp(1, 4096) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}
