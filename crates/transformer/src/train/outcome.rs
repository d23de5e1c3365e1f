//! How a run ends: every epoch done, stopped on request, or diverged (the loss is no longer a
//! number, and training cannot go on from these weights).

use candle_core::Tensor;

use super::events::StopReason;
use crate::checkpoint::non_finite_count;

/// How `Trainer::run` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// Every configured epoch is done.
    Finished,
    /// The observer asked to stop; a `Last` checkpoint of this step was requested first.
    Stopped(StopReason),
    /// `training.patience` epochs passed without a better validation score (a `Last`
    /// checkpoint was requested first; `best/` holds the best).
    StoppedEarly { epoch: usize, patience: usize },
}

/// The loss stopped being a number: training cannot go on from these weights.
#[derive(Debug, Clone, Copy)]
pub struct Diverged {
    pub step: usize,
    pub loss: f64,
}

impl std::fmt::Display for Diverged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the loss became {} at step {}", self.loss, self.step)
    }
}

impl std::error::Error for Diverged {}

/// The weights stopped being numbers: an update overflowed after a loss that still was one.
#[derive(Debug, Clone)]
pub struct NonFiniteWeights {
    pub step: usize,
    /// The first weight found with such values, and how many it holds.
    pub name: String,
    pub count: usize,
}

impl std::fmt::Display for NonFiniteWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the weights became NaN or infinite at step {} ({} values of {})",
            self.step, self.count, self.name
        )
    }
}

impl std::error::Error for NonFiniteWeights {}

/// Ok when every value of `tensors` (a model's named weights after `step`) is finite: what
/// must hold before they are written as a checkpoint, which a run would otherwise resume into
/// NaN.
pub fn finite_weights(step: usize, tensors: &[(String, Tensor)]) -> anyhow::Result<()> {
    for (name, tensor) in tensors {
        let count = non_finite_count(tensor)?;
        if count > 0 {
            return Err(NonFiniteWeights {
                step,
                name: name.clone(),
                count,
            }
            .into());
        }
    }
    Ok(())
}

/// `loss`, or `Diverged` when it is NaN or infinite.
pub(super) fn finite_loss(step: usize, loss: f64) -> Result<f64, Diverged> {
    if loss.is_finite() {
        Ok(loss)
    } else {
        Err(Diverged { step, loss })
    }
}

#[cfg(test)]
mod tests {
    use super::finite_loss;

    #[test]
    fn weights_with_a_nan_or_an_infinity_are_named_with_the_step() {
        use candle_core::{Device, Tensor};
        let fine = Tensor::new(&[1f32, -2.0], &Device::Cpu).unwrap();
        let bad = Tensor::new(&[f32::NAN, 1.0, f32::INFINITY], &Device::Cpu).unwrap();
        let named = |t: &Tensor, name: &str| (name.to_string(), t.clone());
        assert!(super::finite_weights(4, &[named(&fine, "a")]).is_ok());
        let err = super::finite_weights(4, &[named(&fine, "a"), named(&bad, "b.weight")])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "the weights became NaN or infinite at step 4 (2 values of b.weight)"
        );
    }

    #[test]
    fn nan_and_infinite_losses_stop_training_and_name_the_step() {
        assert_eq!(finite_loss(1, 2.5).unwrap(), 2.5);
        for (loss, shown) in [
            (f64::NAN, "NaN"),
            (f64::INFINITY, "inf"),
            (-f64::INFINITY, "-inf"),
        ] {
            let err = finite_loss(3, loss).unwrap_err().to_string();
            assert_eq!(err, format!("the loss became {shown} at step 3"));
        }
    }
}
