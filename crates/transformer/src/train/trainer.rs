//! The training loop: token-budget batches -> forward -> label-smoothed loss -> backward
//! (accumulated over `accumulate` batches, clipped) -> Adam with the Noam rate; validation
//! loss and BLEU after each epoch; checkpoints handed to an observer. The loop's whole state
//! (weights, Adam's moments, its position, the dropout stream) can be saved and restored, so
//! that a resumed run takes exactly the steps the uninterrupted one would have. Saving
//! and restoring lives in `trainer/resume.rs`.

use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor};

use super::batch_feed::{BatchFeed, FeedPlan};
use super::clip::clip_grad_norm;
use super::data::TrainingData;
use super::data_parallel::{agreed_stop, check_weights_agree, share, sum_over_ranks};
use super::events::{CheckpointKind, StepReport, StopReason};
use super::loss::LabelSmoothing;
use super::optimizer::{Adam, AdamSettings};
use super::outcome::{finite_loss, RunOutcome};
use super::precision::Precision;
use super::schedule::rate_of_step;
use super::state::{DataFingerprint, RunClock, RunPosition};
use crate::config::Config;
use crate::distributed::{Collective, SingleProcess};
use crate::infer::settings::{DecodeRequest, DecodeSettings};
use crate::infer::Inference;
use crate::metrics::{MetricRecord, RunPart, TimeSpent};
use crate::model::{DropoutRng, Mode, Model, TeacherForced, TrainedWeights};
use crate::tokenize::SpecialIds;
use crate::training_data::{EpochPlan, PaddedBatch};

pub mod resume;
mod validation;

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
    decode: DecodeSettings,
    /// What a step computes in (`training.dtype` on this device).
    precision: Precision,
}

impl Trainer {
    /// A freshly initialised model for `data`, seeded from the config.
    pub fn new(config: Config, data: TrainingData, device: &Device) -> anyhow::Result<Self> {
        Self::joined(config, data, device, Box::new(SingleProcess))
    }

