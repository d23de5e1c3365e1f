//! The training loop: token-budget batches -> forward -> label-smoothed loss -> backward
//! (accumulated over `accumulate` batches, clipped) -> Adam with the Noam rate; validation
//! loss and BLEU after each epoch; checkpoints handed to an observer. The loop's whole state
//! (weights, Adam's moments, its position, the dropout stream) can be saved and restored, so
//! that a resumed run takes exactly the steps the uninterrupted one would have. One
//! optimiser step lives in `trainer/step.rs`, saving and restoring in `trainer/resume.rs`.

use candle_core::{Device, Tensor};

use super::data::TrainingData;
use super::data_parallel::{agreed_stop, check_weights_agree};
use super::events::{CheckpointKind, StepReport, StopReason};
use super::loss::LabelSmoothing;
use super::optimizer::{Adam, AdamSettings};
use super::outcome::{finite_loss, RunOutcome};
use super::precision::Precision;
use super::state::{DataFingerprint, RunClock, RunPosition};
use crate::config::Config;
use crate::distributed::{Collective, SingleProcess};
use crate::infer::settings::DecodeOptions;
use crate::infer::settings::{self, DecodeBounds, Layer};
use crate::infer::Inference;
use crate::metrics::MetricRecord;
use crate::model::{DropoutRng, Model, TrainedWeights};
use crate::tokenize::SpecialIds;
use crate::training_data::{EpochPlan, PaddedBatch};

mod frozen_row;
pub mod resume;
mod step;
mod validation;

use frozen_row::FrozenRow;

/// Receives progress and decides what a checkpoint means (the loop never touches files).
pub trait TrainObserver {
    fn on_step(&mut self, report: &StepReport);
    /// After each epoch's validation; `metrics` is every record so far.
    fn on_epoch(&mut self, record: &MetricRecord, metrics: &[MetricRecord]) -> anyhow::Result<()>;
    fn on_checkpoint(&mut self, trainer: &Trainer, kind: CheckpointKind) -> anyhow::Result<()>;
    /// Asked after every step and epoch; `Some` ends the run after a `Last` checkpoint.
    fn stop_requested(&self) -> Option<StopReason>;
}

/// A model being trained, with its optimiser state and its metrics so far.
pub struct Trainer {
    config: Config,
    data: TrainingData,
    device: Device,
    weights: TrainedWeights,
    optimizer: Adam,
    criterion: LabelSmoothing,
    /// The vocabularies' special ids: how pairs are framed, padded and masked.
    specials: SpecialIds,
    /// The embedding tables' rows that never train, with their masks: a MarianMT model's
    /// `<pad>` row (transformers' `padding_idx`), which starts the decoder.
    frozen_rows: Vec<FrozenRow>,
    dropout_rng: DropoutRng,
    position: RunPosition,
    metrics: Vec<MetricRecord>,
    /// Of `data.pairs`, which never change during a run.
    fingerprint: DataFingerprint,
    total_steps: usize,
    /// The ranks this one trains with (itself alone without `mpirun`).
    collective: Box<dyn Collective>,
    /// Seconds this session spent summing gradients over the ranks (waiting for the slowest
    /// included), for the benchmark.
    collective_seconds: f64,
    /// `[decode]`, resolved and checked against the model: how validation translates.
    decode: DecodeOptions,
    /// What a step computes in (`training.dtype` on this device).
    precision: Precision,
}

impl Trainer {
    /// A freshly initialised model for `data`, seeded from the config.
    pub fn new(config: Config, data: TrainingData, device: &Device) -> anyhow::Result<Self> {
        Self::joined(config, data, device, Box::new(SingleProcess))
    }

