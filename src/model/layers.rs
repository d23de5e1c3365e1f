//! The pieces every layer is made of: LayerNorm, SublayerConnection (residual + norm) and
//! PositionwiseFeedForward (paper sections 3.1 and 3.3).

use candle_core::{DType, Result, Tensor, D};
use candle_nn::{Init, Module, VarBuilder};

use super::linear::{broadcast_rows, Linear};

use super::dropout::{dropout, Mode};
use crate::config::ModelConfig;

/// The reference's LayerNorm epsilon.
const LAYER_NORM_EPS: f64 = 1e-6;

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
        let rows = xs.elem_count() / size;
        // In half precision the statistics are f32 (as PyTorch's autocast does): a sum of 512
        // squares overflows f16 and loses most of its digits in bf16.
        let compute_dtype = xs.dtype();
        let flat = xs.reshape((rows, size))?.to_dtype(DType::F32)?;
        let centered = flat.broadcast_sub(&flat.mean_keepdim(D::Minus1)?)?;
        let variance = (centered.sqr()?.sum_keepdim(D::Minus1)? / (size - 1) as f64)?;
        let denominator = (variance.sqrt()? + LAYER_NORM_EPS)?;
        // Gain and bias broadcast as products with ones, for a fast backward pass (see linear).
        let normalized = centered
            .broadcast_div(&denominator)?
            .to_dtype(compute_dtype)?;
        let scaled = (normalized * broadcast_rows(&self.a_2, rows)?)?;
        (scaled + broadcast_rows(&self.b_2, rows)?)?.reshape(xs.shape())
    }
}

/// A residual connection around a sublayer, pre-norm as in the reference:
/// `x + dropout(sublayer(norm(x)))`.
pub struct SublayerConnection {
    norm: LayerNorm,
    dropout: f64,
}

impl SublayerConnection {
    pub fn new(cfg: &ModelConfig, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            norm: LayerNorm::new(cfg.d_model, vb.pp("norm"))?,
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
        let out = sublayer(&self.norm.forward(xs)?)?;
        xs + dropout(&out, self.dropout, mode)?
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
            w_1: Linear::new(cfg.d_model, cfg.d_ff, vb.pp("w_1"))?,
            w_2: Linear::new(cfg.d_ff, cfg.d_model, vb.pp("w_2"))?,
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
