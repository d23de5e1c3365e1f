//! Either model family, as the trainer holds it: the encoder-decoder (translation) or the
//! decoder-only language model, chosen by `model.arch`.

use candle_core::{Device, Result, Tensor};
use candle_nn::{VarBuilder, VarMap};

use super::decoder_only::DecoderOnly;
use super::encoder_decoder::EncoderDecoder;
use super::init::fresh_model;
use crate::config::{Architecture, ModelConfig, VocabSizes};
use crate::kernels::dropout::Mode;

pub enum Model {
    Translation(EncoderDecoder),
    /// Trained on the target side of its examples (a language model has no source).
    Language(DecoderOnly),
}

impl Model {
    /// Builds the model `cfg.arch` names from `vb`.
    pub fn new(cfg: &ModelConfig, vocab: VocabSizes, vb: VarBuilder) -> Result<Self> {
        Ok(match cfg.arch {
            Architecture::EncoderDecoder => Self::Translation(EncoderDecoder::new(cfg, vocab, vb)?),
            Architecture::DecoderOnly => Self::Language(DecoderOnly::new(cfg, vocab.tgt, vb)?),
        })
    }

    /// A fresh model whose parameters live in `varmap`, initialised as the reference does.
    pub fn fresh(
        cfg: &ModelConfig,
        vocab: VocabSizes,
        varmap: &VarMap,
        seed: u64,
        device: &Device,
    ) -> Result<Self> {
        fresh_model(varmap, seed, device, |vb| Self::new(cfg, vocab, vb))
    }

    /// Teacher-forced next-token logits `(batch, tgt_len, vocab)` of a padded batch: the
    /// translation model reads the source; the language model only the target prefix.
    pub fn forward(
        &self,
        src: &Tensor,
        tgt_in: &Tensor,
        src_mask: &Tensor,
        tgt_mask: &Tensor,
        mode: Mode,
    ) -> Result<Tensor> {
        match self {
            Self::Translation(model) => {
                let hidden = model.forward(src, tgt_in, src_mask, tgt_mask, mode)?;
                model.generator().logits(&hidden)
            }
            // Causal: a padded tail never affects the positions before it, and its targets
            // are padding, which the loss skips.
            Self::Language(model) => model.forward(tgt_in, mode),
        }
    }

    /// The non-trained tensors a checkpoint carries (sinusoidal position tables).
    pub fn buffers(&self) -> Vec<(String, Tensor)> {
        match self {
            Self::Translation(model) => model.buffers(),
            Self::Language(model) => model.buffers(),
        }
    }

    pub fn translation(&self) -> Option<&EncoderDecoder> {
        match self {
            Self::Translation(model) => Some(model),
            Self::Language(_) => None,
        }
    }

    /// The translation model itself; none for a language model.
    pub fn into_translation(self) -> Option<EncoderDecoder> {
        match self {
            Self::Translation(model) => Some(model),
            Self::Language(_) => None,
        }
    }

    pub fn language(&self) -> Option<&DecoderOnly> {
        match self {
            Self::Language(model) => Some(model),
            Self::Translation(_) => None,
        }
    }
}
