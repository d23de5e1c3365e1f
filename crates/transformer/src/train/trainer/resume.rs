//! Saving and restoring a trainer's whole state: the weights, Adam's moments (named as
//! torch names them) and the loop's state, so that a resumed run takes exactly the steps the
//! uninterrupted run would have taken. A child of `trainer` so that it reads the trainer's
//! fields without widening their visibility.

use std::collections::HashMap;

use candle_core::{Device, Tensor};

use super::Trainer;
use crate::config::Config;
use crate::distributed::{Collective, SingleProcess};
use crate::model::DropoutRng;
use crate::train::data::TrainingData;
use crate::train::state::{RunPosition, TrainingState, STATE_FORMAT};
use crate::training_data::EpochPlan;

/// A saved run to continue: the model's tensors, Adam's moments (`<name>.exp_avg`,
/// `<name>.exp_avg_sq`) and the loop's state.
pub struct ResumePoint {
    pub weights: HashMap<String, Tensor>,
    pub moments: HashMap<String, Tensor>,
    pub state: TrainingState,
}

/// Suffixes of Adam's moments in `optimizer.safetensors`, as torch names them.
const FIRST_MOMENT: &str = "exp_avg";
const SECOND_MOMENT: &str = "exp_avg_sq";

impl Trainer {
    /// The trainer of a saved run, ready to take its next step; `data` must encode to the
    /// same pairs as when the run was saved.
    pub fn resume(
        config: Config,
        data: TrainingData,
        device: &Device,
        point: ResumePoint,
    ) -> anyhow::Result<Self> {
        Self::resume_joined(config, data, device, point, Box::new(SingleProcess))
    }

    /// As `resume`, as one rank of `collective`. Another number of ranks than the run's takes
    /// over only between epochs (see `position_for_world`).
    pub fn resume_joined(
        config: Config,
        data: TrainingData,
        device: &Device,
        point: ResumePoint,
        collective: Box<dyn Collective>,
    ) -> anyhow::Result<Self> {
        let state = point.state;
        let mut trainer = Self::joined(config, data, device, collective)?;
        trainer.check_saved_position(&state)?;
        let position = trainer.position_for_world(state.position.clone(), state.world)?;
        let fingerprint = &trainer.fingerprint;
        if *fingerprint != state.data {
            anyhow::bail!(
                "the training data differs from the run's ({} pairs, hash {}, now {} pairs, hash \
                 {}); resume needs the same corpus and tokenizers, or start a new run",
                state.data.pairs,
                state.data.hash,
                fingerprint.pairs,
                fingerprint.hash
            );
        }
        trainer.weights.load(&point.weights)?;
        let (mut first, mut second) = (Vec::new(), Vec::new());
        for name in trainer.weights.names() {
            let moment = |suffix| {
                let key = format!("{name}.{suffix}");
                point.moments.get(&key).ok_or_else(|| {
                    anyhow::anyhow!("the checkpoint has no moment {key}; it cannot be resumed")
                })
            };
            for (suffix, moments) in [(FIRST_MOMENT, &mut first), (SECOND_MOMENT, &mut second)] {
                let saved = moment(suffix)?;
                let shape = trainer.weights.shape_of(name);
                if Some(saved.dims()) != shape.as_deref() {
                    anyhow::bail!(
                        "the checkpoint's moment {name}.{suffix} has shape {:?} but the \
                         parameter has {:?}; it cannot be resumed",
                        saved.dims(),
                        shape.unwrap_or_default()
                    );
                }
                moments.push(saved.to_device(device)?);
            }
        }
        trainer.optimizer.restore(state.adam_steps, first, second)?;
        let words = state.dropout_words.parse::<u128>().map_err(|_| {
            anyhow::anyhow!("dropout_words {:?} is not a number", state.dropout_words)
        })?;
        // A distributed run's ranks restart their streams every step; a single process
        // continues its stream where it was saved.
        if trainer.collective.world() == 1 {
            trainer.dropout_rng = DropoutRng::at_position(state.dropout_seed, words);
        }
        trainer.position = position;
        trainer.metrics = state.metrics;
        Ok(trainer)
    }

