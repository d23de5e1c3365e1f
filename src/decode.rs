//! Decoding: the reference's greedy loop (re-decodes the whole prefix each step), and the
//! cached decoders used for translation: batched greedy and beam search, which keep each
//! layer's keys/values and project the encoder memory once per sentence.

use candle_core::{DType, Result, Tensor, D};

use crate::model::{masks, DecoderState, EncoderDecoder, Mode};

/// A decoded sequence: ids after the start symbol and the Generator's log-probability of each.
#[derive(Debug, Clone, PartialEq)]
pub struct Hypothesis {
    pub ids: Vec<u32>,
    pub log_probs: Vec<f32>,
}

impl Hypothesis {
    fn empty() -> Self {
        Self {
            ids: Vec::new(),
            log_probs: Vec::new(),
        }
    }

    pub fn score(&self) -> f32 {
        self.log_probs.iter().sum()
    }
}

/// When decoding stops.
#[derive(Debug, Clone, Copy)]
pub struct DecodeLimits {
    /// Most ids to generate.
    pub max_steps: usize,
    /// Stop after producing this id (it is kept in the hypothesis); `None` never stops early,
    /// as the reference's demo does.
    pub end: Option<u32>,
}

/// The reference's `greedy_decode` for one sentence `src` `(1, src_len)`, mask `(1, 1, src_len)`:
/// every step re-decodes the whole prefix. Ties go to the lowest id, as torch.max does.
pub fn greedy_decode(
    model: &EncoderDecoder,
    src: &Tensor,
    src_mask: &Tensor,
    start: u32,
    limits: DecodeLimits,
) -> Result<Hypothesis> {
    let device = src.device();
    let memory = model.encode(src, src_mask, Mode::Eval)?;
    let mut prefix = vec![start];
    let mut hypothesis = Hypothesis::empty();
    for _ in 0..limits.max_steps {
        let ys = Tensor::from_slice(&prefix, (1, prefix.len()), device)?;
        let tgt_mask = masks::subsequent_mask(prefix.len(), device)?;
        let hidden = model.decode(&memory, src_mask, &ys, &tgt_mask, Mode::Eval)?;
        let last = hidden.narrow(1, prefix.len() - 1, 1)?.squeeze(1)?;
        let log_probs = model
            .generator()
            .forward(&last)?
            .squeeze(0)?
            .to_vec1::<f32>()?;
        let (best, best_log_prob) = first_argmax(&log_probs);
        prefix.push(best);
        hypothesis.ids.push(best);
        hypothesis.log_probs.push(best_log_prob);
        if limits.end == Some(best) {
            break;
        }
    }
    Ok(hypothesis)
}

/// Greedy decoding of a batch `src` `(batch, src_len)` with padding mask `src_mask`
/// `(batch, 1, src_len)`, one cached decoder step per position. Stops when every sentence has
/// produced `limits.end` or after `limits.max_steps`.
///
/// The chosen ids and their log-probs stay on the device; the host reads whether every
/// sentence has ended only every few steps on a GPU (each read waits for the GPU to drain),
/// at every step on the CPU (where it costs nothing), and reads the ids once at the end.
pub fn greedy_batch(
    model: &EncoderDecoder,
    src: &Tensor,
    src_mask: &Tensor,
    start: u32,
    limits: DecodeLimits,
) -> Result<Vec<Hypothesis>> {
    let batch = src.dim(0)?;
    let device = src.device();
    let check_every = crate::device::steps_between_end_checks(device);
    let memory = model.encode(src, src_mask, Mode::Eval)?;
    let mut state = model.start_decoding(&memory, src_mask)?;
    let mut ids = Vec::with_capacity(limits.max_steps);
    let mut scores = Vec::with_capacity(limits.max_steps);
    // 1 where a sentence has produced the end symbol.
    let mut ended = Tensor::zeros((batch, 1), DType::U8, device)?;
    let mut last = Tensor::full(start, (batch, 1), device)?;
    for step in 1..=limits.max_steps {
        let log_probs = step_log_probs(model, &last, &mut state)?;
        let best = log_probs.argmax_keepdim(D::Minus1)?;
        scores.push(log_probs.gather(&best, D::Minus1)?);
        ids.push(best.clone());
        if let Some(end) = limits.end {
            ended = ended.maximum(&best.eq(end)?)?;
            if step % check_every == 0 && ended.min_all()?.to_scalar::<u8>()? == 1 {
                break;
            }
        }
        last = best;
    }
    if ids.is_empty() {
        return Ok(vec![Hypothesis::empty(); batch]);
    }
    let ids = Tensor::cat(&ids, 1)?.to_vec2::<u32>()?;
    let scores = Tensor::cat(&scores, 1)?
        .to_dtype(DType::F32)?
        .to_vec2::<f32>()?;
    Ok(ids
        .into_iter()
        .zip(scores)
        .map(|(row_ids, row_scores)| {
            // Each sentence ends at its first end symbol, kept; later steps are discarded.
            let len = limits
                .end
                .and_then(|end| row_ids.iter().position(|&id| id == end))
                .map_or(row_ids.len(), |at| at + 1);
            Hypothesis {
                ids: row_ids[..len].to_vec(),
                log_probs: row_scores[..len].to_vec(),
            }
        })
        .collect())
}

/// The Generator's log-probabilities `(batch, vocab)` for the position after `last` `(batch, 1)`.
fn step_log_probs(
    model: &EncoderDecoder,
    last: &Tensor,
    state: &mut DecoderState,
) -> Result<Tensor> {
    let hidden = model.decode_step(last, state)?;
    model.generator().forward(&hidden.squeeze(1)?)
}

