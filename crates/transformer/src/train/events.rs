//! What the training loop reports: per-step progress, which checkpoint it asks for and why it
//! stops; its metrics.jsonl records are [`crate::metrics::MetricRecord`]. The observer that
//! receives them is [`super::trainer::TrainObserver`].

use std::time::Duration;

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
