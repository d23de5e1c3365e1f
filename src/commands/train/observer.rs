//! The observer `transformer train` gives the loop: it shows progress, writes the run
//! directory (last/, best/, the kept checkpoints, metrics.jsonl and loss.png) whenever the
//! loop asks for a checkpoint, and passes on requests to stop (a signal, `--stop-at-step`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Progress, ProgressEar};
use crate::checkpoint::{self, history, CheckpointContents, BEST_DIR, LAST_DIR, LOSS_PLOT_FILE};
use crate::metrics::MetricRecord;
use crate::plot;
use crate::progress::TrainProgress;
use crate::stop_signals::StopSignals;
use crate::train::{self, CheckpointKind, StepReport, StopReason, TrainObserver, Trainer};

/// Shows progress, writes the run directory whenever the loop asks for a checkpoint, and
/// passes on requests to stop.
pub(super) struct CheckpointingObserver {
    pub(super) progress: TrainProgress,
    pub(super) run_dir: PathBuf,
    pub(super) stop: StopSource,
    /// The caller's ear for each step and record, if it has one.
    pub(super) told: Option<ProgressEar>,
    pub(super) stop_at_step: Option<usize>,
    /// The step the loop last reported.
    pub(super) step: usize,
    /// The step of the last `Last` checkpoint this session wrote (rank 0 of a distributed
    /// run wrote, for the others).
    pub(super) saved_step: Option<usize>,
    /// Rank 0 (or a single process): the one that writes the run directory.
    pub(super) lead: bool,
    /// When loss.png was last drawn.
    pub(super) plotted: Option<Instant>,
}

/// Where a request to stop comes from.
pub(crate) enum StopSource {
    /// SIGINT or SIGTERM, as the command listens for them.
    Signals(StopSignals),
    /// A caller's flag: 0 until it asks, then the signal it stands for.
    Flag(Arc<AtomicI32>),
}

impl StopSource {
    fn received(&self) -> Option<i32> {
        match self {
            Self::Signals(signals) => signals.received(),
            Self::Flag(flag) => match flag.load(Ordering::SeqCst) {
                0 => None,
                signal => Some(signal),
            },
        }
    }
}

/// Least time between two drawings of loss.png after epochs: drawing it takes some 20 ms,
/// which a run of short epochs (the toy's, of one step) would spend after every one.
const PLOT_EVERY: Duration = Duration::from_secs(10);

impl CheckpointingObserver {
    /// metrics.jsonl, and loss.png redrawn from all records so far when `plot` says so or it
    /// was drawn more than [`PLOT_EVERY`] ago.
    fn write_metrics(&mut self, metrics: &[MetricRecord], plot: bool) -> anyhow::Result<()> {
        checkpoint::save_metrics(&self.run_dir, metrics)?;
        if !plot && self.plotted.is_some_and(|at| at.elapsed() < PLOT_EVERY) {
            return Ok(());
        }
        self.plotted = Some(Instant::now());
        // A picture that cannot be drawn is no reason to stop training.
        let plot_path = self.run_dir.join(LOSS_PLOT_FILE);
        if let Err(e) = plot::write_training_curves(metrics, &plot_path) {
            self.progress.note(&format!("warning: {e:#}"));
        }
        Ok(())
    }
}

impl TrainObserver for CheckpointingObserver {
    fn on_step(&mut self, report: &StepReport) {
        self.step = report.step;
        self.progress.update(report);
        if let Some(told) = &mut self.told {
            told(Progress::Step(report));
        }
    }

    fn stop_requested(&self) -> Option<StopReason> {
        if let Some(signal) = self.stop.received() {
            return Some(StopReason::Signal(signal));
        }
        self.stop_at_step
            .filter(|&limit| self.step >= limit)
            .map(|_| StopReason::StepLimit)
    }

    fn on_epoch(&mut self, record: &MetricRecord, metrics: &[MetricRecord]) -> anyhow::Result<()> {
        if let Some(told) = &mut self.told {
            told(Progress::Record(record));
        }
        if !self.lead {
            return Ok(());
        }
        if let MetricRecord::Epoch {
            epoch,
            train_loss,
            valid_loss,
            valid_bleu,
            ..
        } = record
        {
            let mut line = format!("epoch {epoch}: train loss {train_loss:.4}");
            if let (Some(loss), Some(bleu)) = (valid_loss, valid_bleu) {
                line.push_str(&format!(", valid loss {loss:.4}, valid BLEU {bleu:.2}"));
            }
            self.progress.note(&line);
        }
        self.write_metrics(metrics, false)
    }

    fn on_checkpoint(&mut self, trainer: &Trainer, kind: CheckpointKind) -> anyhow::Result<()> {
        if !self.lead {
            if kind == CheckpointKind::Last {
                self.saved_step = Some(trainer.step());
            }
            return Ok(());
        }
        let tensors = trainer.named_tensors();
        // Weights an update overflowed are no checkpoint: the one before stays.
        train::finite_weights(trainer.step(), &tensors)?;
        let resume_files = match kind {
            CheckpointKind::Last => Some(trainer.resume_files()?),
            CheckpointKind::Best => None,
        };
        let dir = self.run_dir.join(match kind {
            CheckpointKind::Last => LAST_DIR,
            CheckpointKind::Best => BEST_DIR,
        });
        let contents = CheckpointContents {
            config: trainer.config(),
            tokenizers: &trainer.data().tokenizers,
            tensors: &tensors,
            resume: resume_files
                .as_ref()
                .map(|(moments, state)| (moments.as_slice(), state)),
        };
        // The kept copy first: a kill between the two leaves last/ at the step before, which
        // a resumed run takes again and keeps again; the other way round, the resumed run
        // would go on from a step whose kept copy never came, and average without it.
        let keep_last = trainer.config().training.keep_last;
        if kind == CheckpointKind::Last && keep_last > 0 {
            let weights_only = CheckpointContents {
                resume: None,
                ..contents
            };
            history::keep(&self.run_dir, trainer.step(), &weights_only, keep_last)?;
        }
        checkpoint::save(&dir, &contents)?;
        if kind == CheckpointKind::Last {
            self.saved_step = Some(trainer.step());
        }
        self.write_metrics(trainer.metrics(), true)?;
        if kind == CheckpointKind::Best {
            self.progress.note(&format!(
                "step {}: new best checkpoint in {}",
                trainer.step(),
                dir.display()
            ));
        }
        Ok(())
    }
}
