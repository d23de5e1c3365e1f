//! The settings one decoding call runs with, settled: what every layer of settings resolves
//! to.

use crate::config::LengthNormalization;
use crate::tokenize::specials::LanguageIds;

/// Target tokens allowed beyond the source length when no maximum is given.
const DEFAULT_EXTRA_TARGET_TOKENS: usize = 50;

/// How to decode, as the [`Resolver`](super::Resolver) settles it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecodeOptions {
    /// 1: greedy (batched); more: beam search with this many beams.
    pub beam: usize,
    pub length_penalty: f32,
    /// Most generated tokens (`</s>` included); default source length + 50.
    pub max_len: Option<usize>,
    /// Hypotheses kept per sentence (at most `beam`): the best is the translation, the
    /// others its `alternatives`.
    pub n_best: usize,
    /// What the length penalty divides by: the checkpoint's (see [`DecodeBounds`]).
    ///
    /// [`DecodeBounds`]: super::DecodeBounds
    pub length_normalization: LengthNormalization,
    /// End a translation still open at the length limit with `</s>` (the checkpoint's).
    pub end_at_max_len: bool,
    /// Beam search renormalises over the ids it may generate (the checkpoint's).
    pub renormalize: bool,
    /// The checkpoint's target tokens per source token, against which a translation is
    /// marked `short` (see [`crate::infer::translator::is_short`]).
    pub length_ratio: f32,
    /// A multilingual model's language pair, where a request names one (else the pair the
    /// model was opened with: [`crate::tokenize::Tokenizers::languages`]).
    pub languages: Option<LanguageIds>,
}

impl DecodeOptions {
    /// Most tokens decoding generates for a source of `source_tokens` (without `<s>` and
    /// `</s>`) on a model whose position table has `max_positions` rows.
    pub fn max_steps(&self, source_tokens: usize, max_positions: usize) -> usize {
        self.max_len
            .unwrap_or(source_tokens + DEFAULT_EXTRA_TARGET_TOKENS)
            .min(max_positions)
    }
}

impl Default for DecodeOptions {
    fn default() -> Self {
        Self {
            beam: 1,
            length_penalty: 1.0,
            max_len: None,
            n_best: 1,
            length_normalization: LengthNormalization::Gnmt,
            end_at_max_len: false,
            renormalize: false,
            length_ratio: crate::config::DecodeConfig::UNMEASURED_LENGTH_RATIO as f32,
            languages: None,
        }
    }
}
