//! Inference: everything that runs a trained model. Decoding for translation (greedy, the
//! reference's loop and the cached batch; beam search over a batch of sentences), sampling
//! from the language model, and the two front ends that take text in and give text out: the
//! [`translator::Translator`] (which `translate`, `eval` and validation share, batching
//! included) and the [`text_generator::TextGenerator`].

mod beam;
mod greedy;
pub mod sampling;
pub mod text_generator;
pub mod translator;

pub use beam::{beam_search, beam_search_batch, BeamSettings};
pub use greedy::{greedy_batch, greedy_decode, incremental_log_probs, teacher_forced_log_probs};

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
