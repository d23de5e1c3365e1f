//! The decoder-only language model (`arch = "decoder-only"`): token and position embeddings,
//! N causal self-attention blocks, a final norm when pre-norm, and a linear head.
//!
//! A block is the encoder layer (self-attention, then feed-forward) run under a causal mask,
//! so the modules and their parameter names are the encoder-decoder's: `embed.0.lut.weight`,
//! `embed.1.pe(.weight)`, `decoder.layers.N.self_attn.linears.M.*`,
//! `decoder.layers.N.feed_forward.w_{1,2}.*`, `decoder.layers.N.sublayer.M.norm.*`,
//! `decoder.norm.*` (pre-norm) and `generator.proj.*`. scripts/reference.py's `DecoderOnlyLM`
//! is the PyTorch side.

use std::any::Any;

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

use crate::config::ModelConfig;
use crate::kernels::dropout::Mode;
use crate::model::cache::{KeyValueCache, Lineage};
use crate::model::embeddings::EmbeddingStack;
use crate::model::encoder::Encoder;
use crate::model::families::family::{ModelFamily, TeacherForced};
use crate::model::generator::Generator;
use crate::model::masks;
use crate::model::step::{own_state, DecodingModel, DecodingState, Source};
use crate::model::sublayer::apply_final_norm;

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
}

impl ModelFamily for DecoderOnly {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    /// Position i sees positions 0..=i only. Causal: a padded tail never affects the
    /// positions before it, and its targets are padding, which the loss skips.
    fn logits(&self, batch: &TeacherForced, mode: Mode) -> Result<Tensor> {
        let ids = batch.target_only(self)?;
        let len = ids.dim(1)?;
        let causal = masks::subsequent_mask(len, ids.device())?;
        let hidden = self
            .decoder
            .forward(&self.embed.forward(ids, 0, mode)?, &causal, mode)?;
        self.generator.logits(&hidden)
    }

    /// The sinusoidal position table, if any, and the shared generator matrix under its own
    /// name (see [`Generator::tied_copy`]).
    fn buffers(&self) -> Vec<(String, Tensor)> {
        self.embed
            .position_buffer()
            .into_iter()
            .chain(self.generator.tied_copy())
            .collect()
    }

    fn tied_names(&self) -> Vec<String> {
        self.generator.tied_name().into_iter().collect()
    }
}

impl DecodingModel for DecoderOnly {
    fn reads_source(&self) -> bool {
        false
    }

    fn max_positions(&self) -> usize {
        self.embed.max_positions()
    }

    fn start(&self, source: Option<&Source>) -> Result<Box<dyn DecodingState>> {
        if source.is_some() {
            candle_core::bail!("a decoder-only model reads no source; one was given")
        }
        Ok(Box::new(DecoderOnlyState {
            caches: self
                .decoder
                .layers()
                .iter()
                .map(|_| KeyValueCache::default())
                .collect(),
            lineage: Lineage::default(),
            len: 0,
        }))
    }

    /// Every earlier position is read from the state's caches.
    fn step_hidden(&self, ids: &Tensor, state: &mut dyn DecodingState) -> Result<Tensor> {
        let state = own_state::<DecoderOnlyState>(state)?;
        let mut xs = self.embed.forward(ids, state.len, Mode::Eval)?;
        state.lineage.push_step(xs.dim(0)?);
        for (layer, cache) in self.decoder.layers().iter().zip(&mut state.caches) {
            xs = layer.step(&xs, cache, &state.lineage)?;
        }
        state.len += 1;
        apply_final_norm(self.decoder.final_norm(), xs)?.squeeze(1)
    }

    fn generator(&self) -> &Generator {
        &self.generator
    }
}

/// What incremental decoding keeps between steps: each layer's keys and values so far.
pub struct DecoderOnlyState {
    caches: Vec<KeyValueCache>,
    lineage: Lineage,
    /// Positions fed so far.
    len: usize,
}

impl DecodingState for DecoderOnlyState {
    fn reorder(&mut self, rows: &[u32]) -> Result<()> {
        self.lineage.reorder(rows)
    }

    fn len(&self) -> usize {
        self.len
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
