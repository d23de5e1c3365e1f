//! `[decode]`: how the run's model is meant to be decoded. Validation BLEU decodes with it, so
//! that it predicts what `translate` and `eval` will score, and it travels in the checkpoint's
//! config.toml as their defaults (a flag still overrides it).

use serde::{Deserialize, Serialize};

/// Beam size, length penalty and length limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DecodeConfig {
    /// 1: greedy; more: beam search with this many beams.
    pub beam: usize,
    /// Beam search's length penalty exponent: scores divided by ((5 + len) / 6)^alpha.
    pub length_penalty: f64,
    /// Most target tokens, `</s>` included; absent: the source length + 50.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_len: Option<usize>,
}

impl Default for DecodeConfig {
    fn default() -> Self {
        Self {
            beam: 1,
            length_penalty: 1.0,
            max_len: None,
        }
    }
}
