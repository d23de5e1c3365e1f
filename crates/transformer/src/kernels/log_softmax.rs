//! The Generator's log-softmax over the vocabulary (paper section 3.4): in decoding on the
//! CPU in f32 one pass per row for the maximum, one for the sum of exponentials and one to
//! write, rows in parallel; elsewhere (training, a GPU, half precision) candle's composed
//! op, which is differentiable. At beam 5 over 32 sentences that is 160 rows of 8000 a step,
//! where the six composed ops (each a full pass and a fresh buffer) cost more than the
//! generator's product itself. Beam search reads only each row's best few
//! ([`top_log_probs`]): there the third pass picks them instead of writing the row.

use candle_core::{DType, Result, Tensor, D};
use rayon::prelude::*;

use super::simd::exp;
use super::{contiguous_f32, fused_runs};

/// Below this, `exp` is subnormal (and then zero): adding subnormals costs a microcode assist
/// each on x86, and at a random model's logits most of a row is down there (a 4x slower
/// pass). Clamped to it, each such term adds about 1e-38 to a total of at least 1, which f32
/// cannot see: the same log-probabilities.
pub(super) const LOWEST_EXPONENT: f32 = -87.0;

/// Rows per parallel task: a vocabulary-long row is some microseconds of work.
const ROWS_PER_TASK: usize = 4;

/// `log(softmax(xs))` over the last dimension, `xs` `(..., n)`.
pub fn log_softmax_last_dim(xs: &Tensor) -> Result<Tensor> {
    let fused = fused_rows(xs, |values, n| {
        let mut out = vec![0f32; values.len()];
        out.par_chunks_mut(ROWS_PER_TASK * n)
            .zip(values.par_chunks(ROWS_PER_TASK * n))
            .for_each(|(out, rows)| {
                for (out, row) in out.chunks_mut(n).zip(rows.chunks(n)) {
                    log_softmax_row(row, out);
                }
            });
        out
    })?;
    if let Some(out) = fused {
        return Tensor::from_vec(out, xs.shape(), xs.device());
    }
    candle_nn::ops::log_softmax(xs, D::Minus1)
}

/// `work(values, n)` on the rows of `xs` `(..., n)` read in place where the fused path runs
/// (f32 on the CPU, contiguous, no gradient, n > 0); None elsewhere.
fn fused_rows<R>(xs: &Tensor, work: impl FnOnce(&[f32], usize) -> R) -> Result<Option<R>> {
    if xs.track_op() || !fused_runs(&[xs]) {
        return Ok(None);
    }
    let n = xs.dim(D::Minus1)?;
    let (storage, layout) = xs.storage_and_layout();
    let candle_core::Storage::Cpu(cpu) = &*storage else {
        return Ok(None);
    };
    Ok(match contiguous_f32(cpu, layout)? {
        Some(values) if n > 0 => Some(work(values, n)),
        _ => None,
    })
}

vectorized!(
    fn log_softmax_row(row: &[f32], out: &mut [f32]) {
        let max = row_max(row);
        let shift = log_sum_exp::<FUSED>(row, max);
        for (o, &x) in out.iter_mut().zip(row) {
            *o = x - shift;
        }
    }
);

/// `log sum_j e^(x_j)` of a row, by way of its maximum.
pub(super) fn row_log_sum_exp(row: &[f32]) -> f32 {
    max_and_log_sum_exp(row).1
}

/// The largest element, over 16 lanes that compile to vector maxima.
#[inline(always)]
fn row_max(row: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let whole = row.len() / LANES * LANES;
    for block in row[..whole].chunks_exact(LANES) {
        for k in 0..LANES {
            lanes[k] = lanes[k].max(block[k]);
        }
    }
    let mut max = row[whole..]
        .iter()
        .copied()
        .fold(f32::NEG_INFINITY, f32::max);
    for lane in lanes {
        max = max.max(lane);
    }
    max
}

