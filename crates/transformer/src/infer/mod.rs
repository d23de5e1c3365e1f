//! Inference: everything that runs a trained model, through the decoding contract
//! ([`crate::model::DecodingModel`]) and never a model family's own type. The decoders
//! (greedy: the reference's loop and the cached batch; beam search over a batch; sampling),
//! the settings they run with ([`settings`]: one resolver for every door), and the two front
//! ends that take text in and give text out: the [`Translator`] (the one front door:
//! `Translator::open` a checkpoint, then translate with settings it resolves; `translate`,
//! `eval`, `attention`, the server and the benchmark all go through it), decoding through a
//! [`translator::ConfiguredTranslator`] (which validation builds from a training model too),
//! and the [`text_generator::TextGenerator`], one or the other for a model as [`Inference`]
//! says.

pub mod attention;
mod beam;
mod front_door;
mod greedy;
pub mod sampling;
pub mod settings;
pub mod text_generator;
pub mod translator;

pub use beam::{beam_search, BeamSettings};
pub use front_door::{LoadOptions, Translator};
pub use greedy::{greedy_batch, greedy_decode, incremental_log_probs, teacher_forced_log_probs};

use candle_core::Device;

use crate::model::{Model, Prompt};
use crate::tokenize::Tokenizers;
use text_generator::TextGenerator;
use translator::{ConfiguredTranslator, DecodeOptions};

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
        options: DecodeOptions,
    ) -> Self {
        if model.reads_source() {
            Self::Translation(ConfiguredTranslator {
                model: model.decoding(),
                tokenizers,
                device,
                options,
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

/// One decoding call: where it starts, when each row stops, and whether anyone still waits.
#[derive(Clone, Copy)]
pub struct DecodeInput<'a> {
    pub prompt: Prompt<'a>,
    /// Most ids each row generates (its end symbol included).
    pub max_steps: &'a [usize],
    /// Stop a row after producing this id (it is kept in the hypothesis); `None` never
    /// stops early, as the reference's demo does.
    pub end: Option<u32>,
    /// Ids the decoders never generate (the vocabularies' [`crate::tokenize::SpecialIds`]); the
    /// reference's own loop (`greedy_decode`) keeps every id.
    pub never: &'a [u32],
    /// A row still open at its step limit gets `end` as its last id, scored 0 (see
    /// [`crate::config::DecodeConfig::end_at_max_len`]); otherwise it is cut there.
    pub end_at_limit: bool,
    /// Asked between steps; see [`StillWanted`].
    pub still_wanted: StillWanted<'a>,
}

impl DecodeInput<'_> {
    /// The most steps any row may take; an error when the limits do not match the rows.
    pub fn longest(&self) -> candle_core::Result<usize> {
        let rows = self.prompt.rows()?;
        if self.max_steps.len() != rows {
            candle_core::bail!(
                "decoding: {} step limits for {rows} rows",
                self.max_steps.len()
            )
        }
        Ok(self.max_steps.iter().copied().max().unwrap_or(0))
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
