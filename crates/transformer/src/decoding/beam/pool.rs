//! The hypotheses a beam search keeps: the ended ones, best by length-normalised score, and
//! the best extensions of the open ones.

use super::super::Hypothesis;
use super::BeamSettings;
use crate::config::LengthNormalization;

/// The best `capacity` ended hypotheses by length-normalised score.
pub(super) struct FinishedPool {
    capacity: usize,
    alpha: f32,
    normalization: LengthNormalization,
    /// Prompt tokens counted in each hypothesis's length (see [`BeamSettings`]).
    prefix_in_length: usize,
    hypotheses: Vec<(f32, Hypothesis)>,
}

impl FinishedPool {
    pub(super) fn new(capacity: usize, settings: BeamSettings) -> Self {
        Self {
            capacity,
            alpha: settings.length_penalty,
            normalization: settings.normalization,
            prefix_in_length: settings.prefix_in_length,
            hypotheses: Vec::with_capacity(capacity + 1),
        }
    }

    pub(super) fn normalised(&self, hypothesis: &Hypothesis) -> f32 {
        let length = hypothesis.ids.len() + self.prefix_in_length;
        hypothesis.score() / self.normalization.divisor(length, self.alpha)
    }

    pub(super) fn offer(&mut self, hypothesis: Hypothesis) {
        let score = self.normalised(&hypothesis);
        self.hypotheses.push((score, hypothesis));
        self.hypotheses.sort_by(|a, b| b.0.total_cmp(&a.0));
        self.hypotheses.truncate(self.capacity);
    }

    /// Once full, the search is over when no open beam, scored at its current length, beats
    /// the worst ended hypothesis (the heuristic of Hugging Face's beam search; with one beam
    /// it makes beam search equal greedy decoding).
    pub(super) fn cannot_improve(&self, open: &[Hypothesis]) -> bool {
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
    pub(super) fn into_ranked(self) -> Vec<Hypothesis> {
        self.hypotheses.into_iter().map(|(_, h)| h).collect()
    }
}

/// The `count` best (beam, id, token log-prob) extensions by total log-prob, best first;
/// `rows[b]` holds beam b's `count` most likely next ids and their log-probs.
pub(super) fn best_candidates(
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