/// `max + ln sum_j e^(x_j - max)`, the exponentials summed over 16 lanes.
#[inline(always)]
pub(super) fn log_sum_exp<const FUSED: bool>(row: &[f32], max: f32) -> f32 {
    const LANES: usize = 16;
    let mut lanes = [0f32; LANES];
    let whole = row.len() / LANES * LANES;
    for block in row[..whole].chunks_exact(LANES) {
        for k in 0..LANES {
            lanes[k] += exp::<FUSED>(at_least_lowest(block[k] - max));
        }
    }
    let mut total = 0f32;
    for &x in &row[whole..] {
        total += exp::<FUSED>(at_least_lowest(x - max));
    }
    for lane in lanes {
        total += lane;
    }
    max + total.ln()
}

/// `d` raised to [`LOWEST_EXPONENT`], a NaN kept (`f32::max` would drop it): a row holding a
/// NaN or +inf logit (damaged weights that overflow) then has a NaN log-sum-exp, so that every
/// search sees that its log-probabilities are not numbers instead of skipping that id.
#[inline(always)]
fn at_least_lowest(d: f32) -> f32 {
    if d < LOWEST_EXPONENT {
        LOWEST_EXPONENT
    } else {
        d
    }
}

/// The `count` most likely ids of each row of `logits` `(rows, vocab)` with their
/// log-probabilities (the log-softmax of the row), most likely first and the lower id first
/// on ties: what beam search reads of the Generator's output. On the CPU in f32 the rows of
/// log-probabilities are never written, nor copied to the host; elsewhere the log-softmax is
/// read back and searched there.
pub fn top_log_probs(logits: &Tensor, count: usize) -> Result<Vec<Vec<(u32, f32)>>> {
    logits.dims2()?;
    let fused = fused_rows(logits, |values, n| {
        let mut tops = vec![Vec::new(); values.len() / n];
        tops.par_chunks_mut(ROWS_PER_TASK)
            .zip(values.par_chunks(ROWS_PER_TASK * n))
            .for_each(|(tops, rows)| {
                for (top, row) in tops.iter_mut().zip(rows.chunks(n)) {
                    let shift = row_log_sum_exp(row);
                    *top = largest(row.iter().map(|&x| x - shift), count);
                }
            });
        tops
    })?;
    if let Some(tops) = fused {
        return Ok(tops);
    }
    let log_probs = log_softmax_last_dim(logits)?
        .to_dtype(DType::F32)?
        .to_vec2::<f32>()?;
    Ok(log_probs
        .into_iter()
        .map(|row| largest(row.into_iter(), count))
        .collect())
}

/// Each row's most likely id that is not one of `never`, with its log-probability (the
/// log-softmax over the whole row): what greedy decoding reads of the Generator's output, the
/// argmax of the log-softmax with `never` masked, the first of equal log-probabilities. On
/// the CPU in f32, per row one pass for the maximum, one for the sum of exponentials and a
/// search for the first id at the maximum, which usually stops early: the row of
/// log-probabilities (58,101 floats a row for OPUS-MT) is never written. `None` elsewhere.
pub fn greedy_choices(logits: &Tensor, never: &[u32]) -> Result<Option<Vec<(u32, f32)>>> {
    logits.dims2()?;
    fused_rows(logits, |values, n| {
        let mut choices = vec![(0u32, f32::NEG_INFINITY); values.len() / n];
        choices
            .par_chunks_mut(ROWS_PER_TASK)
            .zip(values.par_chunks(ROWS_PER_TASK * n))
            .for_each(|(choices, rows)| {
                for (choice, row) in choices.iter_mut().zip(rows.chunks(n)) {
                    *choice = greedy_choice(row, never);
                }
            });
        choices
    })
}

