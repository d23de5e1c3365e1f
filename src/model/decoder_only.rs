//! The decoder-only language model (`arch = "decoder-only"`): token and position embeddings,
//! N causal self-attention blocks, a final norm when pre-norm, and a linear head.
//!
//! A block is the encoder layer (self-attention, then feed-forward) run under a causal mask,
//! so the modules and their parameter names are the encoder-decoder's: `embed.0.lut.weight`,
//! `embed.1.pe(.weight)`, `decoder.layers.N.self_attn.linears.M.*`,
//! `decoder.layers.N.feed_forward.w_{1,2}.*`, `decoder.layers.N.sublayer.M.norm.*`,
//! `decoder.norm.*` (pre-norm) and `generator.proj.*`. scripts/reference.py's `DecoderOnlyLM`
//! is the PyTorch side.

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

use super::attention::{KeyValueCache, Lineage};
use super::encoder::Encoder;
use super::encoder_decoder::{EmbeddingStack, Generator};
use super::layers::apply_final_norm;
use super::masks;
use crate::config::ModelConfig;
use crate::kernels::dropout::Mode;

/// A next-token language model.
pub struct DecoderOnly {
    embed: EmbeddingStack,
    /// The reference builds it as `Encoder(EncoderLayer, N)`; run here under a causal mask.
    decoder: Encoder,
    generator: Generator,
}

impl DecoderOnly {
    /// Builds the model from `vb`: fresh variables from a VarMap, or a checkpoint's tensors.
    pub fn new(cfg: &ModelConfig, vocab: usize, vb: VarBuilder) -> Result<Self> {
        let embed = EmbeddingStack::new(cfg, vocab, vb.pp("embed"))?;
        let generator = Generator::for_config(cfg, &embed, vb.pp("generator"))?;
        Ok(Self {
            decoder: Encoder::new(cfg, vb.pp("decoder"))?,
            embed,
            generator,
        })
    }

    /// Ids `(batch, len)` -> next-token logits `(batch, len, vocab)`: position i sees
    /// positions 0..=i only.
    pub fn forward(&self, ids: &Tensor, mode: Mode) -> Result<Tensor> {
        let len = ids.dim(1)?;
        let causal = masks::subsequent_mask(len, ids.device())?;
        let hidden = self
            .decoder
            .forward(&self.embed.forward(ids, 0, mode)?, &causal, mode)?;
        self.generator.logits(&hidden)
    }

    /// The tensors a checkpoint carries beside the parameters: the sinusoidal position
    /// table, if any, and the shared generator matrix under its own name (see
    /// [`Generator::tied_copy`]).
    pub fn buffers(&self) -> Vec<(String, Tensor)> {
        self.embed
            .position_table()
            .map(|table| ("embed.1.pe".to_string(), table.clone()))
            .into_iter()
            .chain(self.generator.tied_copy())
            .collect()
    }

    /// An empty key/value cache for incremental decoding.
    pub fn start(&self) -> Generation {
        Generation {
            caches: self
                .decoder
                .layers()
                .iter()
                .map(|_| KeyValueCache::default())
                .collect(),
            lineage: Lineage::default(),
            len: 0,
        }
    }

    /// The next position: `ids` `(batch, 1)` -> logits `(batch, vocab)` for the position
    /// after it, with every earlier position read from `state`'s caches.
    pub fn step(&self, ids: &Tensor, state: &mut Generation) -> Result<Tensor> {
        let mut xs = self.embed.forward(ids, state.len, Mode::Eval)?;
        state.lineage.push_step(xs.dim(0)?);
        for (layer, cache) in self.decoder.layers().iter().zip(&mut state.caches) {
            xs = layer.step(&xs, cache, &state.lineage)?;
        }
        state.len += 1;
        let hidden = apply_final_norm(self.decoder.final_norm(), xs)?;
        self.generator.logits(&hidden)?.squeeze(1)
    }
}

/// What incremental decoding keeps between steps: each layer's keys and values so far.
pub struct Generation {
    caches: Vec<KeyValueCache>,
    lineage: Lineage,
    /// Positions fed so far.
    pub len: usize,
}
