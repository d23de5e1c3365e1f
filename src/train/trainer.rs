//! The training loop: batches -> forward -> label-smoothed loss -> backward -> Adam, with the
//! Noam learning rate, periodic metrics and checkpoints handed to an observer.

use std::time::{Duration, Instant};

use anyhow::bail;
use candle_core::{Device, Tensor};
use candle_nn::VarMap;
use serde::Serialize;

use super::loss::LabelSmoothing;
use super::optimizer::{Adam, AdamSettings};
use super::schedule::noam_rate;
use crate::config::Config;
use crate::data::batch::batches_per_epoch;
use crate::data::vocab::PAD_ID;
use crate::data::{epoch_batches, EncodedPair, PaddedBatch, Vocab};
use crate::model::{make_model, masks, DropoutRng, EncoderDecoder, Mode, VocabSizes};

/// Everything the loop trains on: encoded pairs and the vocabularies that encoded them.
pub struct TrainingData {
    pub pairs: Vec<EncodedPair>,
    pub src_vocab: Vocab,
    pub tgt_vocab: Vocab,
}

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
#[derive(Debug, Clone, Serialize)]
pub struct MetricRecord {
    pub step: usize,
    pub epoch: usize,
    /// Mean loss per target token over the steps since the previous record.
    pub loss: f64,
    pub lr: f64,
    pub tokens_per_s: f64,
    pub elapsed_s: f64,
}

/// Receives progress and decides what a checkpoint means (the loop never touches files).
pub trait TrainObserver {
    fn on_step(&mut self, report: &StepReport);
    fn on_checkpoint(&mut self, trainer: &Trainer) -> anyhow::Result<()>;
}

/// A model being trained, with its optimiser state and its metrics so far.
pub struct Trainer {
    config: Config,
    data: TrainingData,
    device: Device,
    varmap: VarMap,
    model: EncoderDecoder,
    optimizer: Adam,
    criterion: LabelSmoothing,
    dropout_rng: DropoutRng,
    step: usize,
    metrics: Vec<MetricRecord>,
}

impl Trainer {
    /// A freshly initialised model for `data`, seeded from the config.
    pub fn new(config: Config, data: TrainingData, device: &Device) -> anyhow::Result<Self> {
        let vocab = VocabSizes {
            src: data.src_vocab.len(),
            tgt: data.tgt_vocab.len(),
        };
        let seed = config.training.seed;
        let varmap = VarMap::new();
        let model = make_model(&config.model, vocab, &varmap, seed, device)?;
        let mut vars: Vec<(String, candle_core::Var)> = varmap
            .data()
            .lock()
            .map_err(|_| anyhow::anyhow!("parameter map lock poisoned"))?
            .iter()
            .map(|(name, var)| (name.clone(), var.clone()))
            .collect();
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        let t = &config.training;
        let settings = AdamSettings {
            beta1: t.adam_beta1,
            beta2: t.adam_beta2,
            eps: t.adam_eps,
        };
        let optimizer = Adam::new(vars.into_iter().map(|(_, v)| v).collect(), settings)?;
        Ok(Self {
            criterion: LabelSmoothing::new(vocab.tgt, PAD_ID, t.label_smoothing),
            // Dropout draws from its own stream so that changing the init does not shift it.
            dropout_rng: DropoutRng::new(seed.wrapping_add(1)),
            config,
            data,
            device: device.clone(),
            varmap,
            model,
            optimizer,
            step: 0,
            metrics: Vec::new(),
        })
    }

    pub fn total_steps(&self) -> usize {
        self.config.training.epochs
            * batches_per_epoch(self.data.pairs.len(), self.config.training.batch_size)
    }

