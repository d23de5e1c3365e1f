//! The training loop: token-budget batches -> forward -> label-smoothed loss -> backward
//! (accumulated over `accumulate` batches, clipped) -> Adam with the Noam rate; validation
//! loss and BLEU after each epoch; checkpoints handed to an observer.

use std::time::Instant;

use anyhow::bail;
use candle_core::{Device, Tensor};
use candle_nn::VarMap;

use super::events::{CheckpointKind, MetricRecord, StepReport, TrainObserver};
use super::fused_loss::FusedLabelSmoothing;
use super::loss::LabelSmoothing;
use super::optimizer::{Adam, AdamSettings};
use super::schedule::noam_rate;
use crate::config::Config;
use crate::data::vocab::PAD_ID;
use crate::data::{epoch_batches, ordered_batches, EncodedPair, PaddedBatch, Tokenizers};
use crate::metrics::corpus_bleu;
use crate::model::{make_model, masks, DropoutRng, EncoderDecoder, Mode, VocabSizes};
use crate::translator::{DecodeOptions, Translator};

/// Sentences per batch when translating the validation set for BLEU.
const VALIDATION_DECODE_BATCH: usize = 64;

/// Everything the loop trains on.
pub struct TrainingData {
    pub pairs: Vec<EncodedPair>,
    pub tokenizers: Tokenizers,
    pub valid: Option<ValidationData>,
}

/// The validation split: encoded pairs for the loss, raw text for BLEU.
pub struct ValidationData {
    pub pairs: Vec<EncodedPair>,
    pub sources: Vec<String>,
    pub references: Vec<String>,
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
    best_bleu: Option<f64>,
}

