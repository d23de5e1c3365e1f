//! One optimiser step: the group's batches forward and backward (each rank its share), their
//! gradients summed (over the ranks too), clipped, and applied by Adam at the Noam rate; then
//! the loop's position and metrics advanced. A child of `trainer` so that it reads the
//! trainer's fields without widening their visibility.

use std::time::Duration;

use candle_core::{DType, Tensor};

use super::Trainer;
use crate::metrics::MetricRecord;
use crate::model::{Mode, Model, TeacherForced};
use crate::train::clip::clip_grad_norm;
use crate::train::data_parallel::{share, sum_over_ranks};
use crate::train::events::StepReport;
use crate::train::outcome::finite_loss;
use crate::train::schedule::rate_of_step;
use crate::train::state::RunClock;
use crate::training_data::PaddedBatch;

impl Trainer {
    /// One optimiser step on `group`, advancing the position and the metrics.
    pub(super) fn train_step(
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
    pub(super) fn batch_loss_sum(
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
