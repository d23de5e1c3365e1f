//! The decoder stack (Figure 1, right): N layers of masked self-attention, attention over the
//! encoder memory, and feed-forward, then a final LayerNorm.

use candle_core::{Result, Tensor};
use candle_nn::{Module, VarBuilder};

use super::attention::MultiHeadedAttention;
use super::dropout::Mode;
use super::layers::{LayerNorm, PositionwiseFeedForward, SublayerConnection};
use crate::config::ModelConfig;

/// Self-attention, source attention and feed-forward, each in a SublayerConnection.
pub struct DecoderLayer {
    self_attn: MultiHeadedAttention,
    src_attn: MultiHeadedAttention,
    feed_forward: PositionwiseFeedForward,
    sublayer: [SublayerConnection; 3],
}

impl DecoderLayer {
    pub fn new(cfg: &ModelConfig, vb: VarBuilder) -> Result<Self> {
        let sublayer = vb.pp("sublayer");
        Ok(Self {
            self_attn: MultiHeadedAttention::new(cfg, vb.pp("self_attn"))?,
            src_attn: MultiHeadedAttention::new(cfg, vb.pp("src_attn"))?,
            feed_forward: PositionwiseFeedForward::new(cfg, vb.pp("feed_forward"))?,
            sublayer: [
                SublayerConnection::new(cfg, sublayer.pp(0))?,
                SublayerConnection::new(cfg, sublayer.pp(1))?,
                SublayerConnection::new(cfg, sublayer.pp(2))?,
            ],
        })
    }

    /// `xs` `(batch, tgt_len, d_model)`, `memory` `(batch, src_len, d_model)`, `src_mask`
    /// `(batch, 1, src_len)`, `tgt_mask` `(batch, tgt_len, tgt_len)`.
    pub fn forward(
        &self,
        xs: &Tensor,
        memory: &Tensor,
        src_mask: &Tensor,
        tgt_mask: &Tensor,
        mode: Mode,
    ) -> Result<Tensor> {
        let xs = self.sublayer[0].forward(xs, mode, |x| {
            self.self_attn.forward(x, x, x, Some(tgt_mask), mode)
        })?;
        let xs = self.sublayer[1].forward(&xs, mode, |x| {
            self.src_attn
                .forward(x, memory, memory, Some(src_mask), mode)
        })?;
        self.sublayer[2].forward(&xs, mode, |x| self.feed_forward.forward(x, mode))
    }
}

/// N decoder layers and the final norm.
pub struct Decoder {
    layers: Vec<DecoderLayer>,
    norm: LayerNorm,
}

impl Decoder {
    pub fn new(cfg: &ModelConfig, vb: VarBuilder) -> Result<Self> {
        let layers = (0..cfg.layers)
            .map(|i| DecoderLayer::new(cfg, vb.pp("layers").pp(i)))
            .collect::<Result<_>>()?;
        Ok(Self {
            layers,
            norm: LayerNorm::new(cfg.d_model, vb.pp("norm"))?,
        })
    }

    /// Embedded target `(batch, tgt_len, d_model)` -> hidden states of the same shape.
    pub fn forward(
        &self,
        xs: &Tensor,
        memory: &Tensor,
        src_mask: &Tensor,
        tgt_mask: &Tensor,
        mode: Mode,
    ) -> Result<Tensor> {
        let mut xs = xs.clone();
        for layer in &self.layers {
            xs = layer.forward(&xs, memory, src_mask, tgt_mask, mode)?;
        }
        self.norm.forward(&xs)
    }
}
