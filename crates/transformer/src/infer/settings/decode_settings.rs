//! The settings one decoding call runs with, settled: every number, the requests it came from
//! (whose names its errors use) and the bounds each further request is checked against.

use super::{check_beam, check_length_penalty, check_max_len, check_n_best};
use super::{DecodeRequest, Refused};
use crate::config::{DecodeConfig, LengthNormalization};
use crate::decoding::BeamSettings;
use crate::tokenize::specials::LanguageIds;

/// Target tokens allowed beyond the source length when no maximum is given.
const DEFAULT_EXTRA_TARGET_TOKENS: usize = 50;

/// How to decode: the settled numbers, where they came from and what bounds them.
#[derive(Debug, Clone)]
pub struct DecodeSettings {
    /// 1: greedy (batched); more: beam search with this many beams.
    pub beam: usize,
    pub length_penalty: f32,
    /// Most generated tokens (`</s>` included); default source length + 50.
    pub max_len: Option<usize>,
    /// Hypotheses kept per sentence (at most `beam`): the best is the translation, the
    /// others its `alternatives`.
    pub n_best: usize,
    /// What the length penalty divides by: the checkpoint's, not a choice of the asker.
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
    /// The requests these settings were settled from, lowest first.
    pub(super) requests: Vec<DecodeRequest>,
    pub(super) bounds: Bounds,
}

/// What the settings are checked against.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bounds {
    /// Tokens of the target vocabulary: the widest useful beam.
    pub target_vocab: usize,
    /// Rows of the model's position table (`model.max_len`).
    pub max_positions: usize,
    /// The door's widest beam (a server's limit).
    pub door_beam: Option<usize>,
}

impl DecodeSettings {
    /// `requests` (lowest first) over the built-in defaults and how `decode` says the model
    /// is decoded (its length normalization, end at the length limit, renormalization and
    /// length ratio), checked once every request has spoken (a value a higher request
    /// replaces is never checked) against the model's `target_vocab` tokens and
    /// `max_positions` positions and a door's widest beam; the error names the setting as its
    /// request calls it.
    pub fn settle(
        decode: &DecodeConfig,
        requests: Vec<DecodeRequest>,
        target_vocab: usize,
        max_positions: usize,
        door_beam: Option<usize>,
    ) -> Result<Self, Refused> {
        let unsettled = Self {
            length_normalization: decode.length_normalization,
            end_at_max_len: decode.end_at_max_len,
            renormalize: decode.renormalize,
            length_ratio: decode.length_ratio_or_default() as f32,
            bounds: Bounds {
                target_vocab,
                max_positions,
                door_beam,
            },
            ..Self::default()
        };
        unsettled.settled_from(requests)
    }

    /// `request` over these settings: the requests below it settled again with it on top.
    /// A request that sets nothing gets these settings as they are.
    pub fn ask(&self, request: DecodeRequest) -> Result<Self, Refused> {
        if request.sets_nothing() {
            return Ok(self.clone());
        }
        let mut requests = self.requests.clone();
        requests.push(request);
        self.settled_from(requests)
    }

    /// These settings with the language pair `languages` (a request's own).
    pub fn with_languages(&self, languages: Option<LanguageIds>) -> Self {
        Self {
            languages,
            ..self.clone()
        }
    }

    /// `requests` over the defaults, with these settings' fixed choices and bounds.
    fn settled_from(&self, requests: Vec<DecodeRequest>) -> Result<Self, Refused> {
        let defaults = Self::default();
        let mut settings = Self {
            beam: defaults.beam,
            length_penalty: defaults.length_penalty,
            max_len: defaults.max_len,
            n_best: defaults.n_best,
            requests: Vec::new(),
            ..self.clone()
        };
        let mut length_penalty = f64::from(settings.length_penalty);
        // The request that set each value, for its error.
        let mut beam_from: Option<&DecodeRequest> = None;
        let mut n_best_from: Option<&DecodeRequest> = None;
        let mut length_penalty_from: Option<&DecodeRequest> = None;
        let mut max_len_from: Option<&DecodeRequest> = None;
        for request in &requests {
            if let Some(beam) = request.beam {
                settings.beam = beam;
                beam_from = Some(request);
            }
            if let Some(alpha) = request.length_penalty {
                length_penalty = alpha;
                length_penalty_from = Some(request);
            }
            if let Some(max_len) = request.max_len {
                settings.max_len = Some(max_len);
                max_len_from = Some(request);
            }
            if let Some(n_best) = request.n_best {
                settings.n_best = n_best;
                n_best_from = Some(request);
                // More hypotheses than a beam set below widen it; the same request's beam
                // stands.
                if request.beam.is_none() && settings.beam < n_best {
                    settings.beam = n_best;
                    beam_from = None;
                }
            }
        }
        let bounds = &self.bounds;
        settings.length_penalty = check_length_penalty(
            length_penalty,
            length_penalty_from,
            self.length_normalization,
            bounds,
        )?;
        check_n_best(&settings, n_best_from, beam_from, bounds)?;
        check_beam(&settings, beam_from, n_best_from, bounds)?;
        check_max_len(&settings, max_len_from, bounds)?;
        settings.requests = requests;
        Ok(settings)
    }

    /// Most tokens decoding generates for a source of `source_tokens` (without `<s>` and
    /// `</s>`) on a model whose position table has `max_positions` rows.
    pub fn max_steps(&self, source_tokens: usize, max_positions: usize) -> usize {
        self.max_len
            .unwrap_or(source_tokens + DEFAULT_EXTRA_TARGET_TOKENS)
            .min(max_positions)
    }

    /// Beam search's settings; `None` for greedy decoding (a beam of 1 and one hypothesis).
    pub fn beam_settings(&self) -> Option<BeamSettings> {
        (self.beam > 1).then_some(BeamSettings {
            beam: self.beam,
            length_penalty: self.length_penalty,
            normalization: self.length_normalization,
            renormalize: self.renormalize,
            n_best: self.n_best,
            prefix_in_length: 0,
        })
    }
}

/// Settings that decode alike are equal, wherever their numbers came from.
impl PartialEq for DecodeSettings {
    fn eq(&self, other: &Self) -> bool {
        self.beam == other.beam
            && self.length_penalty == other.length_penalty
            && self.max_len == other.max_len
            && self.n_best == other.n_best
            && self.length_normalization == other.length_normalization
            && self.end_at_max_len == other.end_at_max_len
            && self.renormalize == other.renormalize
            && self.length_ratio == other.length_ratio
            && self.languages == other.languages
    }
}

/// The built-in defaults, from no request and unbounded (the untrained demo, tests).
impl Default for DecodeSettings {
    fn default() -> Self {
        Self {
            beam: 1,
            length_penalty: 1.0,
            max_len: None,
            n_best: 1,
            length_normalization: LengthNormalization::Gnmt,
            end_at_max_len: false,
            renormalize: false,
            length_ratio: DecodeConfig::UNMEASURED_LENGTH_RATIO as f32,
            languages: None,
            requests: Vec::new(),
            bounds: Bounds {
                target_vocab: usize::MAX,
                max_positions: usize::MAX,
                door_beam: None,
            },
        }
    }
}
