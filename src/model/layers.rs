//! The pieces every layer is made of: LayerNorm, SublayerConnection (residual + norm) and
//! PositionwiseFeedForward (paper sections 3.1 and 3.3).

use candle_core::{Result, Tensor};
use candle_nn::{Init, Module, VarBuilder};

use super::linear::Linear;
use crate::config::{ModelConfig, NormPlacement};
use crate::kernels::dropout::Mode;
use crate::kernels::layer_norm::{layer_norm, NormKind};
use crate::kernels::residual::{relu_dropout, residual_dropout};

/// The reference's LayerNorm epsilon.
const LAYER_NORM_EPS: f32 = 1e-6;

/// torch.nn.LayerNorm's default epsilon, used by the post-norm variant.
const TORCH_LAYER_NORM_EPS: f32 = 1e-5;

/// The Annotated Transformer's LayerNorm: `a_2 * (x - mean) / (std + eps) + b_2`.
///
/// Not torch.nn.LayerNorm: `std` is the unbiased (n - 1) standard deviation and eps is added to
/// it, outside the square root.
pub struct LayerNorm {
    a_2: Tensor,
    b_2: Tensor,
}

impl LayerNorm {
    pub fn new(size: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            a_2: vb.get_with_hints(size, "a_2", Init::Const(1.))?,
            b_2: vb.get_with_hints(size, "b_2", Init::Const(0.))?,
        })
    }
}

impl Module for LayerNorm {
    /// `(..., size)` -> `(..., size)`, normalised over the last dimension.
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let kind = NormKind::Annotated {
            eps: LAYER_NORM_EPS,
        };
        layer_norm(xs, &self.a_2, &self.b_2, kind)
    }
}

/// torch.nn.LayerNorm: `weight * (x - mean) / sqrt(var + eps) + bias`, with the biased (n)
/// variance and eps inside the square root; the post-norm variant's norm.
pub struct TorchLayerNorm {
    weight: Tensor,
    bias: Tensor,
}

impl TorchLayerNorm {
    pub fn new(size: usize, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            weight: vb.get_with_hints(size, "weight", Init::Const(1.))?,
            bias: vb.get_with_hints(size, "bias", Init::Const(0.))?,
        })
    }
}

impl Module for TorchLayerNorm {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let kind = NormKind::Torch {
            eps: TORCH_LAYER_NORM_EPS,
        };
        layer_norm(xs, &self.weight, &self.bias, kind)
    }
}

/// The norm the config asks for: The Annotated Transformer's (pre-norm) or torch's (post-norm).
pub enum Norm {
    Annotated(LayerNorm),
    Torch(TorchLayerNorm),
}

impl Norm {
    pub fn new(cfg: &ModelConfig, vb: VarBuilder) -> Result<Self> {
        Ok(match cfg.norm {
            NormPlacement::Pre => Self::Annotated(LayerNorm::new(cfg.d_model, vb)?),
            NormPlacement::Post => Self::Torch(TorchLayerNorm::new(cfg.d_model, vb)?),
        })
    }
}

impl Module for Norm {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        match self {
            Self::Annotated(norm) => norm.forward(xs),
            Self::Torch(norm) => norm.forward(xs),
        }
    }
}

/// A residual connection around a sublayer. Pre-norm, as in the reference:
/// `x + dropout(sublayer(norm(x)))`; post-norm, as in the paper: `norm(x + dropout(sublayer(x)))`.
pub struct SublayerConnection {
    norm: Norm,
    placement: NormPlacement,
    dropout: f64,
}

impl SublayerConnection {
    pub fn new(cfg: &ModelConfig, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            norm: Norm::new(cfg, vb.pp("norm"))?,
            placement: cfg.norm,
            dropout: cfg.dropout,
        })
    }

    /// `xs` `(batch, len, d_model)`; `sublayer` maps that shape to itself.
    pub fn forward(
        &self,
        xs: &Tensor,
        mode: Mode,
        sublayer: impl FnOnce(&Tensor) -> Result<Tensor>,
    ) -> Result<Tensor> {
        match self.placement {
            NormPlacement::Pre => {
                let out = sublayer(&self.norm.forward(xs)?)?;
                residual_dropout(xs, &out, self.dropout, mode)
            }
            NormPlacement::Post => {
                let out = sublayer(xs)?;
                let sum = residual_dropout(xs, &out, self.dropout, mode)?;
                self.norm.forward(&sum)
            }
        }
    }
}

/// The stacks' final norm: pre-norm needs one (the last residual sum is not normalised),
/// post-norm does not (each layer ends with a norm), so there the stack has none.
pub fn final_norm(cfg: &ModelConfig, vb: VarBuilder) -> Result<Option<Norm>> {
    match cfg.norm {
        NormPlacement::Pre => Ok(Some(Norm::new(cfg, vb)?)),
        NormPlacement::Post => Ok(None),
    }
}

/// Applies an optional final norm.
pub fn apply_final_norm(norm: &Option<Norm>, xs: Tensor) -> Result<Tensor> {
    match norm {
        Some(norm) => norm.forward(&xs),
        None => Ok(xs),
    }
}

/// FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 (equation 2), with dropout after the ReLU.
pub struct PositionwiseFeedForward {
    w_1: Linear,
    w_2: Linear,
    dropout: f64,
}

impl PositionwiseFeedForward {
    pub fn new(cfg: &ModelConfig, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            w_1: Linear::with_bias(cfg.d_model, cfg.d_ff, cfg.ffn_bias, vb.pp("w_1"))?,
            w_2: Linear::with_bias(cfg.d_ff, cfg.d_model, cfg.ffn_bias, vb.pp("w_2"))?,
            dropout: cfg.dropout,
        })
    }

    /// `(batch, len, d_model)` -> `(batch, len, d_model)`.
    pub fn forward(&self, xs: &Tensor, mode: Mode) -> Result<Tensor> {
        let hidden = relu_dropout(&self.w_1.forward(xs)?, self.dropout, mode)?;
        self.w_2.forward(&hidden)
    }
}
