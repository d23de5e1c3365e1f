//! Inference: text in, text out, over the decoders of [`crate::decoding`] and never a model
//! family's own type. The settings the decoders run with ([`settings`]: settled one way for
//! every door), and the two front ends that take text in and give text out: the [`Translator`] (the one front door:
//! `Translator::open` a checkpoint, then translate with settings it resolves; `translate`,
//! `eval`, `attention`, the server and the benchmark all go through it), decoding through a
//! [`translator::ConfiguredTranslator`] (which validation builds from a training model too),
//! and the [`text_generator::TextGenerator`], one or the other for a model as [`Inference`]
//! says.

pub mod attention;
mod front_door;
mod languages;
mod limits;
pub mod settings;
mod short_mark;
pub mod text_generator;
mod translation;
pub mod translator;

pub use front_door::{LoadOptions, Translator};
pub use languages::{LanguageNames, LanguageRefused, OnePairLanguages};

use candle_core::Device;

use crate::model::Model;
use crate::tokenize::Tokenizers;
use settings::DecodeSettings;
use text_generator::TextGenerator;
use translator::ConfiguredTranslator;

/// The text-in, text-out front end of a model: a translator for a model that reads a
/// source, a text generator for one that continues a prompt.
pub enum Inference<'a> {
    Translation(ConfiguredTranslator<'a>),
    Continuation(TextGenerator<'a>),
}

impl<'a> Inference<'a> {
    /// The front end over `model` with its `tokenizers`; `options` are the translator's.
    pub fn of(
        model: &'a Model,
        tokenizers: &'a Tokenizers,
        device: &'a Device,
        options: DecodeSettings,
    ) -> Self {
        if model.reads_source() {
            Self::Translation(ConfiguredTranslator {
                model: model.decoding(),
                tokenizers,
                device,
                options,
                vocab_map: None,
            })
        } else {
            Self::Continuation(TextGenerator {
                model: model.decoding(),
                tokenizer: &tokenizers.tgt,
                device,
            })
        }
    }
}
