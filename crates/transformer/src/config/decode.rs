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
    /// Beam search's length penalty exponent alpha: scores divided by ((5 + len) / 6)^alpha
    /// (GNMT's, this tool's models), or by len^alpha (`length_normalization = "length"`).
    pub length_penalty: f64,
    /// Most target tokens, `</s>` included; absent: the source length + 50.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_len: Option<usize>,
    /// How beam search normalises a hypothesis's score by its length: `gnmt` (Wu et al.
    /// 2016, this tool's default) or `length` (transformers' `generate()`, as MarianMT
    /// checkpoints are decoded).
    pub length_normalization: LengthNormalization,
    /// A row still open at the length limit is given `</s>` as its last token, as
    /// transformers' `forced_eos_token_id` does; otherwise it is cut there.
    pub end_at_max_len: bool,
    /// Beam search renormalises each step's log-probabilities over the ids it may generate
    /// (transformers' `renormalize_logits`), instead of leaving the never-generated ids' mass
    /// out of the sum.
    pub renormalize: bool,
    /// The numbers the linear layers multiply in: `float32`, or `int8` (weights quantized
    /// once per output row, inputs per row as they come; CPU only).
    pub compute_type: ComputeType,
    /// Target tokens per source token, the median over the training pairs: `train` measures
    /// it when a run starts (unless the config states it). A translation of under half the
    /// tokens this ratio gives its source is marked `short` (a sentence may have been left
    /// out); absent (a MarianMT directory, an older checkpoint): taken as 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub length_ratio: Option<f64>,
}

impl DecodeConfig {
    /// The ratio taken when none was measured.
    pub const UNMEASURED_LENGTH_RATIO: f64 = 1.0;

    /// [`Self::length_ratio`], or what is taken without one.
    pub fn length_ratio_or_default(&self) -> f64 {
        self.length_ratio.unwrap_or(Self::UNMEASURED_LENGTH_RATIO)
    }
}

/// The form decoding's matrices are held and multiplied in (CTranslate2's `compute_type`):
/// the one name for it from the config key and the flag through the loader, which chooses it
/// once ([`crate::checkpoint::load_as`]) and reads and serves every matrix in it. Float32
/// reads a file's matrices as stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ComputeType {
    #[default]
    Float32,
    Int8,
    /// bf16 weights and inputs to the products, f32 sums and everything else f32.
    Bfloat16,
}

impl ComputeType {
    /// As configs and flags spell it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Float32 => "float32",
            Self::Int8 => "int8",
            Self::Bfloat16 => "bfloat16",
        }
    }

    /// From a flag's text; the error names the choices.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "float32" => Ok(Self::Float32),
            "int8" => Ok(Self::Int8),
            "bfloat16" => Ok(Self::Bfloat16),
            other => Err(format!(
                "{other:?} is not a compute type: float32, int8 or bfloat16"
            )),
        }
    }
}

/// What a hypothesis's summed log-probability is divided by in beam search.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LengthNormalization {
    /// ((5 + len) / 6)^alpha.
    #[default]
    Gnmt,
    /// len^alpha.
    Length,
}

impl LengthNormalization {
    /// The divisor of a hypothesis of `length` tokens under exponent `alpha`.
    pub fn divisor(self, length: usize, alpha: f32) -> f32 {
        match self {
            Self::Gnmt => ((5.0 + length as f32) / 6.0).powf(alpha),
            Self::Length => (length as f32).powf(alpha),
        }
    }

    /// The formula, for messages.
    pub fn formula(self) -> &'static str {
        match self {
            Self::Gnmt => "((5 + len) / 6)^alpha",
            Self::Length => "len^alpha",
        }
    }
}

impl Default for DecodeConfig {
    fn default() -> Self {
        Self {
            beam: 1,
            length_penalty: 1.0,
            max_len: None,
            length_normalization: LengthNormalization::Gnmt,
            end_at_max_len: false,
            renormalize: false,
            compute_type: ComputeType::Float32,
            length_ratio: None,
        }
    }
}
