//! Beam search (the GNMT length penalty, an ended-hypothesis pool and Hugging Face's
//! stopping rule): for one sentence, and for a batch of sentences whose beams all go through
//! one decoder call per step. Both make the same choices: a sentence's search never looks at
//! another sentence's rows.

use candle_core::{Result, Tensor};

mod batch;
mod pool;

use super::{DecodeInput, Hypothesis, ABANDONED, NOT_A_NUMBER};
use crate::config::LengthNormalization;
use crate::kernels::log_softmax::top_log_probs;
use crate::model::step::feed_prefix;
use crate::model::{DecodingModel, DecodingState};
use batch::BatchSearch;
use pool::{best_candidates, FinishedPool};

/// Beam search settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BeamSettings {
    pub beam: usize,
    /// Length penalty exponent alpha: hypotheses are ranked by log-prob / divisor, the
    /// divisor `normalization`'s of the length and alpha; 0 ranks by raw log-prob.
    pub length_penalty: f32,
    /// GNMT's ((5 + len) / 6)^alpha, or transformers' len^alpha.
    pub normalization: LengthNormalization,
    /// Each step's log-probabilities renormalised over the ids the search may generate
    /// (transformers' `renormalize_logits`).
    pub renormalize: bool,
    /// Hypotheses kept per row (at most `beam`), best first.
    pub n_best: usize,
    /// Tokens of the prompt after the decoder's start that count in a hypothesis's length:
    /// a target language forced as the first token (M2M100's, NLLB's), which transformers
    /// counts as generated (scored 0), is 1; otherwise 0.
    pub prefix_in_length: usize,
}

/// One sentence's search between steps: its open beams and its ended hypotheses.
struct Search {
    beams: Vec<Hypothesis>,
    finished: FinishedPool,
}

/// What one step did to a search.
enum Advance {
    /// Goes on with these beams, each extending the beam `parents[i]` of the step before.
    Continue {
        beams: Vec<Hypothesis>,
        parents: Vec<usize>,
    },
    /// Stopped: nothing open is left, or nothing open can beat the full pool.
    Stop,
}

impl Search {
    fn new(settings: BeamSettings) -> Self {
        Self {
            beams: vec![Hypothesis::empty()],
            finished: FinishedPool::new(settings.beam.max(1), settings),
        }
    }

    /// Extends the beams by the best candidates of `rows` (per beam, its `2 k` most likely
    /// next ids with their log-probs, from [`step_candidates`]): the `k` best that do not end
    /// stay open, endings among the `k` best go to the pool.
    fn advance(&mut self, rows: &[Vec<(u32, f32)>], k: usize, end: Option<u32>) -> Advance {
        let candidates = best_candidates(&self.beams, rows, 2 * k);
        let mut next = Vec::with_capacity(k);
        let mut parents = Vec::with_capacity(k);
        for (rank, (parent, id, log_prob)) in candidates.into_iter().enumerate() {
            let mut hypothesis = self.beams[parent].clone();
            hypothesis.ids.push(id);
            hypothesis.log_probs.push(log_prob);
            if end == Some(id) {
                // An ending counts only when it ranks among the k best extensions.
                if rank < k {
                    self.finished.offer(hypothesis);
                }
            } else {
                parents.push(parent);
                next.push(hypothesis);
                if next.len() == k {
                    break;
                }
            }
        }
        if next.is_empty() || self.finished.cannot_improve(&next) {
            return Advance::Stop;
        }
        Advance::Continue {
            beams: next,
            parents,
        }
    }

    /// The `n` best hypotheses, best first: those in the pool by length-normalised score
    /// (the ended ones, and the open ones of a search the step limit cut), then, when fewer
    /// than `n`, the best open ones.
    fn into_n_best(self, n: usize, settings: BeamSettings) -> Vec<Hypothesis> {
        let mut ranked = self.finished.into_ranked();
        ranked.truncate(n);
        if ranked.len() < n {
            let mut open = FinishedPool::new(self.beams.len(), settings);
            self.beams.into_iter().for_each(|b| open.offer(b));
            ranked.extend(open.into_ranked().into_iter().take(n - ranked.len()));
        }
        if ranked.is_empty() {
            ranked.push(Hypothesis::empty());
        }
        ranked
    }
}

/// Each row's `count` most likely next ids and their log-probs after `last` `(rows, 1)`,
/// none of them one of `never` (their log-probs stay normalised over the whole
/// vocabulary, as fairseq's and Hugging Face's masked ones do).
fn step_candidates(
    model: &dyn DecodingModel,
    last: &Tensor,
    state: &mut dyn DecodingState,
    (count, never): (usize, &[u32]),
    renormalize: bool,
) -> Result<Vec<Vec<(u32, f32)>>> {
    let logits = model.step(last, state)?;
    let mut rows = top_log_probs(&logits, count + never.len())?;
    if rows
        .iter()
        .flatten()
        .any(|(_, log_prob)| log_prob.is_nan() || *log_prob == f32::INFINITY)
    {
        candle_core::bail!("{NOT_A_NUMBER}")
    }
    if renormalize && !never.is_empty() {
        renormalize_without(&logits, &mut rows, never)?;
    }
    for row in &mut rows {
        // Minus infinity is an id the row may not say (a vocabulary map's other rows').
        row.retain(|(id, log_prob)| !never.contains(id) && *log_prob > f32::NEG_INFINITY);
        row.truncate(count);
    }
    Ok(rows)
}