/// Beam search settings.
#[derive(Debug, Clone, Copy)]
pub struct BeamSettings {
    pub beam: usize,
    /// GNMT length penalty exponent alpha: hypotheses are ranked by
    /// log-prob / ((5 + length) / 6)^alpha; 0 ranks by raw log-prob.
    pub length_penalty: f32,
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
    let mut beams = vec![Hypothesis::empty()];
    let mut finished = FinishedPool::new(k, settings.length_penalty);
    for _ in 0..limits.max_steps {
        let last_ids: Vec<u32> = beams
            .iter()
            .map(|b| *b.ids.last().unwrap_or(&start))
            .collect();
        let last = Tensor::from_vec(last_ids, (beams.len(), 1), device)?;
        let log_probs = step_log_probs(model, &last, &mut state)?;
        let candidates = best_candidates(&beams, &log_probs, 2 * k)?;
        let mut next = Vec::with_capacity(k);
        let mut parents = Vec::with_capacity(k);
        for (rank, (parent, id, log_prob)) in candidates.into_iter().enumerate() {
            let mut hypothesis = beams[parent].clone();
            hypothesis.ids.push(id);
            hypothesis.log_probs.push(log_prob);
            if limits.end == Some(id) {
                // An ending counts only when it ranks among the k best extensions.
                if rank < k {
                    finished.offer(hypothesis);
                }
            } else {
                parents.push(parent as u32);
                next.push(hypothesis);
                if next.len() == k {
                    break;
                }
            }
        }
        if next.is_empty() || finished.cannot_improve(&next) {
            break;
        }
        state = state.select(&Tensor::new(parents.as_slice(), device)?)?;
        beams = next;
    }
    Ok(finished.best().unwrap_or_else(|| {
        // Nothing ended within max_steps: the best open hypothesis.
        let mut open = FinishedPool::new(1, settings.length_penalty);
        beams.into_iter().for_each(|b| open.offer(b));
        open.best().unwrap_or_else(Hypothesis::empty)
    }))
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

    fn best(self) -> Option<Hypothesis> {
        self.hypotheses.into_iter().next().map(|(_, h)| h)
    }
}

/// ((5 + length) / 6)^alpha, Wu et al. 2016.
fn length_penalty(length: usize, alpha: f32) -> f32 {
    ((5.0 + length as f32) / 6.0).powf(alpha)
}

/// The `count` best (beam, id, token log-prob) extensions by total log-prob, best first.
fn best_candidates(
    beams: &[Hypothesis],
    log_probs: &Tensor,
    count: usize,
) -> Result<Vec<(usize, u32, f32)>> {
    let rows = log_probs.to_dtype(DType::F32)?.to_vec2::<f32>()?;
    let mut candidates: Vec<(f32, usize, u32, f32)> = Vec::new();
    for (beam, row) in rows.iter().enumerate() {
        let base = beams[beam].score();
        let mut ids: Vec<u32> = (0..row.len() as u32).collect();
        let keep = count.min(ids.len());
        // Highest log-prob first; the lower id first on ties, as greedy decoding does.
        let order = |a: &u32, b: &u32| row[*b as usize].total_cmp(&row[*a as usize]).then(a.cmp(b));
        ids.select_nth_unstable_by(keep - 1, order);
        ids.truncate(keep);
        candidates.extend(
            ids.into_iter()
                .map(|id| (base + row[id as usize], beam, id, row[id as usize])),
        );
    }
    candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    candidates.truncate(count);
    Ok(candidates
        .into_iter()
        .map(|(_, beam, id, lp)| (beam, id, lp))
        .collect())
}

/// Index and value of the largest entry; the first one on ties.
fn first_argmax(values: &[f32]) -> (u32, f32) {
    let mut best = (0u32, f32::NEG_INFINITY);
    for (i, &v) in values.iter().enumerate() {
        if v > best.1 {
            best = (i as u32, v);
        }
    }
    best
}

/// Log-probabilities `(batch, len, vocab)` of a teacher-forced target: for tests and scoring.
pub fn teacher_forced_log_probs(
    model: &EncoderDecoder,
    src: &Tensor,
    src_mask: &Tensor,
    tgt_in: &Tensor,
    tgt_mask: &Tensor,
) -> Result<Tensor> {
    let hidden = model.forward(src, tgt_in, src_mask, tgt_mask, Mode::Eval)?;
    model.generator().forward(&hidden)
}

/// Cached log-probabilities `(batch, len, vocab)` of the same teacher-forced target, one
/// incremental step per position: must equal `teacher_forced_log_probs`.
pub fn incremental_log_probs(
    model: &EncoderDecoder,
    src: &Tensor,
    src_mask: &Tensor,
    tgt_in: &Tensor,
) -> Result<Tensor> {
    let memory = model.encode(src, src_mask, Mode::Eval)?;
    let mut state = model.start_decoding(&memory, src_mask)?;
    let steps = (0..tgt_in.dim(1)?)
        .map(|t| step_log_probs(model, &tgt_in.narrow(1, t, 1)?, &mut state))
        .collect::<Result<Vec<_>>>()?;
    Tensor::stack(&steps, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_takes_the_first_of_equal_maxima() {
        assert_eq!(first_argmax(&[0.1, 0.5, 0.5, 0.2]), (1, 0.5));
    }

    #[test]
    fn the_length_penalty_is_one_at_length_one_and_grows() {
        assert_eq!(length_penalty(1, 0.6), 1.0);
        assert!(length_penalty(10, 0.6) > 1.0);
        assert_eq!(length_penalty(10, 0.0), 1.0);
    }
}
