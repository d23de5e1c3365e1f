//! The pieces every layer is made of: LayerNorm, SublayerConnection (residual + norm) and
//! PositionwiseFeedForward (paper sections 3.1 and 3.3).

use candle_core::{DType, Result, Tensor, D};
use candle_nn::{Init, Module, VarBuilder};

use super::linear::{broadcast_rows, Linear};

use super::dropout::{dropout, Mode};
use super::layer_norm_op::{fused_layer_norm, NormKind};
use crate::config::{ModelConfig, NormPlacement};

/// The reference's LayerNorm epsilon.
const LAYER_NORM_EPS: f64 = 1e-6;

/// torch.nn.LayerNorm's default epsilon, used by the post-norm variant.
const TORCH_LAYER_NORM_EPS: f64 = 1e-5;

/// The Annotated Transformer's LayerNorm: `a_2 * (x - mean) / (std + eps) + b_2`.
///
/// Not torch.nn.LayerNorm: `std` is the unbiased (n - 1) standard deviation and eps is added to
/// it, outside the square root. Built from tensor ops so that gradients flow (candle's fused
/// layer norm has no backward pass).
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
        let size = xs.dim(D::Minus1)?;
        if size < 2 {
            candle_core::bail!(
                "LayerNorm needs at least 2 features for an unbiased std, got {size}"
            )
        }
        if fused_applies(xs, &self.a_2) {
            let kind = NormKind::Annotated {
                eps: LAYER_NORM_EPS as f32,
            };
            return fused_layer_norm(xs, &self.a_2, &self.b_2, kind);
        }
        normalize_rows(xs, &self.a_2, &self.b_2, |centered| {
            let variance = (centered.sqr()?.sum_keepdim(D::Minus1)? / (size - 1) as f64)?;
            variance.sqrt()? + LAYER_NORM_EPS
        })
    }
}

/// Whether the fused CPU op normalises `xs`: f32 on the CPU (half precision keeps the composed
/// ops, which compute the statistics in f32).
fn fused_applies(xs: &Tensor, gain: &Tensor) -> bool {
    [xs, gain]
        .iter()
        .all(|t| t.device().is_cpu() && t.dtype() == DType::F32)
}

/// `gain * (x - mean) / denominator(x - mean) + bias` over the last dimension, the part both
/// LayerNorms share. In half precision the statistics are f32 (as PyTorch's autocast does): a
/// sum of 512 squares overflows f16 and loses most of its digits in bf16. Gain and bias
/// broadcast as products with ones, for a fast backward pass (see linear).
fn normalize_rows(
    xs: &Tensor,
    gain: &Tensor,
    bias: &Tensor,
    denominator: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    let size = xs.dim(D::Minus1)?;
    let rows = xs.elem_count() / size.max(1);
    let flat = xs.reshape((rows, size))?.to_dtype(DType::F32)?;
    let centered = flat.broadcast_sub(&flat.mean_keepdim(D::Minus1)?)?;
    let normalized = centered
        .broadcast_div(&denominator(&centered)?)?
        .to_dtype(xs.dtype())?;
    let scaled = (normalized * broadcast_rows(gain, rows)?)?;
    (scaled + broadcast_rows(bias, rows)?)?.reshape(xs.shape())
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
        if fused_applies(xs, &self.weight) {
            let kind = NormKind::Torch {
                eps: TORCH_LAYER_NORM_EPS as f32,
            };
            return fused_layer_norm(xs, &self.weight, &self.bias, kind);
        }
        normalize_rows(xs, &self.weight, &self.bias, |centered| {
            (centered.sqr()?.mean_keepdim(D::Minus1)? + TORCH_LAYER_NORM_EPS)?.sqrt()
        })
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
                xs + dropout(&out, self.dropout, mode)?
            }
            NormPlacement::Post => {
                let out = sublayer(xs)?;
                self.norm
                    .forward(&(xs + dropout(&out, self.dropout, mode)?)?)
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
        let hidden = self.w_1.forward(xs)?.relu()?;
        self.w_2.forward(&dropout(&hidden, self.dropout, mode)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};
    use candle_nn::VarMap;

    #[test]
    fn torch_layer_norm_divides_by_the_root_of_the_biased_variance_plus_eps() {
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        let norm = TorchLayerNorm::new(4, vb).unwrap();
        let xs = Tensor::new(&[[1f32, 2., 3., 6.]], &Device::Cpu).unwrap();
        let out = norm.forward(&xs).unwrap().to_vec2::<f32>().unwrap();
        // mean 3, deviations -2 -1 0 3, biased variance 14 / 4.
        let root = (14f64 / 4. + 1e-5).sqrt();
        for (got, d) in out[0].iter().zip([-2f64, -1., 0., 3.]) {
            assert!((*got as f64 - d / root).abs() < 1e-6, "{got}");
        }
    }

    #[test]
    fn layer_norm_divides_by_the_unbiased_std_plus_eps() {
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        let norm = LayerNorm::new(4, vb).unwrap();
        let xs = Tensor::new(&[[1f32, 2., 3., 6.]], &Device::Cpu).unwrap();
        let out = norm.forward(&xs).unwrap().to_vec2::<f32>().unwrap();
        // mean 3, deviations -2 -1 0 3, unbiased variance 14 / 3.
        let std = (14f64 / 3.).sqrt() + 1e-6;
        let expected: Vec<f32> = [-2., -1., 0., 3.]
            .iter()
            .map(|d| (d / std) as f32)
            .collect();
        for (got, want) in out[0].iter().zip(&expected) {
            assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        }
    }
}
