//! The position-wise feed-forward network of Figure 1: two linear layers with a ReLU (or
//! the configured activation) between them, dropout inside (paper section 3.3).

use crate::config::{Activation, ModelConfig};
use crate::kernels::dropout::{dropout, Mode};
use crate::kernels::residual::relu_dropout;
use crate::model::weights::linear::Linear;
use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

/// FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 (equation 2), with dropout after the ReLU (or the
/// swish or GELU a config names instead).
pub struct PositionwiseFeedForward {
    w_1: Linear,
    w_2: Linear,
    activation: Activation,
    dropout: f64,
}

impl PositionwiseFeedForward {
    pub fn new(cfg: &ModelConfig, vb: VarBuilder) -> Result<Self> {
        Ok(Self {
            w_1: Linear::with_bias(cfg.d_model, cfg.d_ff, cfg.ffn_bias, vb.pp("w_1"))?,
            w_2: Linear::with_bias(cfg.d_ff, cfg.d_model, cfg.ffn_bias, vb.pp("w_2"))?,
            activation: cfg.activation,
            dropout: cfg.ffn_dropout(),
        })
    }

    /// `(batch, len, d_model)` -> `(batch, len, d_model)`.
    pub fn forward(&self, xs: &Tensor, mode: Mode) -> Result<Tensor> {
        let hidden = self.w_1.forward(xs)?;
        let hidden = match self.activation {
            // Fused with its dropout on the CPU.
            Activation::Relu => relu_dropout(&hidden, self.dropout, mode)?,
            Activation::Swish => dropout(&hidden.silu()?, self.dropout, mode)?,
            Activation::Gelu => dropout(&hidden.gelu_erf()?, self.dropout, mode)?,
        };
        self.w_2.forward(&hidden)
    }
}
