//! What a checkpoint needs beyond the weights and Adam's moments to continue a run exactly:
//! where the loop stands (epoch, batch, step), the running sums behind the logged metrics, the
//! dropout stream's position, a fingerprint of the training data, and every metric so far;
//! and the run's clock across resumes.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::metrics::{MetricRecord, TimeSpent};
use crate::training_data::EncodedCorpus;
pub(super) use crate::training_data::Fnv1a;

/// Bumped when the file's meaning changes, so that an old checkpoint is refused by name.
pub const STATE_FORMAT: u32 = 1;

/// Where the loop stands, and the sums its metrics are averaged from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunPosition {
    /// Optimiser steps taken in the whole run.
    pub step: usize,
    /// The epoch in progress, from 1; `epochs + 1` once the run is complete.
    pub epoch: usize,
    /// Optimiser steps already taken in that epoch: the position in its batch order.
    pub steps_in_epoch: usize,
    pub epoch_loss_sum: f64,
    /// Loss and steps since the last metrics.jsonl step record.
    pub log_loss_sum: f64,
    pub log_steps: usize,
    pub tokens_seen: usize,
    /// Training time so far, across resumes.
    pub elapsed_s: f64,
    pub best_bleu: Option<f64>,
    /// For `training.patience`: the best validation loss, the epochs since the validation
    /// score last improved, and whether the run ended early for it.
    #[serde(default)]
    pub best_valid_loss: Option<f64>,
    #[serde(default)]
    pub epochs_without_improvement: usize,
    #[serde(default)]
    pub stopped_early: bool,
    /// Where the run's time went so far, across resumes.
    #[serde(default)]
    pub time: TimeSpent,
}

impl RunPosition {
    /// Where a run that stopped early stopped, for messages: `after epoch 7` at an epoch's
    /// end, `at step 20, in epoch 2` after a validation between epochs.
    pub fn stop_point(&self) -> String {
        match self.steps_in_epoch {
            0 => format!("after epoch {}", self.epoch.saturating_sub(1)),
            _ => format!("at step {}, in epoch {}", self.step, self.epoch),
        }
    }

    /// The start of a run.
    pub fn start() -> Self {
        Self {
            step: 0,
            epoch: 1,
            steps_in_epoch: 0,
            epoch_loss_sum: 0.0,
            log_loss_sum: 0.0,
            log_steps: 0,
            tokens_seen: 0,
            elapsed_s: 0.0,
            best_bleu: None,
            best_valid_loss: None,
            epochs_without_improvement: 0,
            stopped_early: false,
            time: TimeSpent::default(),
        }
    }
}

/// Identifies the encoded training pairs, so that a resume on different data is refused
/// rather than silently continuing at a meaningless position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataFingerprint {
    pub pairs: usize,
    /// FNV-1a (64-bit, hex) over every source and target id.
    pub hash: String,
}

impl DataFingerprint {
    pub fn of(corpus: &EncodedCorpus) -> Self {
        Self {
            pairs: corpus.len(),
            hash: format!("{:016x}", corpus.id_hash()),
        }
    }
}

/// `training_state.json` in a `last/` checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingState {
    pub format: u32,
    pub position: RunPosition,
    /// Adam's update count (its bias corrections depend on it).
    pub adam_steps: usize,
    pub dropout_seed: u64,
    /// 32-bit words drawn from the dropout stream; a string because JSON numbers lose
    /// integers above 2^53.
    pub dropout_words: String,
    pub data: DataFingerprint,
    /// How many ranks trained it (1 without `mpirun`; states written before data
    /// parallelism have none).
    #[serde(default = "one_process")]
    pub world: usize,
    pub metrics: Vec<MetricRecord>,
}

fn one_process() -> usize {
    1
}

/// Training time across resumes: what earlier sessions took plus this one's wall clock.
pub(super) struct RunClock {
    before: f64,
    started: Instant,
}

impl RunClock {
    pub(super) fn new(before: f64) -> Self {
        Self {
            before,
            started: Instant::now(),
        }
    }

    pub(super) fn elapsed_s(&self) -> f64 {
        self.before + self.started.elapsed().as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::training_data::{EncodedPair, IdWidth};

    fn pair(src: &[u32], tgt: &[u32]) -> EncodedPair {
        EncodedPair {
            src: src.to_vec(),
            tgt: tgt.to_vec(),
        }
    }

    fn of(pairs: &[EncodedPair]) -> DataFingerprint {
        DataFingerprint::of(&EncodedCorpus::from_pairs(pairs, IdWidth::U16))
    }

    #[test]
    fn the_fingerprint_sees_order_and_the_boundary_between_source_and_target() {
        let a = of(&[pair(&[1, 2], &[3]), pair(&[4], &[5])]);
        let swapped = of(&[pair(&[4], &[5]), pair(&[1, 2], &[3])]);
        let moved = of(&[pair(&[1], &[2, 3]), pair(&[4], &[5])]);
        assert_eq!(a, of(&[pair(&[1, 2], &[3]), pair(&[4], &[5])]));
        assert_ne!(a.hash, swapped.hash);
        assert_ne!(a.hash, moved.hash);
    }
}
