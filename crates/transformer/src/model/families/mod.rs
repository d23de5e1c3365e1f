//! The model families and the one table that builds them: the encoder-decoder (`model.arch =
//! "encoder-decoder"`, the paper's translation model) and the decoder-only language model
//! (`"decoder-only"`). The trainer, checkpoints and commands hold a [`Model`], never a
//! family's own type; decoding goes through [`crate::model::DecodingModel`], which every family
//! implements.
//!
//! Adding a family: a file with its modules, `impl ModelFamily` and `impl DecodingModel` for
//! it, an `Architecture` variant in the config, and one row in [`FAMILIES`].

pub mod decoder_only;
pub mod encoder_decoder;
pub mod family;

use std::ops::Deref;

use candle_core::{Device, Result};
use candle_nn::{VarBuilder, VarMap};

use crate::config::{Architecture, ModelConfig, VocabSizes};
use crate::model::families::decoder_only::DecoderOnly;
use crate::model::families::encoder_decoder::EncoderDecoder;
use crate::model::families::family::ModelFamily;
use crate::model::init::fresh_model;
use crate::model::step::DecodingModel;

/// Builds a family's modules from a `VarBuilder` (fresh variables, or a checkpoint's
/// tensors through its format).
type Builder = fn(&ModelConfig, VocabSizes, VarBuilder) -> Result<Box<dyn ModelFamily>>;

/// Every family, by the `model.arch` that names it.
const FAMILIES: &[(Architecture, Builder)] = &[
    (Architecture::EncoderDecoder, |cfg, vocab, vb| {
        Ok(Box::new(EncoderDecoder::new(cfg, vocab, vb)?))
    }),
    (Architecture::DecoderOnly, |cfg, vocab, vb| {
        Ok(Box::new(DecoderOnly::new(cfg, vocab.tgt, vb)?))
    }),
];

/// A model of any family, as `cfg.arch` chose it.
pub struct Model {
    family: Box<dyn ModelFamily>,
}

impl Model {
    /// Builds the model `cfg.arch` names from `vb`.
    pub fn new(cfg: &ModelConfig, vocab: VocabSizes, vb: VarBuilder) -> Result<Self> {
        let Some((_, build)) = FAMILIES.iter().find(|(arch, _)| *arch == cfg.arch) else {
            candle_core::bail!(
                "no model family is registered for model.arch {:?}",
                cfg.arch
            )
        };
        Ok(Self {
            family: build(cfg, vocab, vb)?,
        })
    }

    /// A fresh model whose parameters live in `varmap`, initialised as the reference's
    /// `make_model` does (Xavier-uniform for every matrix) from `seed`.
    pub fn fresh(
        cfg: &ModelConfig,
        vocab: VocabSizes,
        varmap: &VarMap,
        seed: u64,
        device: &Device,
    ) -> Result<Self> {
        fresh_model(varmap, seed, device, |vb| Self::new(cfg, vocab, vb))
    }

    /// The model as the decoders see it.
    pub fn decoding(&self) -> &dyn DecodingModel {
        &*self.family
    }

    /// The model as its family's own type `F`, when it is one.
    pub fn family<F: ModelFamily + 'static>(&self) -> Option<&F> {
        self.family.as_any().downcast_ref::<F>()
    }
}

impl Deref for Model {
    type Target = dyn ModelFamily;

    fn deref(&self) -> &Self::Target {
        &*self.family
    }
}
