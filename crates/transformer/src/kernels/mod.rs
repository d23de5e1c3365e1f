//! The ops that training and decoding spend their time in, each behind one entry point that
//! works on any device: a fused CPU op with its own backward pass where there is one (f32 on
//! the CPU), candle's composed ops everywhere else (a GPU today, half precision). Model and
//! training code call these and never ask which device they run on.
//!
//! | entry point | what it computes | fused op |
//! | --- | --- | --- |
//! | [`linear::linear`] | `x W^T + b` | [`linear_fused`] |
//! | [`attention::scaled_dot_product`] | softmax(Q K^T / sqrt(d_k), masked), dropout, times V | `attention/fused` |
//! | [`attention::cached::attend_cached`] | a decoding step's attention over its cache and the memory | `attention/step.rs` |
//! | [`layer_norm::layer_norm`] | the reference's LayerNorm and torch's | [`layer_norm_fused`] |
//! | [`residual::residual_dropout`] | `x + dropout(y)` (a sublayer's residual) | [`residual`] |
//! | [`residual::relu_dropout`] | `dropout(max(0, h))` (the feed-forward's middle) | [`residual`] |
//! | [`log_softmax::log_softmax_last_dim`] | the Generator's log-softmax in decoding | [`log_softmax`] |
//! | [`loss::label_smoothed_kl_sum`] | log-softmax and the label-smoothed KL | [`loss_fused`] |
//! | [`adam::adam_update`] | one Adam step, in place | [`adam_fused`] |
//! | [`bf16::gemm`] | `A B` with bf16 inputs and f32 sums: a trained linear layer's products inside a bf16 [`bf16::autocast`] scope (`training.dtype = "bf16"` on the CPU) | AVX512-BF16, or emulated |
//!
//! The composed path is what a GPU runs, and the CPU can be made to run it too: for this
//! thread with [`composed_only`] (the tests check every fused op against it), for the whole
//! process with [`use_composed_everywhere`] (`TRANSFORMER_KERNELS=composed` on the command
//! line, so that a whole training run goes through it).

#[macro_use]
mod simd;

pub mod adam;
mod adam_fused;
#[cfg(target_arch = "x86_64")]
mod amx_tiles;
pub mod attention;
pub mod bf16;
#[cfg(feature = "cuda")]
mod cuda;
pub mod dropout;
mod few_rows;
pub mod fused_check;
pub mod int8;
pub mod isa;
pub mod layer_norm;
mod layer_norm_fused;
pub mod linear;
mod linear_fused;
pub mod log_softmax;
pub mod loss;
mod loss_fused;
mod packed_f32;
pub mod residual;
#[cfg(test)]
pub(crate) mod test_support;
mod transpose;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

use candle_core::{CpuStorage, DType, Layout, Result, Tensor};

thread_local! {
    static COMPOSED_ON_THIS_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// Set once by the command line (`TRANSFORMER_KERNELS=composed`); never unset.
static COMPOSED_EVERYWHERE: AtomicBool = AtomicBool::new(false);

/// Makes every entry point take the composed path for the rest of the process.
pub fn use_composed_everywhere() {
    COMPOSED_EVERYWHERE.store(true, Ordering::Relaxed);
}

/// Set once by the command line (`TRANSFORMER_KERNELS=cuda-fused`); never unset.
static CUDA_FUSED: AtomicBool = AtomicBool::new(false);

/// Lets the fused CUDA kernels (`kernels/cuda`: Adam, LayerNorm, attention's softmax with its
/// mask and dropout, the residual and ReLU dropouts) run on a GPU for the rest of the process:
/// an opt-in until a GPU has passed their check against the composed path.
pub fn use_cuda_fused() {
    CUDA_FUSED.store(true, Ordering::Relaxed);
}

/// Whether the fused CUDA kernels run for `tensors`: asked for, built with `cuda`, all f32
/// on a GPU, and the composed path not asked for.
#[cfg(feature = "cuda")]
fn cuda_fused_runs(tensors: &[&Tensor]) -> bool {
    CUDA_FUSED.load(Ordering::Relaxed)
        && !COMPOSED_EVERYWHERE.load(Ordering::Relaxed)
        && !COMPOSED_ON_THIS_THREAD.with(Cell::get)
        && tensors
            .iter()
            .all(|t| t.device().is_cuda() && t.dtype() == DType::F32)
}

/// While the returned guard lives, this thread's entry points take the composed path, on the
/// CPU too. Thread-local so that tests running side by side do not switch each other.
pub fn composed_only() -> ComposedOnly {
    let previous = COMPOSED_ON_THIS_THREAD.with(|on| on.replace(true));
    ComposedOnly { previous }
}

/// See [`composed_only`]; dropping it restores what was there before.
pub struct ComposedOnly {
    previous: bool,
}

impl Drop for ComposedOnly {
    fn drop(&mut self) {
        COMPOSED_ON_THIS_THREAD.with(|on| on.set(self.previous));
    }
}

/// Whether the fused CPU ops run for `tensors`: all f32 on the CPU, and the composed path not
/// asked for. Model code never asks where a tensor lives; the kernels do (here and in each
/// op's CPU fast path), as do the code that reads or packs a tensor's bytes in place (the
/// weight forms' packing, the checkpoint readers and writers), training's choice of precision
/// and the collectives.
fn fused_runs(tensors: &[&Tensor]) -> bool {
    !COMPOSED_EVERYWHERE.load(Ordering::Relaxed)
        && !COMPOSED_ON_THIS_THREAD.with(Cell::get)
        && tensors
            .iter()
            .all(|t| t.device().is_cpu() && t.dtype() == DType::F32)
}

/// The f32 elements of a contiguous tensor on the CPU, or None for a strided one: what every
/// fused op reads its inputs through.
fn contiguous_f32<'a>(storage: &'a CpuStorage, layout: &Layout) -> Result<Option<&'a [f32]>> {
    Ok(match layout.contiguous_offsets() {
        Some((start, end)) => Some(&storage.as_slice::<f32>()?[start..end]),
        None => None,
    })
}

/// As [`contiguous_f32`], a strided tensor being an error that names the op (`what`).
fn contiguous_input<'a>(storage: &'a CpuStorage, layout: &Layout, what: &str) -> Result<&'a [f32]> {
    contiguous_f32(storage, layout)?
        .ok_or_else(|| candle_core::Error::Msg(format!("{what}: inputs must be contiguous")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn the_composed_switch_holds_while_its_guard_lives_and_nests() {
        let xs = Tensor::zeros(2, DType::F32, &Device::Cpu).unwrap();
        assert!(fused_runs(&[&xs]));
        {
            let _outer = composed_only();
            assert!(!fused_runs(&[&xs]));
            {
                let _inner = composed_only();
                assert!(!fused_runs(&[&xs]));
            }
            assert!(!fused_runs(&[&xs]));
        }
        assert!(fused_runs(&[&xs]));
        let half = xs.to_dtype(DType::F16).unwrap();
        assert!(!fused_runs(&[&xs, &half]));
    }
}