    /// As `new`, as one rank of `collective`: every rank starts from the same weights (the
    /// same seed), and each step's batches are shared out (see `data_parallel`).
    pub fn joined(
        config: Config,
        data: TrainingData,
        device: &Device,
        collective: Box<dyn Collective>,
    ) -> anyhow::Result<Self> {
        let vocab = data.tokenizers.vocab_sizes();
        crate::model::memory::refuse_if_too_large_to_train(
            &config.model,
            vocab,
            config.training.max_tokens.min(data.largest_batch_tokens()),
            device,
        )
        .map_err(anyhow::Error::msg)?;
        let specials = data.tokenizers.specials();
        let seed = config.training.seed;
        let precision = Precision::plan(config.training.dtype, device)?;
        let bounds = DecodeBounds {
            target_vocab: vocab.tgt,
            max_positions: config.model.max_len,
            door_beam: None,
            length_normalization: config.decode.length_normalization,
            end_at_max_len: config.decode.end_at_max_len,
            renormalize: config.decode.renormalize,
            length_ratio: config.decode.length_ratio_or_default() as f32,
        };
        let origin = match config.source_name.as_str() {
            "" => "the config",
            name => name,
        };
        let decode = settings::resolve(&[Layer::config(&config.decode, origin)], &bounds)
            .map_err(anyhow::Error::msg)?;
        let weights = TrainedWeights::fresh(&config.model, vocab, seed, device)?;
        let t = &config.training;
        let settings = AdamSettings {
            beta1: t.adam_beta1,
            beta2: t.adam_beta2,
            eps: t.adam_eps,
        };
        let optimizer = Adam::new(weights.vars().to_vec(), settings)?;
        let frozen_rows = FrozenRow::padding_rows(&weights, &specials, device)?;
        // A model trained from scratch starts that row at zero too (the decoder's first input
        // then is the zero vector, as in transformers); init_from's weights replace it.
        for row in &frozen_rows {
            row.clear(&weights)?;
        }
        let batches_per_epoch = EpochPlan::new(&data.pairs, t.max_tokens, (t.seed, 0)).len();
        let group = t.accumulate * collective.world();
        // Dropout draws from its own stream so that changing the init does not shift it; the
        // ranks of a distributed run each draw their own masks.
        let dropout_seed = seed.wrapping_add(1);
        let dropout_rng = match collective.world() {
            1 => DropoutRng::new(dropout_seed),
            _ => DropoutRng::for_rank(dropout_seed, collective.rank()),
        };
        Ok(Self {
            precision,
            total_steps: t.epochs * batches_per_epoch.div_ceil(group),
            fingerprint: DataFingerprint::of(&data.pairs),
            criterion: LabelSmoothing::new(vocab.tgt, specials.pad, t.label_smoothing),
            specials,
            frozen_rows,
            dropout_rng,
            collective,
            collective_seconds: 0.0,
            decode,
            config,
            data,
            device: device.clone(),
            weights,
            optimizer,
            position: RunPosition::start(),
            metrics: Vec::new(),
        })
    }

    /// Starts from `weights` (a checkpoint's, by the model's tensor names) instead of the
    /// fresh ones: `training.init_from`, before the first step.
    pub fn start_from(
        &mut self,
        weights: &std::collections::HashMap<String, Tensor>,
    ) -> anyhow::Result<()> {
        Ok(self.weights.load(weights)?)
    }

    /// The validation loss and BLEU of the weights as they are (no step taken): what a run
    /// started from a checkpoint's weights begins with; none without validation data.
    pub fn validate(&self) -> anyhow::Result<Option<(f64, Option<f64>)>> {
        let Some(valid) = &self.data.valid else {
            return Ok(None);
        };
        Ok(Some((
            self.validation_loss(&valid.pairs)?,
            self.validation_bleu(valid)?,
        )))
    }

    /// Optimiser steps in the whole run.
    pub fn total_steps(&self) -> usize {
        self.total_steps
    }

    /// Trains from the current position to the end of the configured epochs: a `Last`
    /// checkpoint every `checkpoint_every` steps and at the end, a `Best` one whenever
    /// validation BLEU improves. Stops early, after a `Last` checkpoint, when the observer
    /// asks to.
    pub fn run(&mut self, observer: &mut dyn TrainObserver) -> anyhow::Result<RunOutcome> {
        let t = self.config.training.clone();
        let total_steps = self.total_steps();
        let clock = RunClock::new(self.position.elapsed_s);
        while self.position.epoch <= t.epochs {
            let epoch = self.position.epoch;
            // The epoch's batches are cut from the corpus one step's group at a time, so that
            // memory holds one group whatever the corpus's size.
            let plan = EpochPlan::new(&self.data.pairs, t.max_tokens, (t.seed, epoch - 1));
            let group_size = t.accumulate * self.collective.world();
            let groups = plan.len().div_ceil(group_size);
            while self.position.steps_in_epoch < groups {
                let first = self.position.steps_in_epoch * group_size;
                let group: Vec<PaddedBatch> = (first..(first + group_size).min(plan.len()))
                    .map(|i| {
                        let pairs = plan.batch_pairs(i);
                        PaddedBatch::from_corpus(&self.data.pairs, pairs, self.specials.pad)
                    })
                    .collect();
                let report = self.train_step(&group, total_steps, &clock)?;
                observer.on_step(&report);
                if self.position.step.is_multiple_of(t.checkpoint_every) {
                    self.check_ranks_agree()?;
                    observer.on_checkpoint(self, CheckpointKind::Last)?;
                }
                if let Some(reason) = agreed_stop(&*self.collective, observer.stop_requested())? {
                    if !self.position.step.is_multiple_of(t.checkpoint_every) {
                        observer.on_checkpoint(self, CheckpointKind::Last)?;
                    }
                    return Ok(RunOutcome::Stopped(reason));
                }
            }
            self.end_epoch(&clock, observer)?;
            if let Some(patience) = t.patience {
                if self.position.epochs_without_improvement >= patience {
                    self.position.stopped_early = true;
                    observer.on_checkpoint(self, CheckpointKind::Last)?;
                    let epoch = self.position.epoch - 1;
                    return Ok(RunOutcome::StoppedEarly { epoch, patience });
                }
            }
            if let Some(reason) = agreed_stop(&*self.collective, observer.stop_requested())? {
                observer.on_checkpoint(self, CheckpointKind::Last)?;
                return Ok(RunOutcome::Stopped(reason));
            }
        }
        observer.on_checkpoint(self, CheckpointKind::Last)?;
        Ok(RunOutcome::Finished)
    }

