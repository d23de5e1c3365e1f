//! The encoder stack (Figure 1, left): N layers of self-attention and feed-forward, then a
//! final LayerNorm (needed because the sublayers are pre-norm).

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

use crate::config::ModelConfig;
use crate::kernels::dropout::Mode;
use crate::model::attention::MultiHeadedAttention;
use crate::model::cache::{KeyValueCache, Lineage};
use crate::model::feed_forward::PositionwiseFeedForward;
use crate::model::sublayer::{apply_final_norm, final_norm, Norm, SublayerConnection};

/// Self-attention then feed-forward, each wrapped in a SublayerConnection.
pub struct EncoderLayer {
    self_attn: MultiHeadedAttention,
    feed_forward: PositionwiseFeedForward,
    sublayer: [SublayerConnection; 2],
}

impl EncoderLayer {
    pub fn new(cfg: &ModelConfig, vb: VarBuilder) -> Result<Self> {
        let sublayer = vb.pp("sublayer");
        Ok(Self {
            self_attn: MultiHeadedAttention::new(cfg, vb.pp("self_attn"))?,
            feed_forward: PositionwiseFeedForward::new(cfg, vb.pp("feed_forward"))?,
            sublayer: [
                SublayerConnection::new(cfg, sublayer.pp(0))?,
                SublayerConnection::new(cfg, sublayer.pp(1))?,
            ],
        })
    }

    pub fn self_attention(&self) -> &MultiHeadedAttention {
        &self.self_attn
    }

    /// One new position of a causal stack (the decoder-only model's blocks are encoder
    /// layers): `xs` `(batch, 1, d_model)` attends to itself and to the positions in `cache`,
    /// which it joins.
    pub fn step(
        &self,
        xs: &Tensor,
        cache: &mut KeyValueCache,
        lineage: &Lineage,
    ) -> Result<Tensor> {
        let mode = Mode::Eval;
        let xs = self.sublayer[0].forward(xs, mode, |x| self.self_attn.step(x, cache, lineage))?;
        self.sublayer[1].forward(&xs, mode, |x| self.feed_forward.forward(x, mode))
    }

    /// `xs` `(batch, src_len, d_model)`, `mask` `(batch, 1, src_len)` (or, causal,
    /// `(1, len, len)`).
    pub fn forward(&self, xs: &Tensor, mask: &Tensor, mode: Mode) -> Result<Tensor> {
        let xs = self.sublayer[0].forward(xs, mode, |x| {
            self.self_attn.forward(x, x, x, Some(mask), mode)
        })?;
        self.sublayer[1].forward(&xs, mode, |x| self.feed_forward.forward(x, mode))
    }
}

/// N encoder layers and the final norm.
pub struct Encoder {
    layers: Vec<EncoderLayer>,
    /// Pre-norm only (see `final_norm`).
    norm: Option<Norm>,
}

impl Encoder {
    pub fn new(cfg: &ModelConfig, vb: VarBuilder) -> Result<Self> {
        let layers = (0..cfg.layers)
            .map(|i| EncoderLayer::new(cfg, vb.pp("layers").pp(i)))
            .collect::<Result<_>>()?;
        Ok(Self {
            layers,
            norm: final_norm(cfg, vb.pp("norm"))?,
        })
    }

    pub fn layers(&self) -> &[EncoderLayer] {
        &self.layers
    }

    /// The final norm (pre-norm only), for a stack that runs the layers itself.
    pub fn final_norm(&self) -> &Option<Norm> {
        &self.norm
    }

    /// `xs` `(batch, src_len, d_model)` embedded source, `mask` `(batch, 1, src_len)`.
    /// Returns the memory `(batch, src_len, d_model)`.
    pub fn forward(&self, xs: &Tensor, mask: &Tensor, mode: Mode) -> Result<Tensor> {
        let mut xs = xs.clone();
        for layer in &self.layers {
            xs = layer.forward(&xs, mask, mode)?;
        }
        apply_final_norm(&self.norm, xs)
    }
}