/// Shifts each row's log-probabilities so that they sum to one over the ids other than
/// `never` (transformers' `renormalize_logits` after its bad-words processor): by
/// -ln(1 - p(never)), where each never-generated id's probability comes from its logit and
/// the row's log-sum-exp (read off the row's best id: its logit less its log-probability).
fn renormalize_without(logits: &Tensor, rows: &mut [Vec<(u32, f32)>], never: &[u32]) -> Result<()> {
    let width = 1 + never.len();
    let ids: Vec<u32> = rows
        .iter()
        .flat_map(|row| std::iter::once(row[0].0).chain(never.iter().copied()))
        .collect();
    let ids = Tensor::from_vec(ids, (rows.len(), width), logits.device())?;
    let picked = logits
        .contiguous()?
        .gather(&ids, 1)?
        .to_dtype(candle_core::DType::F32)?
        .to_vec2::<f32>()?;
    for (row, picked) in rows.iter_mut().zip(picked) {
        let log_sum_exp = f64::from(picked[0]) - f64::from(row[0].1);
        let removed: f64 = picked[1..]
            .iter()
            .map(|&logit| (f64::from(logit) - log_sum_exp).exp())
            .sum();
        let shift = -(1.0 - removed).max(f64::MIN_POSITIVE).ln();
        for entry in row.iter_mut() {
            entry.1 = (f64::from(entry.1) + shift) as f32;
        }
    }
    Ok(())
}

/// The last id of each beam, the start symbol for an empty one.
fn last_ids(beams: &[Hypothesis], start: u32) -> Vec<u32> {
    beams
        .iter()
        .map(|b| *b.ids.last().unwrap_or(&start))
        .collect()
}

/// Beam search for a batch of rows (sentences, or prompts), row `i` searching for at most
/// `input.max_steps[i]` steps: every open beam of every row goes through one model step at a
/// time, and a row whose search stops leaves the batch. `beam` hypotheses stay open per row;
/// those that end go to a pool of the `beam` best by length-normalised score, and a row's
/// search stops once its pool is full and no open beam can beat it. Each row's hypotheses
/// (`n_best`, best first) are the ones a batch of that row alone finds (up to the rounding of
/// batched products); with `beam == 1` the best is greedy decoding's. Stops with an error at
/// the first step where `still_wanted` says no.
pub fn beam_search(
    model: &dyn DecodingModel,
    input: &DecodeInput,
    settings: BeamSettings,
) -> Result<Vec<Vec<Hypothesis>>> {
    let prompt = &input.prompt;
    input.longest()?;
    let mut state = model.start(prompt.source)?;
    let first = feed_prefix(model, prompt, &mut *state)?.to_vec2::<u32>()?;
    let mut batch = BatchSearch::new(first, input.max_steps, settings);
    batch.drop_rows_without_steps(&mut *state)?;
    while !batch.active.is_empty() {
        if !(input.still_wanted)() {
            candle_core::bail!("{ABANDONED}")
        }
        let ids = batch.last_ids();
        let last = Tensor::from_vec(ids, (batch.open_rows(), 1), prompt.prefix.device())?;
        let mut candidates = step_candidates(
            model,
            &last,
            &mut *state,
            (2 * batch.k, input.never),
            settings.renormalize,
        )?;
        if let (true, Some(end)) = (input.end_at_limit, input.end) {
            batch.end_rows_at_their_limit(&mut candidates, end);
        }
        let keep_rows = batch.advance(&candidates, input.end);
        if batch.active.is_empty() {
            break;
        }
        state.reorder(&keep_rows)?;
    }
    Ok(batch.into_results())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// transformers' `renormalize_logits`: once the never-generated ids are gone, the rest
    /// sum to one again; ids the top list holds and the order are unchanged.
    #[test]
    fn renormalising_leaves_the_other_ids_summing_to_one() {
        let logits = [0.5f32, 3.0, -1.0, 2.0];
        let log_sum_exp = logits.iter().map(|l| l.exp()).sum::<f32>().ln();
        let tensor = Tensor::new(&[logits], &candle_core::Device::Cpu).unwrap();
        let mut rows = top_log_probs(&tensor, 4).unwrap();
        assert_eq!(rows[0][0].0, 1);
        renormalize_without(&tensor, &mut rows, &[3]).unwrap();
        let kept: Vec<(u32, f32)> = rows[0].iter().copied().filter(|(id, _)| *id != 3).collect();
        let total: f32 = kept.iter().map(|(_, lp)| lp.exp()).sum();
        assert!((total - 1.0).abs() < 1e-6, "{total}");
        let expected = logits[1] - log_sum_exp - (1.0 - (logits[3] - log_sum_exp).exp()).ln();
        assert!((rows[0][0].1 - expected).abs() < 1e-6);
        assert_eq!(
            kept.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            [1, 0, 2]
        );
    }

    #[test]
    fn the_length_penalty_is_one_at_length_one_and_grows() {
        for normalization in [LengthNormalization::Gnmt, LengthNormalization::Length] {
            assert_eq!(normalization.divisor(1, 0.6), 1.0);
            assert!(normalization.divisor(10, 0.6) > 1.0);
            assert_eq!(normalization.divisor(10, 0.0), 1.0);
        }
        assert_eq!(LengthNormalization::Length.divisor(4, 1.0), 4.0);
        assert_eq!(LengthNormalization::Gnmt.divisor(7, 1.0), 2.0);
    }
}
