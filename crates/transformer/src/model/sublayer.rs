//! Add & Norm of Figure 1: LayerNorm (the reference's and torch's), and the
//! SublayerConnection that wraps every sublayer in a residual connection and a norm (paper
//! section 3.1; pre-norm as The Annotated Transformer, or post-norm as the paper).

use candle_core::{Result, Tensor};
use candle_nn::{Init, Module, VarBuilder};

use crate::config::{ModelConfig, NormPlacement};
use crate::kernels::dropout::Mode;
use crate::kernels::layer_norm::{layer_norm, NormKind};
use crate::kernels::residual::residual_dropout;

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
            NormPlacement::Post | NormPlacement::PreTorch => {
                Self::Torch(TorchLayerNorm::new(cfg.d_model, vb)?)
            }
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
            NormPlacement::Pre | NormPlacement::PreTorch => {
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
        NormPlacement::Pre | NormPlacement::PreTorch => Ok(Some(Norm::new(cfg, vb)?)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Activation;
    use crate::model::feed_forward::PositionwiseFeedForward;
    use candle_core::{DType, Device};
    use candle_nn::VarMap;

    /// The feed-forward network with a weight of ones and no bias: each hidden unit is the
    /// sum of the input, so the output is d_ff times the activation of that sum.
    #[test]
    fn each_activation_is_its_formula() {
        let dev = Device::Cpu;
        let xs = Tensor::new(&[[[0.5f32, -1.0]], [[-0.25, -0.5]]], &dev).unwrap();
        for (activation, formula) in [
            (Activation::Relu, (|x: f64| x.max(0.0)) as fn(f64) -> f64),
            (Activation::Swish, |x: f64| x / (1.0 + (-x).exp())),
            // x Phi(x), Phi from erf: 0.5 (1 + erf(x / sqrt 2)); erf(-0.3536) = -0.3829.
            (Activation::Gelu, |x: f64| {
                x * 0.5 * (1.0 + erf(x / 2f64.sqrt()))
            }),
        ] {
            let cfg = ModelConfig {
                d_model: 2,
                d_ff: 3,
                ffn_bias: false,
                activation,
                ..ModelConfig::default()
            };
            let varmap = VarMap::new();
            let ffn = PositionwiseFeedForward::new(
                &cfg,
                VarBuilder::from_varmap(&varmap, DType::F32, &dev),
            )
            .unwrap();
            for var in varmap.all_vars() {
                var.set(&var.ones_like().unwrap()).unwrap();
            }
            let ys = ffn.forward(&xs, Mode::Eval).unwrap();
            for (row, sum) in ys
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
                .chunks(2)
                .zip([-0.5, -0.75])
            {
                let want = 3.0 * formula(sum);
                assert!(
                    (f64::from(row[0]) - want).abs() < 1e-5,
                    "{activation:?}: {row:?} vs {want}"
                );
            }
        }
    }

    /// Abramowitz and Stegun 7.1.26, to 1.5e-7: enough to check candle's exact GELU.
    fn erf(x: f64) -> f64 {
        let t = 1.0 / (1.0 + 0.3275911 * x.abs());
        let poly = t
            * (0.254829592
                + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
        (1.0 - poly * (-x * x).exp()).copysign(x)
    }
}
