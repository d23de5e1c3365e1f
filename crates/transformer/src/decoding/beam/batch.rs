//! The beam search of a batch: every sentence's search side by side, one decoder call a step
//! for all their beams, each sentence's rows left out once its search ends.

use candle_core::Result;

use super::super::Hypothesis;
use super::{last_ids, Advance, BeamSettings, Search};
use crate::model::DecodingState;

/// Every row's search, and which of them are still open.
pub(super) struct BatchSearch<'a> {
    pub(super) settings: BeamSettings,
    pub(super) k: usize,
    pub(super) max_steps: &'a [usize],
    /// Each row's last prefix id, which its first step feeds.
    pub(super) start: Vec<u32>,
    pub(super) searches: Vec<Search>,
    pub(super) results: Vec<Option<Vec<Hypothesis>>>,
    /// The rows still searching, in the order of their beams in the decoding state, each
    /// with its first beam's row there; a row's beams are consecutive, in order.
    pub(super) active: Vec<(usize, usize)>,
    pub(super) steps: usize,
}

impl<'a> BatchSearch<'a> {
    pub(super) fn new(
        first: Vec<Vec<u32>>,
        max_steps: &'a [usize],
        settings: BeamSettings,
    ) -> Self {
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
    pub(super) fn drop_rows_without_steps(&mut self, state: &mut dyn DecodingState) -> Result<()> {
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
    pub(super) fn end_rows_at_their_limit(&self, candidates: &mut [Vec<(u32, f32)>], end: u32) {
        for &(row, first_beam) in &self.active {
            if self.steps + 1 == self.max_steps[row] {
                let beams = self.searches[row].beams.len();
                for beam in &mut candidates[first_beam..first_beam + beams] {
                    *beam = vec![(end, 0.0)];
                }
            }
        }
    }

    pub(super) fn open_rows(&self) -> usize {
        self.active
            .iter()
            .map(|&(row, _)| self.searches[row].beams.len())
            .sum()
    }

    /// The id each open beam feeds next, in the state's row order.
    pub(super) fn last_ids(&self) -> Vec<u32> {
        self.active
            .iter()
            .flat_map(|&(row, _)| last_ids(&self.searches[row].beams, self.start[row]))
            .collect()
    }

    /// Advances every open row by its beams' `candidates`; returns the state rows the next
    /// step keeps, in order.
    pub(super) fn advance(&mut self, candidates: &[Vec<(u32, f32)>], end: Option<u32>) -> Vec<u32> {
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
    pub(super) fn into_results(self) -> Vec<Vec<Hypothesis>> {
        self.results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| vec![Hypothesis::empty()]))
            .collect()
    }
}