    /// Refuses a saved position this run's data could not have reached (a damaged or edited
    /// `training_state.json`): more steps into an epoch than it has, more or fewer steps than
    /// the epochs so far hold, an epoch past the run's, Adam's count not the loop's, a clock
    /// that is not a duration. Every epoch has the same number of
    /// batches (it depends on the lengths, not the order), most steps with one rank.
    fn check_saved_position(&self, state: &TrainingState) -> anyhow::Result<()> {
        let t = &self.config.training;
        let p = &state.position;
        let batches = EpochPlan::new(&self.data.pairs, t.max_tokens, (t.seed, 0)).len();
        let per_epoch = |world: usize| batches.div_ceil(t.accumulate * world.max(1));
        let reachable = p
            .epoch
            .saturating_sub(1)
            .saturating_mul(per_epoch(1))
            .saturating_add(p.steps_in_epoch);
        let problem = if state.world == 0 {
            Some("world is 0".to_string())
        } else if p.epoch == 0 {
            Some("epoch is 0 (epochs count from 1)".to_string())
        } else if p.steps_in_epoch > per_epoch(state.world) {
            Some(format!(
                "steps_in_epoch is {}, but an epoch of this data has {} steps with {} rank(s)",
                p.steps_in_epoch,
                per_epoch(state.world),
                state.world
            ))
        } else if p.epoch > t.epochs + 1 {
            Some(format!(
                "epoch is {}, but the run has {} epochs (epochs + 1 once it is complete)",
                p.epoch, t.epochs
            ))
        } else if p.step > reachable || p.step < (p.epoch - 1) + p.steps_in_epoch {
            Some(format!(
                "step {} cannot be reached {} steps into epoch {} ({} steps an epoch at most)",
                p.step,
                p.steps_in_epoch,
                p.epoch,
                per_epoch(1)
            ))
        } else if state.adam_steps != p.step {
            Some(format!(
                "adam_steps is {}, but Adam takes one update a step and the run is at step {}",
                state.adam_steps, p.step
            ))
        } else if !(p.elapsed_s.is_finite() && (0.0..1e12).contains(&p.elapsed_s)) {
            Some(format!(
                "elapsed_s is {:?}, not a number of seconds",
                p.elapsed_s
            ))
        } else {
            None
        };
        match problem {
            Some(problem) => anyhow::bail!(
                "the saved training state is inconsistent with the run's data: {problem}; the \
                 file was damaged or edited, so restore it or start a new run"
            ),
            None => Ok(()),
        }
    }

    /// Where a run saved by `saved_world` ranks stands for this trainer's ranks: the same
    /// position when the number is the same or the epoch has not begun; at the epoch's end
    /// when all its batches were taken (the new number counts that epoch's steps its own way);
    /// mid-epoch, a refusal naming both numbers, since each step's batches depend on them.
    fn position_for_world(
        &self,
        mut position: RunPosition,
        saved_world: usize,
    ) -> anyhow::Result<RunPosition> {
        let world = self.collective.world();
        if saved_world == world || position.steps_in_epoch == 0 {
            return Ok(position);
        }
        let t = &self.config.training;
        let batches = EpochPlan::new(&self.data.pairs, t.max_tokens, (t.seed, position.epoch - 1));
        if position.steps_in_epoch < batches.len().div_ceil(t.accumulate * saved_world) {
            anyhow::bail!(
                "the run was saved by {saved_world} process(es) and is resumed by {world}, {} \
                 steps into epoch {}: its batches are dealt to that many ranks; resume it with \
                 mpirun -np {saved_world} (another number can take over at an epoch's end)",
                position.steps_in_epoch,
                position.epoch
            );
        }
        position.steps_in_epoch = batches.len().div_ceil(t.accumulate * world);
        Ok(position)
    }

    /// What a `Last` checkpoint needs to resume this run: Adam's moments under
    /// `<parameter>.exp_avg` / `.exp_avg_sq`, and the loop's state.
    pub fn resume_files(&self) -> anyhow::Result<(Vec<(String, Tensor)>, TrainingState)> {
        let (first, second) = self.optimizer.moments();
        let mut moments = Vec::with_capacity(2 * first.len());
        for ((name, m), v) in self.weights.names().iter().zip(first).zip(second) {
            moments.push((format!("{name}.{FIRST_MOMENT}"), m.clone()));
            moments.push((format!("{name}.{SECOND_MOMENT}"), v.clone()));
        }
        let (dropout_seed, words) = self.dropout_rng.position();
        let state = TrainingState {
            format: STATE_FORMAT,
            position: self.position.clone(),
            adam_steps: self.optimizer.steps_taken(),
            dropout_seed,
            dropout_words: words.to_string(),
            data: self.fingerprint.clone(),
            world: self.collective.world(),
            metrics: self.metrics.clone(),
        };
        Ok((moments, state))
    }
}