impl Trainer {
    /// A freshly initialised model for `data`, seeded from the config.
    pub fn new(config: Config, data: TrainingData, device: &Device) -> anyhow::Result<Self> {
        let vocab = VocabSizes {
            src: data.tokenizers.src.vocab_size(),
            tgt: data.tokenizers.tgt.vocab_size(),
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
            best_bleu: None,
        })
    }

    /// Optimiser steps in the whole run.
    pub fn total_steps(&self) -> usize {
        let t = &self.config.training;
        let batches = epoch_batches(&self.data.pairs, t.max_tokens, t.seed, 0).len();
        t.epochs * batches.div_ceil(t.accumulate)
    }

    /// Trains for the configured epochs: a `Last` checkpoint every `checkpoint_every` steps
    /// and at the end, a `Best` one whenever validation BLEU improves.
    pub fn run(&mut self, observer: &mut dyn TrainObserver) -> anyhow::Result<()> {
        let t = self.config.training.clone();
        let total_steps = self.total_steps();
        let started = Instant::now();
        let mut tokens_seen = 0usize;
        let (mut loss_since_log, mut steps_since_log) = (0.0, 0usize);
        for epoch in 1..=t.epochs {
            let batches = epoch_batches(&self.data.pairs, t.max_tokens, t.seed, epoch - 1);
            let (mut epoch_loss, mut epoch_steps) = (0.0, 0usize);
            for group in batches.chunks(t.accumulate) {
                self.step += 1;
                let lr = noam_rate(self.step, self.config.model.d_model, t.lr_factor, t.warmup);
                let loss = self.optimizer_step(group, lr)?;
                tokens_seen += group.iter().map(|b| b.ntokens).sum::<usize>();
                (epoch_loss, epoch_steps) = (epoch_loss + loss, epoch_steps + 1);
                (loss_since_log, steps_since_log) = (loss_since_log + loss, steps_since_log + 1);
                let elapsed = started.elapsed();
                let tokens_per_s = tokens_seen as f64 / elapsed.as_secs_f64().max(1e-9);
                observer.on_step(&StepReport {
                    step: self.step,
                    total_steps,
                    epoch,
                    loss,
                    lr,
                    tokens_per_s,
                    elapsed,
                });
                if self.step.is_multiple_of(t.log_every) {
                    self.metrics.push(MetricRecord::Step {
                        step: self.step,
                        epoch,
                        loss: loss_since_log / steps_since_log as f64,
                        lr,
                        tokens_per_s,
                        elapsed_s: elapsed.as_secs_f64(),
                    });
                    (loss_since_log, steps_since_log) = (0.0, 0);
                }
                if self.step.is_multiple_of(t.checkpoint_every) {
                    observer.on_checkpoint(self, CheckpointKind::Last)?;
                }
            }
            self.end_epoch(
                epoch,
                epoch_loss / epoch_steps.max(1) as f64,
                started,
                observer,
            )?;
        }
        if !self.step.is_multiple_of(t.checkpoint_every) {
            observer.on_checkpoint(self, CheckpointKind::Last)?;
        }
        Ok(())
    }

    /// Validation, the epoch's metrics line, and a `Best` checkpoint when BLEU improved.
    fn end_epoch(
        &mut self,
        epoch: usize,
        train_loss: f64,
        started: Instant,
        observer: &mut dyn TrainObserver,
    ) -> anyhow::Result<()> {
        let (valid_loss, valid_bleu) = match &self.data.valid {
            Some(valid) => (
                Some(self.validation_loss(&valid.pairs)?),
                Some(self.validation_bleu(valid)?),
            ),
            None => (None, None),
        };
        let record = MetricRecord::Epoch {
            step: self.step,
            epoch,
            train_loss,
            valid_loss,
            valid_bleu,
            elapsed_s: started.elapsed().as_secs_f64(),
        };
        self.metrics.push(record.clone());
        observer.on_epoch(&record, &self.metrics)?;
        if let Some(bleu) = valid_bleu {
            if self.best_bleu.is_none_or(|best| bleu > best) {
                self.best_bleu = Some(bleu);
                observer.on_checkpoint(self, CheckpointKind::Best)?;
            }
        }
        Ok(())
    }

    /// One optimiser step over `group` (accumulated batches); returns the loss per target
    /// token over the group.
    fn optimizer_step(&mut self, group: &[PaddedBatch], lr: f64) -> anyhow::Result<f64> {
        let group_tokens: usize = group.iter().map(|b| b.ntokens).sum();
        let mut grads: Vec<Option<Tensor>> = vec![None; self.optimizer.vars().len()];
        let mut total = 0.0;
        for batch in group {
            let loss = (self.batch_loss_sum(batch, Mode::Train(&self.dropout_rng))?
                / group_tokens as f64)?;
            let value = f64::from(loss.to_scalar::<f32>()?);
            if !value.is_finite() {
                bail!(
                    "the loss became {value} at step {}; lower training.lr_factor, raise \
                     training.warmup or set training.clip_grad_norm, then train again",
                    self.step
                );
            }
            total += value;
            let store = loss.backward()?;
            for (slot, var) in grads.iter_mut().zip(self.optimizer.vars()) {
                if let Some(grad) = store.get(var.as_tensor()) {
                    *slot = Some(match slot.take() {
                        Some(sum) => (sum + grad)?,
                        None => grad.clone(),
                    });
                }
            }
        }
        if let Some(max_norm) = self.config.training.clip_grad_norm {
            clip_grad_norm(&mut grads, max_norm)?;
        }
        self.optimizer.step(&grads, lr)?;
        Ok(total)
    }

    /// Summed label-smoothed KL of one batch.
    fn batch_loss_sum(&self, batch: &PaddedBatch, mode: Mode) -> candle_core::Result<Tensor> {
        let dev = &self.device;
        let src = Tensor::from_slice(&batch.src, (batch.size, batch.src_len), dev)?;
        let tgt_in = Tensor::from_slice(&batch.tgt_in, (batch.size, batch.tgt_len), dev)?;
        let tgt_out = Tensor::from_slice(&batch.tgt_out, batch.size * batch.tgt_len, dev)?;
        let src_mask = masks::padding_mask(&src, PAD_ID)?;
        let tgt_mask = masks::target_mask(&tgt_in, PAD_ID)?;
        let hidden = self
            .model
            .forward(&src, &tgt_in, &src_mask, &tgt_mask, mode)?;
        let rows = batch.size * batch.tgt_len;
        let logits = self
            .model
            .generator()
            .logits(&hidden)?
            .reshape((rows, ()))?;
        if logits.device().is_cpu() {
            let fused = FusedLabelSmoothing {
                targets: batch.tgt_out.clone(),
                pad: PAD_ID,
                smoothing: self.config.training.label_smoothing,
            };
            return fused.loss_sum(&logits);
        }
        let log_probs = candle_nn::ops::log_softmax(&logits, candle_core::D::Minus1)?;
        self.criterion.loss_sum(&log_probs, &tgt_out)
    }

    /// Loss per target token over the validation pairs, dropout off.
    fn validation_loss(&self, pairs: &[EncodedPair]) -> anyhow::Result<f64> {
        let (mut sum, mut tokens) = (0.0, 0usize);
        for batch in ordered_batches(pairs, self.config.training.max_tokens) {
            sum += f64::from(
                self.batch_loss_sum(&batch, Mode::Eval)?
                    .to_scalar::<f32>()?,
            );
            tokens += batch.ntokens;
        }
        Ok(sum / tokens.max(1) as f64)
    }

    /// Corpus BLEU of greedy translations of the validation sources.
    fn validation_bleu(&self, valid: &ValidationData) -> anyhow::Result<f64> {
        let translator = self.translator(DecodeOptions::default());
        let mut hypotheses = Vec::with_capacity(valid.sources.len());
        for chunk in valid.sources.chunks(VALIDATION_DECODE_BATCH) {
            for translation in translator.translate_batch(chunk)? {
                hypotheses.push(translation.translation);
            }
        }
        Ok(corpus_bleu(&hypotheses, &valid.references).score)
    }

    /// A translator over the model as it is now.
    pub fn translator(&self, options: DecodeOptions) -> Translator<'_> {
        Translator {
            model: &self.model,
            tokenizers: &self.data.tokenizers,
            max_positions: self.config.model.max_len,
            device: &self.device,
            options,
        }
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