    /// Under `mpirun`: fails unless every rank holds the same weights.
    fn check_ranks_agree(&self) -> anyhow::Result<()> {
        if self.collective.world() == 1 {
            return Ok(());
        }
        check_weights_agree(&*self.collective, self.weights.vars(), self.position.step)
    }

    /// Validation, the epoch's metrics line, a `Best` checkpoint when BLEU improved, and the
    /// position moved to the next epoch.
    fn end_epoch(
        &mut self,
        clock: &RunClock,
        observer: &mut dyn TrainObserver,
    ) -> anyhow::Result<()> {
        let (valid_loss, valid_bleu) = match &self.data.valid {
            Some(valid) => (
                // Weights that overflowed in the last step show here first: stop as a diverged
                // training loss stops, before decoding them.
                Some(finite_loss(
                    self.position.step,
                    self.validation_loss(&valid.pairs)?,
                )?),
                self.validation_bleu(valid)?,
            ),
            None => (None, None),
        };
        let p = &mut self.position;
        p.elapsed_s = clock.elapsed_s();
        let record = MetricRecord::Epoch {
            step: p.step,
            epoch: p.epoch,
            train_loss: p.epoch_loss_sum / p.steps_in_epoch.max(1) as f64,
            valid_loss,
            valid_bleu,
            elapsed_s: p.elapsed_s,
        };
        let improved = valid_bleu.filter(|&bleu| p.best_bleu.is_none_or(|best| bleu > best));
        if improved.is_some() {
            p.best_bleu = improved;
        }
        let lower = valid_loss.filter(|&loss| p.best_valid_loss.is_none_or(|best| loss < best));
        if lower.is_some() {
            p.best_valid_loss = lower;
        }
        // BLEU judges an epoch where there is one (a translation model), else the loss.
        let better = match valid_bleu {
            Some(_) => improved.is_some(),
            None => lower.is_some(),
        };
        if valid_loss.is_some() {
            p.epochs_without_improvement = if better {
                0
            } else {
                p.epochs_without_improvement + 1
            };
        }
        (p.epoch, p.steps_in_epoch, p.epoch_loss_sum) = (p.epoch + 1, 0, 0.0);
        self.metrics.push(record.clone());
        observer.on_epoch(&record, &self.metrics)?;
        if improved.is_some() {
            observer.on_checkpoint(self, CheckpointKind::Best)?;
        }
        Ok(())
    }

    /// The translator or text generator over the model as it is now.
    pub fn inference(&self, options: DecodeOptions) -> Inference<'_> {
        self.inference_over(self.weights.model(), options)
    }

    fn inference_over<'a>(&'a self, model: &'a Model, options: DecodeOptions) -> Inference<'a> {
        Inference::of(model, &self.data.tokenizers, &self.device, options)
    }

    /// How validation translates: the config's `[decode]`, resolved.
    pub fn decode_options(&self) -> DecodeOptions {
        self.decode
    }

    pub fn model(&self) -> &Model {
        self.weights.model()
    }

    /// What a step computes in, as planned for this device.
    pub fn precision(&self) -> super::precision::Precision {
        self.precision
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn data(&self) -> &TrainingData {
        &self.data
    }

    pub fn step(&self) -> usize {
        self.position.step
    }

    /// Where the loop stands.
    pub fn position(&self) -> &RunPosition {
        &self.position
    }

    /// The ranks this one trains with.
    pub fn collective(&self) -> &dyn Collective {
        &*self.collective
    }

    /// Seconds spent summing gradients over the ranks so far in this session.
    pub fn collective_seconds(&self) -> f64 {
        self.collective_seconds
    }

    pub fn metrics(&self) -> &[MetricRecord] {
        &self.metrics
    }

    /// Every tensor of the model under its state_dict name: parameters and position tables.
    pub fn named_tensors(&self) -> Vec<(String, Tensor)> {
        self.weights.named_tensors()
    }
}
