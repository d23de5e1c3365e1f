//! `[training]`: the loop, the optimiser and the schedule, with the paper's defaults
//! (section 5).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The optimiser, the schedule, the loss and the loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainingConfig {
    /// Seeds initialisation, dropout and data order: same seed, same result on the CPU.
    pub seed: u64,
    pub epochs: usize,
    /// Most tokens per batch: sentences x the longer padded side.
    pub max_tokens: usize,
    /// Batches whose gradients are summed before each optimiser step.
    pub accumulate: usize,
    /// Rescale gradients whose global L2 norm exceeds this; absent: no clipping.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clip_grad_norm: Option<f64>,
    /// The Noam schedule: lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).
    pub lr_factor: f64,
    /// Which step's rate each optimiser step takes (see [`LrSchedule`]).
    pub schedule: LrSchedule,
    pub warmup: usize,
    pub adam_beta1: f64,
    pub adam_beta2: f64,
    pub adam_eps: f64,
    /// Probability mass spread over the non-target, non-padding words.
    pub label_smoothing: f64,
    /// Steps between progress log lines and metrics records.
    pub log_every: usize,
    /// Steps between checkpoints (one is always written at the end).
    pub checkpoint_every: usize,
    /// Checkpoints kept for averaging: each `Last` one is also written to
    /// `checkpoints/step-N/`, the newest `keep_last` of them stay (0: none).
    pub keep_last: usize,
    /// At the end of a run, the mean of the last this-many kept checkpoints as `averaged/`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub average_last: Option<usize>,
    /// Epochs between validations (loss and BLEU on `data.valid`, judged for `best/` and
    /// `patience`): 1 validates after every epoch.
    pub validate_every: usize,
    /// Steps between validations during epochs as well, for long epochs (fairseq's
    /// `--validate-interval-updates`); absent: only after epochs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validate_every_steps: Option<usize>,
    /// Early stopping: the run ends after this many validations in a row without a better
    /// score (BLEU, or the loss where there is no BLEU): epochs, with the default
    /// `validate_every`; absent: every epoch runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patience: Option<usize>,
    /// A checkpoint directory whose weights (and tokenizer files) training starts from,
    /// with a fresh optimiser and this config's schedule; absent: fresh weights.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_from: Option<PathBuf>,
    /// The dtype of the forward and backward passes. The weights and Adam's moments stay f32
    /// (master weights) whatever it says; checkpoints are f32.
    pub dtype: ComputeDtype,
}

/// The step whose Noam rate an optimiser step takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LrSchedule {
    /// The paper's: optimiser step n (from 1) at lr(n).
    #[default]
    Noam,
    /// The Annotated Transformer's `LambdaLR` wiring: the scheduler steps after the optimiser
    /// and starts at 0 (read as 1), so step n takes lr(n - 1), and the first two both lr(1).
    NoamLambdalr,
}

/// What training computes in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ComputeDtype {
    #[default]
    F32,
    /// bfloat16: f32's range with 8 bits of mantissa. On a GPU the passes run in bf16; on
    /// the CPU the products do, on its bf16 engine (see `train::precision`).
    Bf16,
    /// float16: without loss scaling, small gradients can underflow to zero; prefer bf16.
    /// GPUs only.
    F16,
}

impl ComputeDtype {
    /// `f32`, `bf16` or `f16`, as a config names it.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "f32" => Ok(Self::F32),
            "bf16" => Ok(Self::Bf16),
            "f16" => Ok(Self::F16),
            other => Err(format!(
                "{other:?} is not a training dtype: f32, bf16 or f16"
            )),
        }
    }

    /// As a config names it.
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::Bf16 => "bf16",
            Self::F16 => "f16",
        }
    }

    pub fn candle(self) -> candle_core::DType {
        match self {
            Self::F32 => candle_core::DType::F32,
            Self::Bf16 => candle_core::DType::BF16,
            Self::F16 => candle_core::DType::F16,
        }
    }
}

impl Default for TrainingConfig {
    fn default() -> Self {
        Self {
            seed: 1,
            epochs: 10,
            max_tokens: 4096,
            accumulate: 1,
            clip_grad_norm: None,
            lr_factor: 1.0,
            schedule: LrSchedule::Noam,
            warmup: 4000,
            adam_beta1: 0.9,
            adam_beta2: 0.98,
            adam_eps: 1e-9,
            label_smoothing: 0.1,
            log_every: 10,
            checkpoint_every: 1000,
            keep_last: 0,
            average_last: None,
            validate_every: 1,
            validate_every_steps: None,
            patience: None,
            init_from: None,
            dtype: ComputeDtype::F32,
        }
    }
}
