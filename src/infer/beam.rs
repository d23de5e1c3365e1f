//! Beam search (the GNMT length penalty, an ended-hypothesis pool and Hugging Face's
//! stopping rule): for one sentence, and for a batch of sentences whose beams all go through
//! one decoder call per step. Both make the same choices: a sentence's search never looks at
//! another sentence's rows.

use candle_core::{Result, Tensor};

use super::{
    always_wanted, DecodeLimits, Hypothesis, StillWanted, ABANDONED, NEVER_GENERATED, NOT_A_NUMBER,
};
use crate::kernels::log_softmax::top_log_probs;
use crate::model::{DecoderState, EncoderDecoder, Mode};

/// Beam search settings.
#[derive(Debug, Clone, Copy)]
pub struct BeamSettings {
    pub beam: usize,
    /// GNMT length penalty exponent alpha: hypotheses are ranked by
    /// log-prob / ((5 + length) / 6)^alpha; 0 ranks by raw log-prob.
    pub length_penalty: f32,
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
            finished: FinishedPool::new(settings.beam.max(1), settings.length_penalty),
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

    /// The `n` best hypotheses, best first: the ended ones by length-normalised score, then,
    /// when fewer than `n` ended, the best open ones (so the best of all is the one ended
    /// hypothesis, or the best open one when nothing ended).
    fn into_n_best(self, n: usize, alpha: f32) -> Vec<Hypothesis> {
        let mut ranked = self.finished.into_ranked();
        ranked.truncate(n);
        if ranked.len() < n {
            let mut open = FinishedPool::new(self.beams.len(), alpha);
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
/// none of them one of [`NEVER_GENERATED`] (their log-probs stay normalised over the whole
/// vocabulary, as fairseq's and Hugging Face's masked ones do).
fn step_candidates(
    model: &EncoderDecoder,
    last: &Tensor,
    state: &mut DecoderState,
    count: usize,
) -> Result<Vec<Vec<(u32, f32)>>> {
    let hidden = model.step(last, state)?;
    let logits = model.generator().logits(&hidden.squeeze(1)?)?;
    let mut rows = top_log_probs(&logits, count + NEVER_GENERATED.len())?;
    if rows
        .iter()
        .flatten()
        .any(|(_, log_prob)| !log_prob.is_finite())
    {
        candle_core::bail!("{NOT_A_NUMBER}")
    }
    for row in &mut rows {
        row.retain(|(id, _)| !NEVER_GENERATED.contains(id));
        row.truncate(count);
    }
    Ok(rows)
}

/// The last id of each beam, the start symbol for an empty one.
fn last_ids(beams: &[Hypothesis], start: u32) -> Vec<u32> {
    beams
        .iter()
        .map(|b| *b.ids.last().unwrap_or(&start))
        .collect()
}

/// Beam search for one sentence `src` `(1, src_len)`, with the decoder cache reordered as beams
/// are chosen. `beam` hypotheses stay open; those that end go to a pool of the `beam` best by
/// length-normalised score, and the search stops early once the pool is full and no open
/// beam can beat it (or after `limits.max_steps`). With `beam == 1` this is greedy decoding.
pub fn beam_search(
    model: &EncoderDecoder,
    src: &Tensor,
    src_mask: &Tensor,
    start: u32,
    limits: DecodeLimits,
    settings: BeamSettings,
) -> Result<Hypothesis> {
    let device = src.device();
    let k = settings.beam.max(1);
    let memory = model.encode(src, src_mask, Mode::Eval)?;
    let mut state = model.start_decoding(&memory, src_mask)?;
    let mut search = Search::new(settings);
    for _ in 0..limits.max_steps {
        let ids = last_ids(&search.beams, start);
        let last = Tensor::from_vec(ids, (search.beams.len(), 1), device)?;
        let rows = step_candidates(model, &last, &mut state, 2 * k)?;
        match search.advance(&rows, k, limits.end) {
            Advance::Stop => break,
            Advance::Continue { beams, parents } => {
                let parents: Vec<u32> = parents.into_iter().map(|p| p as u32).collect();
                state.reorder(&parents)?;
                search.beams = beams;
            }
        }
    }
    Ok(search.into_n_best(1, settings.length_penalty).remove(0))
}

/// Beam search for a batch of sentences `src` `(batch, src_len)` (padded, `src_mask`
/// `(batch, 1, src_len)`), sentence `i` searching for at most `max_steps[i]` steps: every open
/// beam of every sentence goes through one decoder call per step, and a sentence that stops
/// leaves the batch. Each sentence's hypothesis is the one [`beam_search`] finds for it alone
/// (up to the rounding of batched products).
pub fn beam_search_batch(
    model: &EncoderDecoder,
    src: &Tensor,
    src_mask: &Tensor,
    start: u32,
    limits: (&[usize], Option<u32>),
    settings: BeamSettings,
) -> Result<Vec<Hypothesis>> {
    let n_best = beam_search_batch_n_best(
        model,
        src,
        src_mask,
        start,
        limits,
        settings,
        1,
        &always_wanted,
    )?;
    Ok(n_best.into_iter().map(|mut best| best.remove(0)).collect())
}

/// [`beam_search_batch`] keeping each sentence's `n_best` best hypotheses (at most `beam`),
/// best first: the first is the one `beam_search_batch` returns. Stops with an error at the
/// first step where `still_wanted` says no.
#[allow(clippy::too_many_arguments)] // issue 27 gathers them into one decoding contract
pub fn beam_search_batch_n_best(
    model: &EncoderDecoder,
    src: &Tensor,
    src_mask: &Tensor,
    start: u32,
    (max_steps, end): (&[usize], Option<u32>),
    settings: BeamSettings,
    n_best: usize,
    still_wanted: StillWanted,
) -> Result<Vec<Vec<Hypothesis>>> {
    let n_best = n_best.clamp(1, settings.beam.max(1));
    let device = src.device();
    let batch = src.dim(0)?;
    if max_steps.len() != batch {
        candle_core::bail!(
            "beam search: {} step limits for {batch} sentences",
            max_steps.len()
        )
    }
    let k = settings.beam.max(1);
    let memory = model.encode(src, src_mask, Mode::Eval)?;
    let mut state = model.start_decoding(&memory, src_mask)?;
    let mut searches: Vec<Search> = (0..batch).map(|_| Search::new(settings)).collect();
    let mut results: Vec<Option<Vec<Hypothesis>>> = vec![None; batch];
    // The sentences still searching, in the order of their rows in the decoder state, each
    // with its first row; a sentence's rows are its beams, in order. A sentence allowed no
    // step at all is done before the first.
    let searching: Vec<usize> = (0..batch).filter(|&s| max_steps[s] > 0).collect();
    if searching.len() < batch {
        let rows: Vec<u32> = searching.iter().map(|&s| s as u32).collect();
        state.reorder(&rows)?;
    }
    let mut active: Vec<(usize, usize)> = searching
        .into_iter()
        .enumerate()
        .map(|(row, s)| (s, row))
        .collect();
    let mut step = 0;
    while !active.is_empty() {
        if !still_wanted() {
            candle_core::bail!("{ABANDONED}")
        }
        let ids: Vec<u32> = active
            .iter()
            .flat_map(|&(s, _)| last_ids(&searches[s].beams, start))
            .collect();
        let row_count = ids.len();
        let last = Tensor::from_vec(ids, (row_count, 1), device)?;
        let log_probs = step_candidates(model, &last, &mut state, 2 * k)?;
        step += 1;
        let mut next_active = Vec::with_capacity(active.len());
        let mut keep_rows: Vec<u32> = Vec::new();
        for &(s, first_row) in &active {
            let search = &mut searches[s];
            let own = &log_probs[first_row..first_row + search.beams.len()];
            let going_on = match search.advance(own, k, end) {
                Advance::Stop => false,
                Advance::Continue { beams, parents } => {
                    let more = step < max_steps[s];
                    if more {
                        next_active.push((s, keep_rows.len()));
                        keep_rows.extend(parents.iter().map(|&p| (first_row + p) as u32));
                    }
                    search.beams = beams;
                    more
                }
            };
            if !going_on {
                let done = std::mem::replace(search, Search::new(settings));
                results[s] = Some(done.into_n_best(n_best, settings.length_penalty));
            }
        }
        if next_active.is_empty() {
            break;
        }
        state.reorder(&keep_rows)?;
        active = next_active;
    }
    // A sentence allowed no step gets the empty hypothesis, as `beam_search` gives it.
    Ok(results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| vec![Hypothesis::empty()]))
        .collect())
}

/// The best `capacity` ended hypotheses by length-normalised score.
struct FinishedPool {
    capacity: usize,
    alpha: f32,
    hypotheses: Vec<(f32, Hypothesis)>,
}

impl FinishedPool {
    fn new(capacity: usize, alpha: f32) -> Self {
        Self {
            capacity,
            alpha,
            hypotheses: Vec::with_capacity(capacity + 1),
        }
    }

    fn normalised(&self, hypothesis: &Hypothesis) -> f32 {
        hypothesis.score() / length_penalty(hypothesis.ids.len(), self.alpha)
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

/// ((5 + length) / 6)^alpha, Wu et al. 2016.
fn length_penalty(length: usize, alpha: f32) -> f32 {
    ((5.0 + length as f32) / 6.0).powf(alpha)
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

    #[test]
    fn the_length_penalty_is_one_at_length_one_and_grows() {
        assert_eq!(length_penalty(1, 0.6), 1.0);
        assert!(length_penalty(10, 0.6) > 1.0);
        assert_eq!(length_penalty(10, 0.0), 1.0);
    }
}
