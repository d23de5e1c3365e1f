//! Where a training run's wall time went: its steps, and everything around them (building
//! batches, validation, checkpoints, averaging, start-up). Summed across resumed sessions as
//! the run's clock is, written with every epoch's metrics.jsonl record and the run's last, and
//! told in the summary line, so that time outside the steps is seen rather than guessed.

use serde::{Deserialize, Serialize};

/// Seconds spent in each part of a run. The parts do not overlap; `wall_s` is the run's
/// whole time, and what the parts leave of it is the loop's own bookkeeping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TimeSpent {
    /// Reading the corpora, tokenizers, building the model (or restoring a checkpoint).
    #[serde(serialize_with = "thousandths")]
    pub start_s: f64,
    /// Forward, backward and the optimiser's update, up to reading the step's loss.
    #[serde(serialize_with = "thousandths")]
    pub steps_s: f64,
    /// Waiting for the next step's batches (cut from the corpus ahead, on a thread).
    #[serde(serialize_with = "thousandths")]
    pub batching_s: f64,
    /// The validation loss.
    #[serde(serialize_with = "thousandths")]
    pub validation_loss_s: f64,
    /// Translating the validation sources and scoring them (BLEU).
    #[serde(serialize_with = "thousandths")]
    pub validation_decoding_s: f64,
    /// Writing checkpoints, metrics.jsonl and loss.png.
    #[serde(serialize_with = "thousandths")]
    pub checkpoints_s: f64,
    /// `training.average_last` at the end of the run.
    #[serde(serialize_with = "thousandths")]
    pub averaging_s: f64,
    /// The whole run, start-up to the end of averaging.
    #[serde(serialize_with = "thousandths")]
    pub wall_s: f64,
}

/// One part of [`TimeSpent`], for [`TimeSpent::add`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunPart {
    Start,
    Steps,
    Batching,
    ValidationLoss,
    ValidationDecoding,
    Checkpoints,
    Averaging,
}

impl TimeSpent {
    /// Adds `seconds` to `part`.
    pub fn add(&mut self, part: RunPart, seconds: f64) {
        *self.part_mut(part) += seconds;
    }

    pub fn part(&self, part: RunPart) -> f64 {
        match part {
            RunPart::Start => self.start_s,
            RunPart::Steps => self.steps_s,
            RunPart::Batching => self.batching_s,
            RunPart::ValidationLoss => self.validation_loss_s,
            RunPart::ValidationDecoding => self.validation_decoding_s,
            RunPart::Checkpoints => self.checkpoints_s,
            RunPart::Averaging => self.averaging_s,
        }
    }

    fn part_mut(&mut self, part: RunPart) -> &mut f64 {
        match part {
            RunPart::Start => &mut self.start_s,
            RunPart::Steps => &mut self.steps_s,
            RunPart::Batching => &mut self.batching_s,
            RunPart::ValidationLoss => &mut self.validation_loss_s,
            RunPart::ValidationDecoding => &mut self.validation_decoding_s,
            RunPart::Checkpoints => &mut self.checkpoints_s,
            RunPart::Averaging => &mut self.averaging_s,
        }
    }

    /// Seconds outside the training steps: the whole run less its steps.
    pub fn outside_steps_s(&self) -> f64 {
        (self.wall_s - self.steps_s).max(0.0)
    }

    /// The time since `earlier` (this run's figures at an earlier moment): one session's.
    pub fn since(&self, earlier: &TimeSpent) -> TimeSpent {
        let mut session = TimeSpent {
            wall_s: self.wall_s - earlier.wall_s,
            ..TimeSpent::default()
        };
        for part in RunPart::ALL {
            session.add(part, self.part(part) - earlier.part(part));
        }
        session
    }

    /// One line for the run's summary: seconds and shares of the wall time, largest first,
    /// e.g. `steps 41.2 s (93.0%), validation decoding 2.1 s (4.7%), ...`.
    pub fn summary(&self) -> String {
        let wall = self.wall_s.max(1e-9);
        let mut parts: Vec<(&str, f64)> = RunPart::ALL
            .iter()
            .map(|&part| (part.name(), self.part(part)))
            .collect();
        let accounted: f64 = parts.iter().map(|(_, s)| s).sum();
        parts.push(("other", (self.wall_s - accounted).max(0.0)));
        parts.sort_by(|a, b| b.1.total_cmp(&a.1));
        parts
            .iter()
            .map(|(name, s)| format!("{name} {s:.1} s ({:.1}%)", 100.0 * s / wall))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl RunPart {
    pub const ALL: [RunPart; 7] = [
        RunPart::Start,
        RunPart::Steps,
        RunPart::Batching,
        RunPart::ValidationLoss,
        RunPart::ValidationDecoding,
        RunPart::Checkpoints,
        RunPart::Averaging,
    ];

    /// As the summary line names it.
    pub fn name(self) -> &'static str {
        match self {
            RunPart::Start => "start-up",
            RunPart::Steps => "steps",
            RunPart::Batching => "batching",
            RunPart::ValidationLoss => "validation loss",
            RunPart::ValidationDecoding => "validation decoding",
            RunPart::Checkpoints => "checkpoints",
            RunPart::Averaging => "averaging",
        }
    }
}

/// Seconds to 0.001: a tiny run's parts are milliseconds, and their further digits are noise.
fn thousandths<S: serde::Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64((value * 1000.0).round() / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_every_part_with_its_share_and_what_is_left_over() {
        let mut time = TimeSpent {
            wall_s: 10.0,
            ..TimeSpent::default()
        };
        time.add(RunPart::Steps, 8.0);
        time.add(RunPart::ValidationDecoding, 1.0);
        time.add(RunPart::Checkpoints, 0.5);
        let line = time.summary();
        assert!(
            line.starts_with("steps 8.0 s (80.0%), validation decoding 1.0 s (10.0%)"),
            "{line}"
        );
        assert!(line.contains("other 0.5 s (5.0%)"), "{line}");
        assert!(line.contains("averaging 0.0 s (0.0%)"), "{line}");
        assert_eq!(time.outside_steps_s(), 2.0);
    }

    #[test]
    fn a_session_is_the_difference_of_the_run_at_its_end_and_its_start() {
        let mut before = TimeSpent {
            wall_s: 5.0,
            ..TimeSpent::default()
        };
        before.add(RunPart::Steps, 4.0);
        let mut after = before;
        after.wall_s = 12.0;
        after.add(RunPart::Steps, 6.0);
        after.add(RunPart::Start, 0.5);
        let session = after.since(&before);
        assert_eq!(session.wall_s, 7.0);
        assert_eq!(session.steps_s, 6.0);
        assert_eq!(session.start_s, 0.5);
    }

    #[test]
    fn a_record_without_times_reads_as_zeros_and_written_ones_round_to_milliseconds() {
        let time: TimeSpent = serde_json::from_str("{}").unwrap();
        assert_eq!(time, TimeSpent::default());
        let written = serde_json::to_string(&TimeSpent {
            steps_s: 1.23456,
            ..TimeSpent::default()
        })
        .unwrap();
        assert!(written.contains("\"steps_s\":1.235"), "{written}");
    }
}
