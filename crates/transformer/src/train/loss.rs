//! Label smoothing (paper section 5.4) as the reference defines it: the KL divergence from the
//! model's distribution to a smoothed target that puts `1 - smoothing` on the right word,
//! `smoothing / (vocab - 2)` on every other word but padding, and nothing on padding.

use candle_core::{Result, Tensor};

use crate::kernels::loss;

/// The reference's `LabelSmoothing` criterion with `KLDivLoss(reduction="sum")`.
pub struct LabelSmoothing {
    vocab: usize,
    pad: u32,
    smoothing: f64,
}

impl LabelSmoothing {
    pub fn new(vocab: usize, pad: u32, smoothing: f64) -> Self {
        Self {
            vocab,
            pad,
            smoothing,
        }
    }

    /// Summed KL divergence over the non-padding rows, from `log_probs` `(n, vocab)` (the
    /// Generator's output) and `targets` `(n,)` ids.
    pub fn loss_sum(&self, log_probs: &Tensor, targets: &Tensor) -> Result<Tensor> {
        self.check(log_probs)?;
        loss::kl_sum_from_log_probs(log_probs, targets, self.pad, self.smoothing)
    }

    /// As `loss_sum`, from the logits `(n, vocab)`, the log-softmax included: what training
    /// asks for, fused with the loss where the kernels can.
    pub fn loss_sum_from_logits(&self, logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
        self.check(logits)?;
        loss::label_smoothed_kl_sum(logits, targets, self.pad, self.smoothing)
    }

    fn check(&self, scores: &Tensor) -> Result<()> {
        let (_, vocab) = scores.dims2()?;
        if vocab != self.vocab || vocab < 3 {
            candle_core::bail!(
                "label smoothing expects {} classes, got {vocab}",
                self.vocab
            )
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, D};

    /// The reference's computation: build the smoothed distribution, then sum q (ln q - x).
    fn explicit_kl(log_probs: &[Vec<f32>], targets: &[u32], pad: usize, smoothing: f64) -> f64 {
        let vocab = log_probs[0].len();
        let mut total = 0.0;
        for (row, &t) in log_probs.iter().zip(targets) {
            if t as usize == pad {
                continue;
            }
            for (j, &x) in row.iter().enumerate() {
                let q = if j == pad {
                    0.0
                } else if j == t as usize {
                    1.0 - smoothing
                } else {
                    smoothing / (vocab - 2) as f64
                };
                if q > 0.0 {
                    total += q * (q.ln() - x as f64);
                }
            }
        }
        total
    }

    #[test]
    fn the_closed_form_equals_the_smoothed_distribution_kl() {
        let dev = Device::Cpu;
        let logits = Tensor::randn(0f32, 2., (5, 7), &dev).unwrap();
        let log_probs = candle_nn::ops::log_softmax(&logits, D::Minus1).unwrap();
        let targets = [3u32, 0, 6, 1, 2];
        let t = Tensor::new(&targets, &dev).unwrap();
        for smoothing in [0.0, 0.1, 0.4] {
            let loss = LabelSmoothing::new(7, 0, smoothing)
                .loss_sum(&log_probs, &t)
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            let want = explicit_kl(&log_probs.to_vec2().unwrap(), &targets, 0, smoothing);
            assert!((loss as f64 - want).abs() < 1e-4, "{loss} vs {want}");
        }
    }

    #[test]
    fn a_perfect_prediction_without_smoothing_costs_nothing() {
        let dev = Device::Cpu;
        let log_probs = Tensor::new(&[[-100f32, -100., 0., -100.]], &dev).unwrap();
        let t = Tensor::new(&[2u32], &dev).unwrap();
        let loss = LabelSmoothing::new(4, 0, 0.0)
            .loss_sum(&log_probs, &t)
            .unwrap();
        assert!(loss.to_scalar::<f32>().unwrap().abs() < 1e-6);
    }
}