/// Scales all gradients down so that their global L2 norm is at most `max_norm`, as
/// torch.nn.utils.clip_grad_norm_ does.
fn clip_grad_norm(grads: &mut [Option<Tensor>], max_norm: f64) -> candle_core::Result<()> {
    let squares = grads
        .iter()
        .flatten()
        .map(|g| g.sqr()?.sum_all())
        .collect::<candle_core::Result<Vec<_>>>()?;
    if squares.is_empty() {
        return Ok(());
    }
    let norm = f64::from(
        Tensor::stack(&squares, 0)?
            .sum_all()?
            .sqrt()?
            .to_scalar::<f32>()?,
    );
    let scale = max_norm / (norm + 1e-6);
    if scale < 1.0 {
        for grad in grads.iter_mut().flatten() {
            *grad = (&*grad * scale)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipping_rescales_to_the_max_norm_and_leaves_small_gradients_alone() {
        let dev = Device::Cpu;
        let mut grads = vec![
            Some(Tensor::new(&[3f32, 0.], &dev).unwrap()),
            None,
            Some(Tensor::new(&[4f32], &dev).unwrap()),
        ];
        clip_grad_norm(&mut grads, 1.0).unwrap();
        let a = grads[0].as_ref().unwrap().to_vec1::<f32>().unwrap();
        let b = grads[2].as_ref().unwrap().to_vec1::<f32>().unwrap();
        assert!((a[0] - 0.6).abs() < 1e-5 && (b[0] - 0.8).abs() < 1e-5);
        clip_grad_norm(&mut grads, 10.0).unwrap();
        assert!((grads[0].as_ref().unwrap().to_vec1::<f32>().unwrap()[0] - 0.6).abs() < 1e-5);
    }
}
