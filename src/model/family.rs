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

/// A padded batch as a teacher-forced pass reads it.
pub enum TeacherForced {
    /// The reference's `Batch`: `src` `(batch, src_len)` with its padding mask `(batch, 1,
    /// src_len)`, `tgt_in` `(batch, tgt_len)` with its padding-and-subsequent mask `(batch,
    /// tgt_len, tgt_len)`.
    Translation {
        src: Tensor,
        src_mask: Tensor,
        tgt_in: Tensor,
        tgt_mask: Tensor,
    },
    /// The target prefix `(batch, len)`; the model applies its own causal mask.
    Language { ids: Tensor },
}

impl TeacherForced {
    fn family(&self) -> &'static str {
        match self {
            Self::Translation { .. } => "translation",
            Self::Language { .. } => "language",
        }
    }
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

    /// Teacher-forced next-token logits `(batch, tgt_len, vocab)` of a padded batch.
    pub fn forward(&self, batch: &TeacherForced, mode: Mode) -> Result<Tensor> {
        match (self, batch) {
            (
                Self::Translation(model),
                TeacherForced::Translation {
                    src,
                    src_mask,
                    tgt_in,
                    tgt_mask,
                },
            ) => {
                let hidden = model.forward(src, tgt_in, src_mask, tgt_mask, mode)?;
                model.generator().logits(&hidden)
            }
            // Causal: a padded tail never affects the positions before it, and its targets
            // are padding, which the loss skips.
            (Self::Language(model), TeacherForced::Language { ids }) => model.forward(ids, mode),
            _ => candle_core::bail!(
                "a {} model cannot read a {} batch",
                self.family(),
                batch.family()
            ),
        }
    }

    /// Whether the model reads a source sentence: which [`TeacherForced`] batch it takes.
    pub fn reads_source(&self) -> bool {
        matches!(self, Self::Translation(_))
    }

    fn family(&self) -> &'static str {
        match self {
            Self::Translation(_) => "translation",
            Self::Language(_) => "language",
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