    /// As `new`, as one rank of `collective`: every rank starts from the same weights (the
    /// same seed), and each step's batches are shared out (see `data_parallel`). A config
    /// that sets no `decode.length_ratio` gets the training data's, which marks a translation
    /// short.
    pub fn joined(
        mut config: Config,
        data: TrainingData,
        device: &Device,
        collective: Box<dyn Collective>,
    ) -> anyhow::Result<Self> {
        if config.decode.length_ratio.is_none() {
            // What marks a translation short, measured on what the model learns from.
            config.decode.length_ratio = data.length_ratio();
        }
        let vocab = data.tokenizers.vocab_sizes();
        crate::model::footprint::refuse_if_too_large_to_train(
            &config.model,
            vocab,
            config.training.max_tokens.min(data.largest_batch_tokens()),
            device,
        )
        .map_err(anyhow::Error::msg)?;
        let specials = data.tokenizers.specials();
        let seed = config.training.seed;
        let precision = Precision::plan(config.training.dtype, device)?;
        let origin = match config.source_name.as_str() {
            "" => "the config",
            name => name,
        };
        let decode = DecodeSettings::settle(
            &config.decode,
            vec![DecodeRequest::of_config(&config.decode, origin)],
            vocab.tgt,
            config.model.max_len,
            None,
        )
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
    /// asks to. Each epoch's batches are built ahead on a thread ([`BatchFeed`]), and where
    /// the time went is kept in the position ([`TimeSpent`]).
    pub fn run(&mut self, observer: &mut dyn TrainObserver) -> anyhow::Result<RunOutcome> {
        let t = self.config.training.clone();
        let total_steps = self.total_steps();
        let clock = RunClock::new(self.position.elapsed_s);
        let wall = RunClock::new(self.position.time.wall_s);
        while self.position.epoch <= t.epochs {
            let epoch = self.position.epoch;
            // The epoch's batches are cut from the corpus one step's group at a time, so that
            // memory holds one group whatever the corpus's size.
            let mut feed = self.timed(RunPart::Batching, |trainer| {
                BatchFeed::start(
                    trainer.data.pairs.clone(),
                    FeedPlan {
                        max_tokens: t.max_tokens,
                        seed_and_epoch: (t.seed, epoch - 1),
                        group_size: t.accumulate * trainer.collective.world(),
                        first_group: trainer.position.steps_in_epoch,
                        pad: trainer.specials.pad,
                    },
                )
            })?;
            while let Some(group) = self.timed(RunPart::Batching, |_| feed.next_group()) {
                let report = self.timed(RunPart::Steps, |trainer| {
                    trainer.train_step(&group, total_steps, &clock)
                })?;
                observer.on_step(&report);
                let step = self.position.step;
                if t.validate_every_steps
                    .is_some_and(|n| step.is_multiple_of(n))
                {
                    self.validate_between_epochs(&clock, &wall, observer)?;
                }
                if step.is_multiple_of(t.checkpoint_every) {
                    self.check_ranks_agree()?;
                    self.checkpoint(observer, CheckpointKind::Last, &wall)?;
                }
                if let Some(outcome) = self.out_of_patience(observer, &wall)? {
                    return Ok(outcome);
                }
                if let Some(reason) = agreed_stop(&*self.collective, observer.stop_requested())? {
                    if !step.is_multiple_of(t.checkpoint_every) {
                        self.checkpoint(observer, CheckpointKind::Last, &wall)?;
                    }
                    return Ok(RunOutcome::Stopped(reason));
                }
            }
            drop(feed);
            self.end_epoch(&clock, &wall, observer)?;
            if let Some(outcome) = self.out_of_patience(observer, &wall)? {
                return Ok(outcome);
            }
            if let Some(reason) = agreed_stop(&*self.collective, observer.stop_requested())? {
                self.checkpoint(observer, CheckpointKind::Last, &wall)?;
                return Ok(RunOutcome::Stopped(reason));
            }
        }
        self.checkpoint(observer, CheckpointKind::Last, &wall)?;
        Ok(RunOutcome::Finished)
    }

    /// `training.patience` validations in a row without a better score: the run ends, after
    /// a `Last` checkpoint.
    fn out_of_patience(
        &mut self,
        observer: &mut dyn TrainObserver,
        wall: &RunClock,
    ) -> anyhow::Result<Option<RunOutcome>> {
        let Some(patience) = self.config.training.patience else {
            return Ok(None);
        };
        if self.position.epochs_without_improvement < patience || self.position.stopped_early {
            return Ok(None);
        }
        self.position.stopped_early = true;
        self.checkpoint(observer, CheckpointKind::Last, wall)?;
        // The epoch that ended last, or the one in progress when a validation between
        // epochs ran out of patience.
        let epoch = match self.position.steps_in_epoch {
            0 => self.position.epoch - 1,
            _ => self.position.epoch,
        };
        Ok(Some(RunOutcome::StoppedEarly { epoch, patience }))
    }

    /// Asks `observer` for a checkpoint, the time it takes counted as the checkpoints'.
    fn checkpoint(
        &mut self,
        observer: &mut dyn TrainObserver,
        kind: CheckpointKind,
        wall: &RunClock,
    ) -> anyhow::Result<()> {
        self.position.time.wall_s = wall.elapsed_s();
        self.timed(RunPart::Checkpoints, |trainer| {
            observer.on_checkpoint(trainer, kind)
        })
    }

    /// Runs `work` on the trainer, adding its time to `part`.
    fn timed<T>(&mut self, part: RunPart, work: impl FnOnce(&mut Self) -> T) -> T {
        let started = Instant::now();
        let result = work(self);
        self.position
            .time
            .add(part, started.elapsed().as_secs_f64());
        result
    }

    /// Adds `seconds` spent outside the loop (start-up, averaging) to the run's time.
    pub fn count_time(&mut self, part: RunPart, seconds: f64) {
        self.position.time.add(part, seconds);
        self.position.time.wall_s += seconds;
    }

    /// Takes over `record`, the last of a stopped session's metrics.jsonl, when it is that
    /// session's time record at this position's step: its figures (which include the writing
    /// of the checkpoint resumed from) become the run's so far, and the record is kept.
    pub fn continue_time_from(&mut self, record: MetricRecord) {
        if let MetricRecord::Run { step, time } = record {
            if step == self.position.step && time.wall_s >= self.position.time.wall_s {
                self.position.time = time;
                self.replace_time_record();
            }
        }
    }

    /// The run's time record, at the end of its metrics, in place of any earlier one.
    fn replace_time_record(&mut self) {
        self.metrics
            .retain(|record| !matches!(record, MetricRecord::Run { .. }));
        self.metrics.push(MetricRecord::Run {
            step: self.position.step,
            time: self.position.time,
        });
    }

    /// Where the run's time went so far, across resumes.
    pub fn time_spent(&self) -> TimeSpent {
        self.position.time
    }

    /// The run's last metrics record: where its whole time went, `wall_s` in all (start-up
    /// to now, across resumes). Replaces one an earlier session of the run left, and returns
    /// every record.
    pub fn record_time(&mut self, wall_s: f64) -> &[MetricRecord] {
        self.position.time.wall_s = wall_s;
        self.replace_time_record();
        &self.metrics
    }

    /// Under `mpirun`: fails unless every rank holds the same weights.
    fn check_ranks_agree(&self) -> anyhow::Result<()> {
        if self.collective.world() == 1 {
            return Ok(());
        }
        check_weights_agree(&*self.collective, self.weights.vars(), self.position.step)
    }

    /// Validation (every `validate_every` epochs, unless one between epochs just ran), the
    /// epoch's metrics line, a `Best` checkpoint when BLEU improved, and the position moved
    /// to the next epoch.
    fn end_epoch(
        &mut self,
        clock: &RunClock,
        wall: &RunClock,
        observer: &mut dyn TrainObserver,
    ) -> anyhow::Result<()> {
        let t = &self.config.training;
        let p = &self.position;
        let due = p.epoch.is_multiple_of(t.validate_every)
            && !t
                .validate_every_steps
                .is_some_and(|n| p.step.is_multiple_of(n));
        let (valid_loss, valid_bleu) = match due {
            true => self.validate_now()?,
            false => (None, None),
        };
        self.position.elapsed_s = clock.elapsed_s();
        self.position.time.wall_s = wall.elapsed_s();
        let improved = self.judge(valid_loss, valid_bleu);
        let p = &mut self.position;
        let record = MetricRecord::Epoch {
            step: p.step,
            epoch: p.epoch,
            train_loss: p.epoch_loss_sum / p.steps_in_epoch.max(1) as f64,
            valid_loss,
            valid_bleu,
            elapsed_s: p.elapsed_s,
            time: Some(p.time),
        };
        (p.epoch, p.steps_in_epoch, p.epoch_loss_sum) = (p.epoch + 1, 0, 0.0);
        self.record(observer, record, improved, wall)
    }

    /// A validation during an epoch (`training.validate_every_steps`), judged as an epoch's.
    fn validate_between_epochs(
        &mut self,
        clock: &RunClock,
        wall: &RunClock,
        observer: &mut dyn TrainObserver,
    ) -> anyhow::Result<()> {
        let (Some(valid_loss), valid_bleu) = self.validate_now()? else {
            return Ok(());
        };
        self.position.elapsed_s = clock.elapsed_s();
        let improved = self.judge(Some(valid_loss), valid_bleu);
        let record = MetricRecord::Validation {
            step: self.position.step,
            epoch: self.position.epoch,
            valid_loss,
            valid_bleu,
            elapsed_s: self.position.elapsed_s,
        };
        self.record(observer, record, improved, wall)
    }

    /// The validation loss and BLEU now, each timed; none without validation data.
    fn validate_now(&mut self) -> anyhow::Result<(Option<f64>, Option<f64>)> {
        let Some(valid) = &self.data.valid else {
            return Ok((None, None));
        };
        // Both parts are timed here: `valid` borrows the trainer that `timed` would lend.
        let started = Instant::now();
        // Weights that overflowed in the last step show here first: stop as a diverged
        // training loss stops, before decoding them.
        let loss = finite_loss(self.position.step, self.validation_loss(&valid.pairs)?)?;
        let loss_s = started.elapsed().as_secs_f64();
        let bleu = self.validation_bleu(valid)?;
        let time = &mut self.position.time;
        time.add(RunPart::ValidationLoss, loss_s);
        time.add(
            RunPart::ValidationDecoding,
            started.elapsed().as_secs_f64() - loss_s,
        );
        Ok((Some(loss), bleu))
    }

    /// Keeps a validation's scores as the best when they are (BLEU where there is one, else
    /// the loss) and counts validations without improvement; whether BLEU improved.
    fn judge(&mut self, valid_loss: Option<f64>, valid_bleu: Option<f64>) -> bool {
        let p = &mut self.position;
        let improved = valid_bleu.filter(|&bleu| p.best_bleu.is_none_or(|best| bleu > best));
        if improved.is_some() {
            p.best_bleu = improved;
        }
        let lower = valid_loss.filter(|&loss| p.best_valid_loss.is_none_or(|best| loss < best));
        if lower.is_some() {
            p.best_valid_loss = lower;
        }
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
        improved.is_some()
    }

    /// Keeps `record`, shows it, and writes a `Best` checkpoint when BLEU improved.
    fn record(
        &mut self,
        observer: &mut dyn TrainObserver,
        record: MetricRecord,
        improved: bool,
        wall: &RunClock,
    ) -> anyhow::Result<()> {
        self.metrics.push(record.clone());
        self.timed(RunPart::Checkpoints, |trainer| {
            observer.on_epoch(&record, &trainer.metrics)
        })?;
        if improved {
            self.checkpoint(observer, CheckpointKind::Best, wall)?;
        }
        Ok(())
    }

    /// The translator or text generator over the model as it is now.
    pub fn inference(&self, options: DecodeSettings) -> Inference<'_> {
        self.inference_over(self.weights.model(), options)
    }

