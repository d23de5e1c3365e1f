//! Beam search (the GNMT length penalty, an ended-hypothesis pool and Hugging Face's
//! stopping rule): for one sentence, and for a batch of sentences whose beams all go through
//! one decoder call per step. Both make the same choices: a sentence's search never looks at
//! another sentence's rows.

use candle_core::{Result, Tensor};

use super::{DecodeInput, Hypothesis, ABANDONED, NOT_A_NUMBER};
use crate::config::LengthNormalization;
use crate::kernels::log_softmax::top_log_probs;
use crate::model::decoding::feed_prefix;
use crate::model::{DecodingModel, DecodingState};

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
        .any(|(_, log_prob)| !log_prob.is_finite())
    {
        candle_core::bail!("{NOT_A_NUMBER}")
    }
    if renormalize && !never.is_empty() {
        renormalize_without(&logits, &mut rows, never)?;
    }
    for row in &mut rows {
        row.retain(|(id, _)| !never.contains(id));
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

/// Every row's search, and which of them are still open.
struct BatchSearch<'a> {
    settings: BeamSettings,
    k: usize,
    max_steps: &'a [usize],
    /// Each row's last prefix id, which its first step feeds.
    start: Vec<u32>,
    searches: Vec<Search>,
    results: Vec<Option<Vec<Hypothesis>>>,
    /// The rows still searching, in the order of their beams in the decoding state, each
    /// with its first beam's row there; a row's beams are consecutive, in order.
    active: Vec<(usize, usize)>,
    steps: usize,
}

impl<'a> BatchSearch<'a> {
    fn new(first: Vec<Vec<u32>>, max_steps: &'a [usize], settings: BeamSettings) -> Self {
        let rows = first.len();
        Self {
            settings,
            k: settings.beam.max(1),
            max_steps,
            start: first.into_iter().map(|row| row[0]).collect(),
            searches: (0..rows).map(|_| Search::new(settings)).collect(),
            results: vec![None; rows],
            active: (0..rows).map(|row| (row, row)).collect(),
            steps: 0,
        }
    }

    /// A row allowed no step at all is done before the first (with the empty hypothesis).
    fn drop_rows_without_steps(&mut self, state: &mut dyn DecodingState) -> Result<()> {
        let searching: Vec<usize> = (0..self.searches.len())
            .filter(|&row| self.max_steps[row] > 0)
            .collect();
        if searching.len() < self.searches.len() {
            let rows: Vec<u32> = searching.iter().map(|&row| row as u32).collect();
            state.reorder(&rows)?;
        }
        self.active = searching
            .into_iter()
            .enumerate()
            .map(|(first, row)| (row, first))
            .collect();
        Ok(())
    }

    /// Gives every beam of a row about to take its last step `end` as its only candidate,
    /// scored 0 (transformers' `forced_eos_token_id`, which leaves only `end`'s score, 0 in
    /// log space, standing).
    fn end_rows_at_their_limit(&self, candidates: &mut [Vec<(u32, f32)>], end: u32) {
        for &(row, first_beam) in &self.active {
            if self.steps + 1 == self.max_steps[row] {
                let beams = self.searches[row].beams.len();
                for beam in &mut candidates[first_beam..first_beam + beams] {
                    *beam = vec![(end, 0.0)];
                }
            }
        }
    }

    fn open_rows(&self) -> usize {
        self.active
            .iter()
            .map(|&(row, _)| self.searches[row].beams.len())
            .sum()
    }

    /// The id each open beam feeds next, in the state's row order.
    fn last_ids(&self) -> Vec<u32> {
        self.active
            .iter()
            .flat_map(|&(row, _)| last_ids(&self.searches[row].beams, self.start[row]))
            .collect()
    }

