//! Decoding: the searches that turn a model's next-token scores into sequences, written
//! against the step contract every family implements ([`crate::model::DecodingModel`], in
//! `model/step.rs`) and never a family's own type: greedy (the reference's loop and the
//! cached batch), beam search over a batch, and sampling. What a call asks for
//! ([`DecodeInput`]) and what it gives back ([`Hypothesis`]) live here; the settings a search
//! runs with are resolved in [`crate::infer::settings`].

pub mod beam;
pub mod greedy;
pub mod restricted;
pub mod sampling;
pub mod vocab_map;

pub use beam::{beam_search, BeamSettings};
pub use greedy::{greedy_batch, greedy_decode, incremental_log_probs, teacher_forced_log_probs};

use crate::model::Prompt;

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
