//! What a training step computes in (`training.dtype`). The weights, Adam's moments, the
//! gradients and the checkpoints are f32 whatever it says (master weights); only the passes
//! change:
//! - f32: everything in f32;
//! - on a GPU, bf16 or f16: the step runs over casts of the weights in that dtype (candle's
//!   half-precision ops), whose backward pass brings each gradient back to f32;
//! - on the CPU, bf16: PyTorch's autocast. The passes run over the f32 weights, and the
//!   products of the linear layers being trained and of attention (forward and backward) take
//!   bf16 inputs and sum in f32 on the CPU's bf16 engine ([`crate::kernels::bf16`]: AMX,
//!   AVX512-BF16 or emulated); layer norm, softmax, the loss and dropout stay f32. No loss
//!   scaling: bf16 keeps f32's exponent.

use candle_core::{DType, Device};

use crate::config::ComputeDtype;
use crate::kernels::bf16::{self, Autocast, Engine};

/// How a step computes, as planned once for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    F32,
    /// Over the weights cast to this dtype (a GPU).
    Casts(DType),
    /// f32 passes with bf16 products on this engine (the CPU).
    Bf16Products(Engine),
}

impl Precision {
    /// The plan for `dtype` on `device`; f16 on the CPU is refused with the way out.
    pub fn plan(dtype: ComputeDtype, device: &Device) -> anyhow::Result<Self> {
        Ok(match (dtype, device.is_cpu()) {
            (ComputeDtype::F32, _) => Self::F32,
            (ComputeDtype::Bf16, true) => {
                let engine = bf16::engine();
                let why = match bf16::available()[0].is_native() {
                    true => "TRANSFORMER_BF16_ENGINE asks for emulation".to_string(),
                    false => bf16::no_native_engine(),
                };
                if !engine.is_native() {
                    log::warn!(
                        "{why}: training.dtype = \"bf16\" rounds the products' inputs to bf16 \
                         but multiplies in f32, slower than dtype = \"f32\""
                    );
                }
                Self::Bf16Products(engine)
            }
            (ComputeDtype::F16, true) => anyhow::bail!(
                "training.dtype = \"f16\" is not for the CPU: it has no f16 products here, \
                 and f16's range needs loss scaling this trainer does not do; use dtype = \
                 \"bf16\" (f32's range, bf16 products) or \"f32\""
            ),
            (other, false) => Self::Casts(other.candle()),
        })
    }

    /// The dtype a step's model is built in (its casts of the weights, or the weights).
    pub fn step_dtype(self) -> DType {
        match self {
            Self::Casts(dtype) => dtype,
            Self::F32 | Self::Bf16Products(_) => DType::F32,
        }
    }

    /// The scope a step's passes run in: bf16 products, or none.
    pub fn scope(self) -> Option<Autocast> {
        match self {
            Self::Bf16Products(engine) => Some(bf16::autocast(engine)),
            Self::F32 | Self::Casts(_) => None,
        }
    }

    /// What it is called in the run's log and the benchmark's JSON.
    pub fn describe(self) -> String {
        match self {
            Self::F32 => "f32".into(),
            Self::Casts(dtype) => format!("{dtype:?} casts").to_lowercase(),
            Self::Bf16Products(engine) => format!("bf16 products ({})", engine.name()),
        }
    }
}