    /// Advances every open row by its beams' `candidates`; returns the state rows the next
    /// step keeps, in order.
    fn advance(&mut self, candidates: &[Vec<(u32, f32)>], end: Option<u32>) -> Vec<u32> {
        self.steps += 1;
        let mut next_active = Vec::with_capacity(self.active.len());
        let mut keep_rows: Vec<u32> = Vec::new();
        for &(row, first_beam) in &self.active {
            let search = &mut self.searches[row];
            let own = &candidates[first_beam..first_beam + search.beams.len()];
            let going_on = match search.advance(own, self.k, end) {
                Advance::Stop => false,
                Advance::Continue { beams, parents } => {
                    let more = self.steps < self.max_steps[row];
                    if more {
                        next_active.push((row, keep_rows.len()));
                        keep_rows.extend(parents.iter().map(|&p| (first_beam + p) as u32));
                        search.beams = beams;
                    } else {
                        // Cut by the step limit: the open beams compete with the ended ones
                        // on length-normalised score, as Hugging Face's `finalize` adds them
                        // (an ended one is not better for having ended).
                        search.beams.clear();
                        beams.into_iter().for_each(|b| search.finished.offer(b));
                    }
                    more
                }
            };
            if !going_on {
                let done = std::mem::replace(search, Search::new(self.settings));
                let n_best = self.settings.n_best.clamp(1, self.k);
                self.results[row] = Some(done.into_n_best(n_best, self.settings));
            }
        }
        self.active = next_active;
        keep_rows
    }

    /// A row allowed no step gets the empty hypothesis.
    fn into_results(self) -> Vec<Vec<Hypothesis>> {
        self.results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| vec![Hypothesis::empty()]))
            .collect()
    }
}

/// The best `capacity` ended hypotheses by length-normalised score.
struct FinishedPool {
    capacity: usize,
    alpha: f32,
    normalization: LengthNormalization,
    hypotheses: Vec<(f32, Hypothesis)>,
}

impl FinishedPool {
    fn new(capacity: usize, settings: BeamSettings) -> Self {
        Self {
            capacity,
            alpha: settings.length_penalty,
            normalization: settings.normalization,
            hypotheses: Vec::with_capacity(capacity + 1),
        }
    }

    fn normalised(&self, hypothesis: &Hypothesis) -> f32 {
        hypothesis.score() / self.normalization.divisor(hypothesis.ids.len(), self.alpha)
    }

    fn offer(&mut self, hypothesis: Hypothesis) {
        let score = self.normalised(&hypothesis);
        self.hypotheses.push((score, hypothesis));
        self.hypotheses.sort_by(|a, b| b.0.total_cmp(&a.0));
        self.hypotheses.truncate(self.capacity);
    }

    /// Once full, the search is over when no open beam, scored at its current length, beats
    /// the worst ended hypothesis (the heuristic of Hugging Face's beam search; with one beam
    /// it makes beam search equal greedy decoding).
    fn cannot_improve(&self, open: &[Hypothesis]) -> bool {
        let Some(worst) = self.hypotheses.last().map(|h| h.0) else {
            return false;
        };
        let best_open = open
            .iter()
            .map(|h| self.normalised(h))
            .fold(f32::NEG_INFINITY, f32::max);
        self.hypotheses.len() == self.capacity && best_open <= worst
    }

    /// The hypotheses, best first.
    fn into_ranked(self) -> Vec<Hypothesis> {
        self.hypotheses.into_iter().map(|(_, h)| h).collect()
    }
}

/// The `count` best (beam, id, token log-prob) extensions by total log-prob, best first;
/// `rows[b]` holds beam b's `count` most likely next ids and their log-probs.
fn best_candidates(
    beams: &[Hypothesis],
    rows: &[Vec<(u32, f32)>],
    count: usize,
) -> Vec<(usize, u32, f32)> {
    let mut candidates: Vec<(f32, usize, u32, f32)> = Vec::new();
    for (beam, row) in rows.iter().enumerate() {
        let base = beams[beam].score();
        candidates.extend(
            row.iter()
                .take(count)
                .map(|&(id, log_prob)| (base + log_prob, beam, id, log_prob)),
        );
    }
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    candidates.truncate(count);
    candidates
        .into_iter()
        .map(|(_, beam, id, lp)| (beam, id, lp))
        .collect()
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
