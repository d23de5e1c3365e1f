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

use crate::data::vocab::{BOS_ID, PAD_ID};
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

/// Ids that decoding never generates: `<pad>` only fills a batch and `<s>` only starts a
/// target. A model still gives them a little probability (label smoothing spreads mass over
/// `<s>`), and a wide beam over a small vocabulary would otherwise extend hypotheses with
/// them: `<s>` in the middle of a translation, or alternatives that read the same. The
/// reference's own loop (`greedy_decode`) and the untrained demo keep every id.
pub const NEVER_GENERATED: [u32; 2] = [PAD_ID, BOS_ID];

/// Asked between decoding steps: whether someone still waits for the result. A server's
/// client that gave up (its time limit passed, its connection closed) makes it false, and
/// the search stops at that step with an error ([`ABANDONED`]) instead of finishing for
/// nobody.
pub type StillWanted<'a> = &'a dyn Fn() -> bool;

/// For callers whose result is always wanted.
pub fn always_wanted() -> bool {
    true
}

/// The error of a search whose model gave a log-probability that is not a finite number:
/// finite weights can still overflow (a gain of 1e38), and an argmax over NaN would pick
/// `<pad>`.
pub const NOT_A_NUMBER: &str = "the model's output is not a number (its activations overflow); \
                                the checkpoint's weights are damaged: pick another checkpoint";

/// The error of a search stopped because its result was no longer wanted.
pub const ABANDONED: &str = "decoding abandoned: nobody waits for the result any more";

/// When decoding stops.
#[derive(Debug, Clone, Copy)]
pub struct DecodeLimits {
    /// Most ids to generate.
    pub max_steps: usize,
    /// Stop after producing this id (it is kept in the hypothesis); `None` never stops early,
    /// as the reference's demo does.
    pub end: Option<u32>,
}