    /// Trains for the configured epochs, checkpointing every `checkpoint_every` steps and at
    /// the end.
    pub fn run(&mut self, observer: &mut dyn TrainObserver) -> anyhow::Result<()> {
        let t = self.config.training.clone();
        let total_steps = self.total_steps();
        let started = Instant::now();
        let (mut tokens_seen, mut loss_since_log, mut steps_since_log) = (0usize, 0.0, 0usize);
        for epoch in 0..t.epochs {
            for batch in epoch_batches(&self.data.pairs, t.batch_size, t.seed, epoch) {
                self.step += 1;
                let lr = noam_rate(self.step, self.config.model.d_model, t.lr_factor, t.warmup);
                let loss = self.train_step(&batch, lr)?;
                tokens_seen += batch.ntokens;
                loss_since_log += loss;
                steps_since_log += 1;
                let elapsed = started.elapsed();
                let report = StepReport {
                    step: self.step,
                    total_steps,
                    epoch: epoch + 1,
                    loss,
                    lr,
                    tokens_per_s: tokens_seen as f64 / elapsed.as_secs_f64().max(1e-9),
                    elapsed,
                };
                observer.on_step(&report);
                if self.step.is_multiple_of(t.log_every) || self.step == total_steps {
                    self.metrics.push(MetricRecord {
                        step: self.step,
                        epoch: epoch + 1,
                        loss: loss_since_log / steps_since_log as f64,
                        lr,
                        tokens_per_s: report.tokens_per_s,
                        elapsed_s: elapsed.as_secs_f64(),
                    });
                    (loss_since_log, steps_since_log) = (0.0, 0);
                }
                if self.step.is_multiple_of(t.checkpoint_every) && self.step != total_steps {
                    observer.on_checkpoint(self)?;
                }
            }
        }
        observer.on_checkpoint(self)
    }

    /// One optimiser step on `batch`; returns the loss per target token.
    fn train_step(&mut self, batch: &PaddedBatch, lr: f64) -> anyhow::Result<f64> {
        let dev = &self.device;
        let src = Tensor::from_slice(&batch.src, (batch.size, batch.src_len), dev)?;
        let tgt_in = Tensor::from_slice(&batch.tgt_in, (batch.size, batch.tgt_len), dev)?;
        let tgt_out = Tensor::from_slice(&batch.tgt_out, batch.size * batch.tgt_len, dev)?;
        let src_mask = masks::padding_mask(&src, PAD_ID)?;
        let tgt_mask = masks::target_mask(&tgt_in, PAD_ID)?;
        let mode = Mode::Train(&self.dropout_rng);
        let hidden = self
            .model
            .forward(&src, &tgt_in, &src_mask, &tgt_mask, mode)?;
        let log_probs = self
            .model
            .generator()
            .forward(&hidden)?
            .reshape((batch.size * batch.tgt_len, ()))?;
        let loss = (self.criterion.loss_sum(&log_probs, &tgt_out)? / batch.ntokens as f64)?;
        let value = f64::from(loss.to_scalar::<f32>()?);
        if !value.is_finite() {
            bail!(
                "the loss became {value} at step {}; lower training.lr_factor or raise \
                 training.warmup, then train again",
                self.step
            );
        }
        let grads = loss.backward()?;
        self.optimizer.step(&grads, lr)?;
        Ok(value)
    }

    pub fn model(&self) -> &EncoderDecoder {
        &self.model
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn data(&self) -> &TrainingData {
        &self.data
    }

    pub fn step(&self) -> usize {
        self.step
    }

    pub fn metrics(&self) -> &[MetricRecord] {
        &self.metrics
    }

    /// Every tensor of the model under its state_dict name: parameters and position tables.
    pub fn named_tensors(&self) -> anyhow::Result<Vec<(String, Tensor)>> {
        let vars = self
            .varmap
            .data()
            .lock()
            .map_err(|_| anyhow::anyhow!("parameter map lock poisoned"))?;
        let mut tensors: Vec<(String, Tensor)> = vars
            .iter()
            .map(|(name, var)| (name.clone(), var.as_tensor().clone()))
            .collect();
        tensors.extend(self.model.buffers());
        tensors.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(tensors)
    }
}