/// [`greedy_choices`] of one row.
fn greedy_choice(row: &[f32], never: &[u32]) -> (u32, f32) {
    let (max, shift) = max_and_log_sum_exp(row);
    let allowed = |j: usize| !never.contains(&(j as u32));
    // The first id whose log-probability is the largest's (log-probabilities of distinct
    // logits may round equal, and the argmax of the log-softmax takes the first of them).
    let top = max - shift;
    if let Some(j) = (0..row.len()).find(|&j| row[j] - shift == top && allowed(j)) {
        return (j as u32, top);
    }
    // The maximum is a never-generated id (or not a number): the best of the others, the
    // first on ties.
    let mut best: Option<(u32, f32)> = None;
    for (j, &x) in row.iter().enumerate() {
        let log_prob = x - shift;
        if allowed(j) && best.is_none_or(|(_, b)| log_prob > b) {
            best = Some((j as u32, log_prob));
        }
    }
    best.unwrap_or((0, f32::NAN))
}

vectorized!(
    /// A row's maximum and its log-sum-exp.
    fn max_and_log_sum_exp(row: &[f32]) -> (f32, f32) {
        let max = row_max(row);
        (max, log_sum_exp::<FUSED>(row, max))
    }
);

/// The `keep` largest of `values` with their indices, largest first and the lower index first
/// on ties: one pass that compares most values with the smallest kept one only (a selection
/// over every id of an 8000-word vocabulary took 8% of beam search).
pub fn largest(values: impl Iterator<Item = f32>, keep: usize) -> Vec<(u32, f32)> {
    use std::cmp::Ordering::{Greater, Less};
    let mut top: Vec<(u32, f32)> = Vec::with_capacity(keep + 1);
    if keep == 0 {
        return top;
    }
    for (id, value) in values.enumerate() {
        if top.len() == keep && value.total_cmp(&top[keep - 1].1) != Greater {
            continue;
        }
        // After every kept value at least as large: equal values keep the lower id first.
        let at = top.partition_point(|&(_, kept)| kept.total_cmp(&value) != Less);
        top.insert(at, (id as u32, value));
        top.truncate(keep);
    }
    top
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::test_support::largest_difference;
    use candle_core::Device;

    #[test]
    fn the_fused_log_softmax_matches_candles() {
        let dev = Device::Cpu;
        // Row lengths that are not a multiple of the lanes, rows of very different scales.
        let xs = (Tensor::randn(0f32, 1., (9, 37), &dev).unwrap() * 30.0).unwrap();
        let fused = log_softmax_last_dim(&xs).unwrap();
        let composed = candle_nn::ops::log_softmax(&xs, D::Minus1).unwrap();
        assert!(largest_difference(&fused, &composed) < 1e-4);
        let probabilities = fused.exp().unwrap().sum(D::Minus1).unwrap();
        for total in probabilities.to_vec1::<f32>().unwrap() {
            assert!((total - 1.0).abs() < 1e-5, "{total}");
        }
    }

    #[test]
    fn the_top_log_probs_are_the_largest_of_the_log_softmax_on_both_paths() {
        let dev = Device::Cpu;
        // Rounded so that rows have ties, which must go to the lower id.
        let xs = Tensor::randn(0f32, 4., (6, 41), &dev)
            .unwrap()
            .round()
            .unwrap();
        let log_probs = candle_nn::ops::log_softmax(&xs, D::Minus1).unwrap();
        let fused = top_log_probs(&xs, 5).unwrap();
        let composed = {
            let _composed = crate::kernels::composed_only();
            top_log_probs(&xs, 5).unwrap()
        };
        for (row, (fused, composed)) in log_probs
            .to_vec2::<f32>()
            .unwrap()
            .iter()
            .zip(fused.iter().zip(&composed))
        {
            let mut ids: Vec<u32> = (0..row.len() as u32).collect();
            ids.sort_by(|&a, &b| row[b as usize].total_cmp(&row[a as usize]).then(a.cmp(&b)));
            for top in [fused, composed] {
                let top_ids: Vec<u32> = top.iter().map(|&(id, _)| id).collect();
                assert_eq!(top_ids, ids[..5]);
                for &(id, log_prob) in top {
                    assert!((log_prob - row[id as usize]).abs() < 1e-5);
                }
            }
        }
    }

    #[test]
    fn largest_keeps_the_lower_index_first_on_ties() {
        let row = [0.5f32, 2.0, -1.0, 2.0, 0.5, 3.0, 0.5, f32::NEG_INFINITY];
        let ids = |keep| {
            largest(row.iter().copied(), keep)
                .into_iter()
                .map(|(id, _)| id)
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(3), [5, 1, 3]);
        assert_eq!(ids(5), [5, 1, 3, 0, 4]);
        assert_eq!(ids(20).len(), row.len());
        assert!(ids(0).is_empty());
    }

    /// Greedy's choice without the log-softmax is the argmax of the log-softmax with the
    /// never-generated ids masked: ties to the lower id, a masked maximum skipped, and the
    /// log-probability the log-softmax gives.
    #[test]
    fn greedy_choices_are_the_masked_argmax_of_the_log_softmax() {
        let dev = Device::Cpu;
        let mut rows = Tensor::randn(0f32, 4., (5, 1001), &dev)
            .unwrap()
            .round()
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        rows[1][7] = 100.0; // a never-generated maximum
        rows[2][3] = 50.0; // two equal maxima
        rows[2][900] = 50.0;
        rows[3].fill(f32::NEG_INFINITY); // only -inf, one of them allowed
        rows[3][0] = 0.0;
        let never = [0u32, 7];
        let logits = Tensor::new(rows.clone(), &dev).unwrap();
        let choices = greedy_choices(&logits, &never).unwrap().unwrap();
        let log_probs = candle_nn::ops::log_softmax(&logits, D::Minus1)
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        for (row, (&(id, log_prob), log_probs)) in choices.iter().zip(&log_probs).enumerate() {
            let mut want = (0u32, f32::NEG_INFINITY);
            let mut first = true;
            for (j, &lp) in log_probs.iter().enumerate() {
                if !never.contains(&(j as u32)) && (first || lp > want.1) {
                    want = (j as u32, lp);
                    first = false;
                }
            }
            assert_eq!(id, want.0, "row {row}");
            assert!(
                (log_prob - want.1).abs() < 1e-5 || log_prob == want.1,
                "row {row}"
            );
        }
        assert_eq!(choices[2].0, 3);
        assert_ne!(choices[1].0, 7);
        // Off the fused path (a gradient, a GPU): none.
        let _composed = crate::kernels::composed_only();
        assert!(greedy_choices(&logits, &never).unwrap().is_none());
    }

    /// A NaN or +inf logit (damaged weights that overflow) makes every search's
    /// log-probability of that row a NaN, which the searches refuse, never an id skipped.
    #[test]
    fn a_row_with_a_nan_or_infinite_logit_has_no_finite_log_probabilities() {
        let dev = Device::Cpu;
        for bad in [f32::NAN, -f32::NAN, f32::INFINITY] {
            let mut row = vec![0.5f32; 300];
            row[123] = bad;
            row.extend([0.5f32; 300]);
            let logits = Tensor::from_vec(row, (2, 300), &dev).unwrap();
            let greedy = greedy_choices(&logits, &[0]).unwrap().unwrap();
            assert!(greedy[0].1.is_nan(), "{bad}: {:?}", greedy[0]);
            assert!(greedy[1].1.is_finite());
            let top = top_log_probs(&logits, 4).unwrap();
            assert!(
                top[0].iter().all(|(_, lp)| lp.is_nan()),
                "{bad}: {:?}",
                top[0]
            );
            assert!(top[1].iter().all(|(_, lp)| lp.is_finite()));
            let log_probs = log_softmax_last_dim(&logits)
                .unwrap()
                .to_vec2::<f32>()
                .unwrap();
            assert!(log_probs[0].iter().all(|lp| lp.is_nan()), "{bad}");
        }
    }
}
