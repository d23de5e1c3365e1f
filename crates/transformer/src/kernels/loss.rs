//! The label-smoothed KL divergence (paper section 5.4) over a batch: on the CPU in f32 one
//! fused node from the logits, log-softmax included ([`super::loss_fused`]), elsewhere
//! candle's log-softmax and the closed form below.

use candle_core::{DType, Result, Tensor, D};

use super::fused_runs;
use super::loss_fused::{smoothed_target, FusedLabelSmoothing};

/// Summed KL divergence over the rows whose target is not `pad`, from `logits` `(n, vocab)`
/// and `targets` `(n,)` u32 ids.
pub fn label_smoothed_kl_sum(
    logits: &Tensor,
    targets: &Tensor,
    pad: u32,
    smoothing: f64,
) -> Result<Tensor> {
    if fused_runs(&[logits]) {
        let fused = FusedLabelSmoothing::new(targets.to_vec1::<u32>()?, pad, smoothing);
        return fused.loss_sum(logits);
    }
    let log_probs = candle_nn::ops::log_softmax(logits, D::Minus1)?;
    kl_sum_from_log_probs(&log_probs, targets, pad, smoothing)
}

/// As [`label_smoothed_kl_sum`] from `log_probs` `(n, vocab)`, in closed form (no `(n, vocab)`
/// target matrix): for a row with target t,
/// KL = C - (conf - s) * x_t - s * (sum_j x_j - x_pad), where C = sum_j q_j ln q_j.
pub fn kl_sum_from_log_probs(
    log_probs: &Tensor,
    targets: &Tensor,
    pad: u32,
    smoothing: f64,
) -> Result<Tensor> {
    let (_, vocab) = log_probs.dims2()?;
    if vocab < 3 {
        candle_core::bail!("label smoothing needs at least 3 classes, got {vocab}")
    }
    let (confidence, spread, entropy_term) = smoothed_target(vocab, smoothing);

    let target_log_probs = log_probs.gather(&targets.unsqueeze(1)?, 1)?.squeeze(1)?;
    let pad_log_probs = log_probs.narrow(1, pad as usize, 1)?.squeeze(1)?;
    let others = (log_probs.sum(1)? - pad_log_probs)?;
    let per_row = ((target_log_probs * -(confidence - spread))? + (others * -spread)?)?;
    let per_row = (per_row + entropy_term)?;
    let not_padding = targets.ne(pad)?.to_dtype(DType::F32)?;
    (per_row * not_padding)?.sum_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::test_support::assert_fused_matches_composed;
    use candle_core::{Device, Var};

    #[test]
    fn a_target_outside_the_vocabulary_is_an_error_not_a_panic() {
        let dev = Device::Cpu;
        let logits = Var::from_tensor(&Tensor::randn(0f32, 1., (2, 5), &dev).unwrap()).unwrap();
        let targets = Tensor::new(&[1u32, 5], &dev).unwrap();
        let err = label_smoothed_kl_sum(logits.as_tensor(), &targets, 0, 0.1).unwrap_err();
        assert!(
            err.to_string()
                .contains("target id 5 is outside the vocabulary of 5"),
            "{err}"
        );
    }

    #[test]
    fn the_fused_loss_and_its_gradient_equal_the_composed_ones() {
        let dev = Device::Cpu;
        let logits = Var::from_tensor(&Tensor::randn(0f32, 3., (6, 9), &dev).unwrap()).unwrap();
        let targets = Tensor::new(&[3u32, 0, 8, 1, 2, 0], &dev).unwrap();
        for smoothing in [0.0, 0.1] {
            assert_fused_matches_composed(&[&logits], 1e-5, || {
                label_smoothed_kl_sum(logits.as_tensor(), &targets, 0, smoothing).unwrap()
            });
        }
    }
}