    fn inference_over<'a>(&'a self, model: &'a Model, options: DecodeSettings) -> Inference<'a> {
        Inference::of(model, &self.data.tokenizers, &self.device, options)
    }

    /// How validation translates: the config's `[decode]`, resolved.
    pub fn decode_settings(&self) -> DecodeSettings {
        self.decode.clone()
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

/// A row of an embedding table that training leaves as it is: its gradient is zeroed before
/// clipping and the optimiser (Adam then never moves it).
struct FrozenRow {
    /// The variable's index in the optimiser's order.
    pub var: usize,
    /// `(vocab, 1)`: 1 everywhere but the frozen row.
    pub keep: Tensor,
}

impl FrozenRow {
    /// The `<pad>` row of every token table, when the decoder starts from `<pad>` (a MarianMT
    /// model): transformers builds those tables with `padding_idx`, so that row gets no
    /// gradient there. Our own vocabularies start from `<s>`, and `<pad>` gets none anyway.
    fn padding_rows(
        weights: &TrainedWeights,
        specials: &SpecialIds,
        device: &Device,
    ) -> candle_core::Result<Vec<Self>> {
        if specials.decoder_start != specials.pad {
            return Ok(Vec::new());
        }
        let mut rows = Vec::new();
        for (var, name) in weights.names().iter().enumerate() {
            if !name.ends_with("_embed.0.lut.weight") {
                continue;
            }
            let vocab = weights.vars()[var].dim(0)?;
            let keep: Vec<f32> = (0..vocab)
                .map(|id| {
                    if id == specials.pad as usize {
                        0.0
                    } else {
                        1.0
                    }
                })
                .collect();
            let keep = Tensor::from_vec(keep, (vocab, 1), device)?;
            rows.push(Self { var, keep });
        }
        Ok(rows)
    }

    /// Sets the row to zero, as transformers initialises a `padding_idx` row.
    fn clear(&self, weights: &TrainedWeights) -> candle_core::Result<()> {
        let var = &weights.vars()[self.var];
        var.set(&var.as_tensor().broadcast_mul(&self.keep)?)
    }
}

impl Trainer {
    /// One optimiser step on `group`, advancing the position and the metrics.
    fn train_step(
        &mut self,
        group: &[PaddedBatch],
        total_steps: usize,
        clock: &RunClock,
    ) -> anyhow::Result<StepReport> {
        let (loss, lr) = self.step_at_noam_rate(group)?;
        let step = self.position.step;
        let log_every = self.config.training.log_every;
        let p = &mut self.position;
        p.steps_in_epoch += 1;
        p.tokens_seen += group.iter().map(|b| b.ntokens).sum::<usize>();
        p.epoch_loss_sum += loss;
        p.log_loss_sum += loss;
        p.log_steps += 1;
        p.elapsed_s = clock.elapsed_s();
        let tokens_per_s = p.tokens_seen as f64 / p.elapsed_s.max(1e-9);
        if step.is_multiple_of(log_every) {
            self.metrics.push(MetricRecord::Step {
                step,
                epoch: p.epoch,
                loss: p.log_loss_sum / p.log_steps as f64,
                lr,
                tokens_per_s,
                elapsed_s: p.elapsed_s,
            });
            (p.log_loss_sum, p.log_steps) = (0.0, 0);
        }
        Ok(StepReport {
            step,
            total_steps,
            epoch: p.epoch,
            loss,
            lr,
            tokens_per_s,
            elapsed: Duration::try_from_secs_f64(p.elapsed_s).unwrap_or_default(),
        })
    }

    /// One optimiser step on `group` (batches whose gradients are summed) at the Noam rate
    /// of the next step, outside any epoch: for benchmarks. Returns the loss per target token.
    pub fn step_on(&mut self, group: &[PaddedBatch]) -> anyhow::Result<f64> {
        Ok(self.step_at_noam_rate(group)?.0)
    }

    /// The next optimiser step at its Noam rate; returns (loss per target token, rate).
    fn step_at_noam_rate(&mut self, group: &[PaddedBatch]) -> anyhow::Result<(f64, f64)> {
        let t = &self.config.training;
        let step = self.position.step + 1;
        let lr = rate_of_step(
            t.schedule,
            step,
            self.config.model.d_model,
            t.lr_factor,
            t.warmup,
        );
        let loss = self.optimizer_step(group, lr, step)?;
        self.position.step = step;
        Ok((loss, lr))
    }

    /// One optimiser step over `group` (accumulated batches); returns the loss per target
    /// token over the group.
    fn optimizer_step(
        &mut self,
        group: &[PaddedBatch],
        lr: f64,
        step: usize,
    ) -> anyhow::Result<f64> {
        let group_tokens: usize = group.iter().map(|b| b.ntokens).sum();
        let mut grads: Vec<Option<Tensor>> = vec![None; self.optimizer.vars().len()];
        let mut losses = Vec::with_capacity(group.len());
        self.dropout_rng.begin_step(&self.device, step)?;
        // The step's view of the weights (in mixed precision, their casts), once for all
        // its batches.
        let model = self.weights.for_step(self.precision.step_dtype())?;
        let _precision = self.precision.scope();
        let (rank, world) = (self.collective.rank(), self.collective.world());
        for batch in share(group, rank, world) {
            let loss = (self.batch_loss_sum(&model, batch, Mode::Train(&self.dropout_rng))?
                / group_tokens as f64)?;
            let store = loss.backward()?;
            for (slot, var) in grads.iter_mut().zip(self.optimizer.vars()) {
                if let Some(grad) = store.get(var.as_tensor()) {
                    *slot = Some(match slot.take() {
                        Some(sum) => (sum + grad)?,
                        None => grad.clone(),
                    });
                }
            }
            losses.push(loss.detach());
        }
        // The losses are read only now, once the whole step is queued: on a GPU, reading one
        // waits for the work before it, and reading it before the backward pass would leave
        // the GPU idle while the host queues that pass. A non-finite loss has by then updated
        // the weights in memory, but the error below ends the run before any checkpoint.
        if world > 1 {
            let mine = match losses.as_slice() {
                [] => Tensor::zeros((), DType::F32, &self.device)?,
                _ => Tensor::stack(&losses, 0)?.sum_all()?,
            };
            let started = std::time::Instant::now();
            let (summed, loss) =
                sum_over_ranks(&*self.collective, grads, self.optimizer.vars(), &mine)?;
            self.collective_seconds += started.elapsed().as_secs_f64();
            (grads, losses) = (summed, vec![loss]);
        }
        for frozen in &self.frozen_rows {
            if let Some(grad) = grads[frozen.var].take() {
                let keep = frozen.keep.to_dtype(grad.dtype())?;
                grads[frozen.var] = Some(grad.broadcast_mul(&keep)?);
            }
        }
        if let Some(max_norm) = self.config.training.clip_grad_norm {
            clip_grad_norm(&mut grads, max_norm)?;
        }
        self.optimizer.step(&grads, lr)?;
        let mut total = 0.0;
        for loss in &losses {
            total += finite_loss(step, f64::from(loss.to_scalar::<f32>()?))?;
        }
        Ok(total)
    }

    /// Summed label-smoothed KL of one batch through `model` (the trained one, or its
    /// low-precision casts).
    fn batch_loss_sum(
        &self,
        model: &Model,
        batch: &PaddedBatch,
        mode: Mode,
    ) -> candle_core::Result<Tensor> {
        let dev = &self.device;
        let tgt_in = Tensor::from_slice(&batch.tgt_in, (batch.size, batch.tgt_len), dev)?;
        let tgt_out = Tensor::from_slice(&batch.tgt_out, batch.size * batch.tgt_len, dev)?;
        let inputs = if model.reads_source() {
            let src = Tensor::from_slice(&batch.src, (batch.size, batch.src_len), dev)?;
            TeacherForced::framed(
                src,
                tgt_in,
                self.specials.pad,
                self.specials.decoder_starts_from_pad(),
            )?
        } else {
            TeacherForced::TargetOnly { ids: tgt_in }
        };
        let rows = batch.size * batch.tgt_len;
        // The loss (a log-softmax over the vocabulary and a sum over the batch) in f32.
        let logits = model
            .logits(&inputs, mode)?
            .reshape((rows, ()))?
            .to_dtype(DType::F32)?;
        self.criterion.loss_sum_from_logits(&logits, &tgt_out)
    }
}
