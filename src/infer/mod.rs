//! Inference: everything that runs a trained model. Decoding for translation (greedy, the
//! reference's loop and the cached batch; beam search over a batch of sentences), sampling
//! from the language model, and the two front ends that take text in and give text out: the
//! [`translator::Translator`] (which `translate`, `eval` and validation share, batching
//! included) and the [`text_generator::TextGenerator`], one or the other for a model as
//! [`Inference`] says.

pub mod attention;
mod beam;
mod greedy;
pub mod sampling;
pub mod text_generator;
pub mod translator;

pub use beam::{beam_search, beam_search_batch, beam_search_batch_n_best, BeamSettings};
pub use greedy::{greedy_batch, greedy_decode, incremental_log_probs, teacher_forced_log_probs};

use candle_core::Device;

use crate::data::Tokenizers;
use crate::model::Model;
use text_generator::TextGenerator;
use translator::{DecodeOptions, Translator};

/// The text-in, text-out front end of a model, by its family.
pub enum Inference<'a> {
    Translation(Translator<'a>),
    Language(TextGenerator<'a>),
}

impl<'a> Inference<'a> {
    /// The front end over `model` with its `tokenizers`; `options` are the translator's.
    pub fn of(
        model: &'a Model,
        tokenizers: &'a Tokenizers,
        max_positions: usize,
        device: &'a Device,
        options: DecodeOptions,
    ) -> Self {
        match model {
            Model::Translation(model) => Self::Translation(Translator {
                model,
                tokenizers,
                max_positions,
                device,
                options,
            }),
            Model::Language(model) => Self::Language(TextGenerator {
                model,
                tokenizer: &tokenizers.tgt,
                max_positions,
                device,
            }),
        }
    }
}

/// A decoded sequence: ids after the start symbol and the Generator's log-probability of each.
#[derive(Debug, Clone, PartialEq)]
pub struct Hypothesis {
    pub ids: Vec<u32>,
    pub log_probs: Vec<f32>,
}

impl Hypothesis {
    pub(crate) fn empty() -> Self {
        Self {
            ids: Vec::new(),
            log_probs: Vec::new(),
        }
    }

    pub fn score(&self) -> f32 {
        self.log_probs.iter().sum()
    }
}

/// When decoding stops.
#[derive(Debug, Clone, Copy)]
pub struct DecodeLimits {
    /// Most ids to generate.
    pub max_steps: usize,
    /// Stop after producing this id (it is kept in the hypothesis); `None` never stops early,
    /// as the reference's demo does.
    pub end: Option<u32>,
}
