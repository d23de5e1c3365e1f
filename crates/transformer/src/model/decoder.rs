//! The decoder stack (Figure 1, right): N layers of masked self-attention, attention over the
//! encoder memory, and feed-forward, then a final LayerNorm.

use std::any::Any;

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

use crate::config::ModelConfig;
use crate::kernels::dropout::Mode;
use crate::model::attention::MultiHeadedAttention;
use crate::model::cache::{reordered, KeyValueCache, KeyValues, Lineage};
use crate::model::feed_forward::PositionwiseFeedForward;
use crate::model::step::DecodingState;
use crate::model::sublayer::{apply_final_norm, final_norm, Norm, SublayerConnection};

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

    pub fn self_attention(&self) -> &MultiHeadedAttention {
        &self.self_attn
    }

    /// Attention over the encoder memory ("encoder-decoder attention").
    pub fn source_attention(&self) -> &MultiHeadedAttention {
        &self.src_attn
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

impl DecoderLayer {
    /// One incremental step: `xs` `(rows, 1, d_model)` new position, `cache` this layer's
    /// self-attention keys/values so far, `memory_kv` its source keys/values computed once per
    /// sentence, `memory` which sentence each row translates.
    pub fn step(
        &self,
        xs: &Tensor,
        (cache, lineage): (&mut KeyValueCache, &Lineage),
        memory: &Memory,
        memory_kv: &KeyValues,
    ) -> Result<Tensor> {
        let mode = Mode::Eval;
        let xs = self.sublayer[0].forward(xs, mode, |x| self.self_attn.step(x, cache, lineage))?;
        let xs = self.sublayer[1].forward(&xs, mode, |x| {
            self.src_attn
                .step_memory(x, memory_kv, &memory.sentence_of, &memory.src_mask)
        })?;
        self.sublayer[2].forward(&xs, mode, |x| self.feed_forward.forward(x, mode))
    }
}

/// What incremental decoding keeps between steps: per layer, the self-attention keys/values
/// of the positions decoded so far and the source keys/values, projected once per sentence
/// (the beams of a sentence share them, as in CTranslate2). Not `Clone`: the caches grow in
/// place.
#[derive(Debug)]
pub struct EncoderDecoderState {
    self_attn: Vec<KeyValueCache>,
    lineage: Lineage,
    memory_kv: Vec<KeyValues>,
    memory: Memory,
    /// Positions decoded so far.
    pub(super) len: usize,
}

/// The sentences being decoded: row `r` of a step translates sentence `sentence_of[r]`, whose
/// padding mask is row `sentence_of[r]` of `src_mask` `(sentences, 1, src_len)`.
#[derive(Debug)]
pub struct Memory {
    sentence_of: Vec<u32>,
    src_mask: Tensor,
}

impl DecodingState for EncoderDecoderState {
    /// Nothing is copied: the lineage and the rows' sentences remember which earlier row
    /// each row continues.
    fn reorder(&mut self, rows: &[u32]) -> Result<()> {
        self.lineage.reorder(rows)?;
        self.memory.sentence_of = reordered(&self.memory.sentence_of, rows)?;
        Ok(())
    }

    fn len(&self) -> usize {
        self.len
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// N decoder layers and the final norm.
pub struct Decoder {
    layers: Vec<DecoderLayer>,
    /// Pre-norm only (see `final_norm`).
    norm: Option<Norm>,
}

impl Decoder {
    pub fn new(cfg: &ModelConfig, vb: VarBuilder) -> Result<Self> {
        let layers = (0..cfg.decoder_layer_count())
            .map(|i| DecoderLayer::new(cfg, vb.pp("layers").pp(i)))
            .collect::<Result<_>>()?;
        Ok(Self {
            layers,
            norm: final_norm(cfg, vb.pp("norm"))?,
        })
    }

    pub fn layers(&self) -> &[DecoderLayer] {
        &self.layers
    }

    /// The state before the first incremental step: source keys/values for every layer.
    pub fn start(&self, memory: &Tensor, src_mask: &Tensor) -> Result<EncoderDecoderState> {
        Ok(EncoderDecoderState {
            self_attn: self
                .layers
                .iter()
                .map(|_| KeyValueCache::default())
                .collect(),
            lineage: Lineage::default(),
            memory_kv: self
                .layers
                .iter()
                .map(|layer| layer.src_attn.project_memory(memory))
                .collect::<Result<_>>()?,
            memory: Memory {
                sentence_of: (0..memory.dim(0)? as u32).collect(),
                src_mask: src_mask.clone(),
            },
            len: 0,
        })
    }

    /// One incremental step: embedded new position `(rows, 1, d_model)` -> its hidden state.
    pub fn step(&self, xs: &Tensor, state: &mut EncoderDecoderState) -> Result<Tensor> {
        state.lineage.push_step(xs.dim(0)?);
        let mut xs = xs.clone();
        for (i, layer) in self.layers.iter().enumerate() {
            xs = layer.step(
                &xs,
                (&mut state.self_attn[i], &state.lineage),
                &state.memory,
                &state.memory_kv[i],
            )?;
        }
        state.len += 1;
        apply_final_norm(&self.norm, xs)
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
        apply_final_norm(&self.norm, xs)
    }
}
