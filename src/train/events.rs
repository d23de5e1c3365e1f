//! What the training loop reports: per-step progress, metrics.jsonl records, which checkpoint
//! it asks for and why it stops. The observer that receives them is
//! [`super::trainer::TrainObserver`].

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What one optimiser step did, for progress display.
#[derive(Debug, Clone)]
pub struct StepReport {
    pub step: usize,
    pub total_steps: usize,
    pub epoch: usize,
    /// Label-smoothed KL per target token.
    pub loss: f64,
    pub lr: f64,
    /// Target tokens per second since the run started.
    pub tokens_per_s: f64,
    pub elapsed: Duration,
}

/// One line of metrics.jsonl.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum MetricRecord {
    Step {
        step: usize,
        epoch: usize,
        /// Mean loss per target token over the steps since the previous record.
        loss: f64,
        lr: f64,
        #[serde(serialize_with = "hundredths")]
        tokens_per_s: f64,
        #[serde(serialize_with = "hundredths")]
        elapsed_s: f64,
    },
    Epoch {
        step: usize,
        epoch: usize,
        train_loss: f64,
        #[serde(skip_serializing_if = "Option::is_none")]
        valid_loss: Option<f64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        valid_bleu: Option<f64>,
        #[serde(serialize_with = "hundredths")]
        elapsed_s: f64,
    },
}

/// Wall-clock figures to 0.01: their further digits are timing noise.
fn hundredths<S: serde::Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64((value * 100.0).round() / 100.0)
}

/// Which checkpoint the loop asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointKind {
    /// The current weights (periodically, after each epoch, at the end).
    Last,
    /// The weights with the best validation BLEU so far.
    Best,
}

/// Why a run stops before its last epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// SIGINT or SIGTERM (the signal number).
    Signal(i32),
    /// `--stop-at-step` was reached.
    StepLimit,
    /// Another rank of a distributed run was asked to stop (its signal reached it first).
    OtherRank,
}
