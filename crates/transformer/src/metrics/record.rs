//! A training run's history of metrics, one record per line of its metrics.jsonl: the loss,
//! rate and speed every `log_every` steps, each epoch's training and validation scores, the
//! validations between epochs (`training.validate_every_steps`), and where the run's time
//! went. The training loop writes them, the run directory keeps them, `loss.png` draws them.

use serde::{Deserialize, Serialize};

use super::time_spent::TimeSpent;

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
        /// Where the run's time went up to the end of this epoch (and its validation).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        time: Option<TimeSpent>,
    },
    /// A validation between epochs, every `training.validate_every_steps` steps.
    Validation {
        step: usize,
        epoch: usize,
        valid_loss: f64,
        #[serde(skip_serializing_if = "Option::is_none")]
        valid_bleu: Option<f64>,
        #[serde(serialize_with = "hundredths")]
        elapsed_s: f64,
    },
    /// The run's last line, once it ends (finished, stopped or interrupted): where its whole
    /// time went, start-up and averaging included.
    Run { step: usize, time: TimeSpent },
}

/// Wall-clock figures to 0.01: their further digits are timing noise.
fn hundredths<S: serde::Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64((value * 100.0).round() / 100.0)
}
