//! The label-smoothing loss fused with the Generator's log-softmax, for the CPU.
//!
//! The composed version (`kl_sum_from_log_probs` over `log_softmax`) walks the
//! `(tokens, vocab)` logits some twenty times forward and backward, and that matrix is the
//! largest in the model. Here the forward pass is two sweeps per row and the backward pass
//! one, using d KL(q || softmax(z)) / dz = softmax(z) - q. Rows run in parallel, and their
//! exponentials are the vectorized f32 `exp` (as PyTorch's log-softmax computes them): the
//! library's f64 `exp`, a call per logit, was a tenth of a Multi30k training step.

use std::sync::OnceLock;

use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};
use rayon::prelude::*;

use super::log_softmax::row_log_sum_exp;
use super::simd::exp;

/// Rows per parallel task: a vocabulary-long row is some microseconds of work.
const ROWS_PER_TASK: usize = 4;

/// Per-row label-smoothed KL divergence computed straight from logits `(rows, vocab)`.
pub struct FusedLabelSmoothing {
    /// Target id of every row; rows whose target is `pad` cost nothing.
    targets: Vec<u32>,
    pad: u32,
    smoothing: f64,
    /// Each row's log-sum-exp, kept by the forward pass for the backward one (a pass of
    /// exponentials over the vocabulary per row, not done twice).
    lse: OnceLock<Vec<f32>>,
}

impl FusedLabelSmoothing {
    pub fn new(targets: Vec<u32>, pad: u32, smoothing: f64) -> Self {
        Self {
            targets,
            pad,
            smoothing,
            lse: OnceLock::new(),
        }
    }

    /// Summed KL over the non-padding rows of `logits` `(rows, vocab)`.
    pub fn loss_sum(self, logits: &Tensor) -> Result<Tensor> {
        logits.contiguous()?.apply_op1(self)?.sum_all()
    }

    fn distribution(&self, vocab: usize) -> (f64, f64, f64) {
        smoothed_target(vocab, self.smoothing)
    }

    fn rows<'a>(&self, storage: &'a CpuStorage, layout: &Layout) -> Result<(&'a [f32], usize)> {
        let (start, end) = layout
            .contiguous_offsets()
            .ok_or_else(|| candle_core::Error::Msg("fused loss needs contiguous logits".into()))?;
        let (rows, vocab) = layout.shape().dims2()?;
        if rows != self.targets.len() || vocab < 3 {
            candle_core::bail!(
                "fused loss: {rows} rows of {vocab} logits for {} targets",
                self.targets.len()
            )
        }
        if let Some(id) = self.targets.iter().find(|&&id| id as usize >= vocab) {
            candle_core::bail!("the loss's target id {id} is outside the vocabulary of {vocab}")
        }
        Ok((&storage.as_slice::<f32>()?[start..end], vocab))
    }
}

vectorized!(
    /// The sum of a row, over 16 lanes.
    fn row_sum(row: &[f32]) -> f32 {
        const LANES: usize = 16;
        let mut lanes = [0f32; LANES];
        let whole = row.len() / LANES * LANES;
        for block in row[..whole].chunks_exact(LANES) {
            for k in 0..LANES {
                lanes[k] += block[k];
            }
        }
        row[whole..].iter().sum::<f32>() + lanes.iter().sum::<f32>()
    }
);

vectorized!(
    /// `out = (softmax(row) - spread) * g` from the row's log-sum-exp `lse`.
    fn softmax_minus_spread(row: &[f32], lse: f32, spread: f32, g: f32, out: &mut [f32]) {
        for (o, &z) in out.iter_mut().zip(row) {
            *o = (exp::<FUSED>(z - lse) - spread) * g;
        }
    }
);

impl CustomOp1 for FusedLabelSmoothing {
    fn name(&self) -> &'static str {
        "fused-label-smoothing"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let (logits, vocab) = self.rows(storage, layout)?;
        let (confidence, spread, entropy) = self.distribution(vocab);
        let pad = self.pad as usize;
        let (losses, lse): (Vec<f32>, Vec<f32>) = logits
            .par_chunks(vocab)
            .zip(&self.targets)
            .with_min_len(ROWS_PER_TASK)
            .map(|(row, &target)| {
                if target == self.pad {
                    return (0.0, 0.0);
                }
                let row_lse = row_log_sum_exp(row);
                let lse = f64::from(row_lse);
                let log_p = |j: usize| row[j] as f64 - lse;
                let sum_log_p = row_sum(row) as f64 - vocab as f64 * lse;
                let kl = entropy
                    - (confidence - spread) * log_p(target as usize)
                    - spread * (sum_log_p - log_p(pad));
                (kl as f32, row_lse)
            })
            .unzip();
        // The same logits are the backward pass's (this op's only input).
        let _ = self.lse.set(lse);
        let rows = losses.len();
        Ok((CpuStorage::F32(losses), Shape::from(rows)))
    }

    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        let grad = arg.apply_op2_no_bwd(grad_res, &FusedLabelSmoothingGrad(self))?;
        Ok(Some(grad))
    }
}

/// d loss / d logits = upstream_row * (softmax(z) - q); zero for padding rows.
struct FusedLabelSmoothingGrad<'a>(&'a FusedLabelSmoothing);

impl candle_core::CustomOp2 for FusedLabelSmoothingGrad<'_> {
    fn name(&self) -> &'static str {
        "fused-label-smoothing-grad"
    }

    fn cpu_fwd(
        &self,
        logits: &CpuStorage,
        logits_layout: &Layout,
        upstream: &CpuStorage,
        upstream_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let op = self.0;
        let (logits, vocab) = op.rows(logits, logits_layout)?;
        let upstream = match upstream_layout.contiguous_offsets() {
            Some((start, end)) => &upstream.as_slice::<f32>()?[start..end],
            None => candle_core::bail!("fused loss gradient needs a contiguous upstream gradient"),
        };
        let (confidence, spread, _) = op.distribution(vocab);
        let mut grad = vec![0f32; logits.len()];
        let saved = op.lse.get();
        logits
            .par_chunks(vocab)
            .zip(grad.par_chunks_mut(vocab))
            .zip(op.targets.par_iter().zip(upstream))
            .enumerate()
            .with_min_len(ROWS_PER_TASK)
            .for_each(|(i, ((row, out), (&target, &g)))| {
                if target == op.pad {
                    return;
                }
                let lse = saved.map_or_else(|| row_log_sum_exp(row), |lse| lse[i]);
                softmax_minus_spread(row, lse, spread as f32, g, out);
                out[op.pad as usize] += (spread * g as f64) as f32;
                out[target as usize] -= ((confidence - spread) * g as f64) as f32;
            });
        Ok((CpuStorage::F32(grad), logits_layout.shape().clone()))
    }
}

/// (confidence, spread, sum_j q_j ln q_j) of the smoothed target distribution q over `vocab`
/// classes: `1 - smoothing` on the target, `smoothing / (vocab - 2)` on every other class but
/// padding. Both paths of the loss read it from here.
pub(super) fn smoothed_target(vocab: usize, smoothing: f64) -> (f64, f64, f64) {
    let confidence = 1.0 - smoothing;
    let spread = smoothing / (vocab - 2) as f64;
    (
        confidence,
        spread,
        x_ln_x(confidence) + (vocab - 2) as f64 * x_ln_x(spread),
    )
}

/// x ln x with 0 ln 0 = 0, as KLDivLoss treats zero targets.
fn x_ln_x(x: f64) -> f64 {
    if x > 0.0 {
        x * x.ln()
    } else {
        0.0
    }
}
