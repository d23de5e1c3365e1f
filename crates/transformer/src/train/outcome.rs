//! How a run ends: every epoch done, stopped on request, or diverged (the loss is no longer a
//! number, and training cannot go on from these weights).

use super::events::StopReason;

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
