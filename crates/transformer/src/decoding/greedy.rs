//! Greedy decoding: the reference's loop (re-decodes the whole prefix each step) and the
//! cached, batched one that translation uses; the teacher-forced log-probabilities that tests
//! and scoring read.

use candle_core::{DType, Result, Tensor, D};

use super::{DecodeInput, Hypothesis, ABANDONED, NOT_A_NUMBER};
use crate::kernels::log_softmax::{greedy_choices, log_softmax_last_dim};
use crate::model::step::feed_prefix;
use crate::model::{masks, DecodingModel, Mode, ModelFamily, TeacherForced};

/// The reference's `greedy_decode` for one row: every step re-runs the whole prefix through
/// the model's teacher-forced pass (no cache). Ties go to the lowest id, as torch.max does.
pub fn greedy_decode(model: &dyn ModelFamily, input: &DecodeInput) -> Result<Hypothesis> {
    let prompt = &input.prompt;
    let device = prompt.prefix.device();
    let mut prefix = prompt.prefix.squeeze(0)?.to_vec1::<u32>()?;
    let mut hypothesis = Hypothesis::empty();
    for _ in 0..input.longest()? {
        let ids = Tensor::from_slice(&prefix, (1, prefix.len()), device)?;
        let batch = match prompt.source {
            Some(source) => TeacherForced::WithSource {
                source: source.clone(),
                tgt_mask: masks::subsequent_mask(prefix.len(), device)?,
                tgt_in: ids,
            },
            None => TeacherForced::TargetOnly { ids },
        };
        let logits = model.logits(&batch, Mode::Eval)?;
        let last = logits.narrow(1, prefix.len() - 1, 1)?.squeeze(1)?;
        let log_probs = log_softmax_last_dim(&last)?.squeeze(0)?.to_vec1::<f32>()?;
        let (best, best_log_prob) = first_argmax(&log_probs);
        prefix.push(best);
        hypothesis.ids.push(best);
        hypothesis.log_probs.push(best_log_prob);
        if input.end == Some(best) {
            break;
        }
    }
    Ok(hypothesis)
}

/// Greedy decoding of a batch, one cached step per position. A row stops at `input.end`
/// (kept) and leaves the batch, so that the longest translation of a batch no longer costs a
/// step for every row; each keeps at most its own `max_steps`, and all stop after the
/// longest, or with an error at the first step where `still_wanted` says no.
///
/// The chosen ids and their log-probs stay on the device between checks: the host reads them,
/// and so learns which rows have ended, only every few steps on a GPU (each read waits for
/// the GPU to drain), at every step on the CPU (where it costs nothing).
pub fn greedy_batch(model: &dyn DecodingModel, input: &DecodeInput) -> Result<Vec<Hypothesis>> {
    let prompt = &input.prompt;
    let batch = prompt.rows()?;
    let device = prompt.prefix.device();
    let check_every = crate::device::steps_between_end_checks(device);
    let longest = input.longest()?;
    let mut state = model.start(prompt.source)?;
    let mut last = feed_prefix(model, prompt, &mut *state)?;
    let mut hypotheses = vec![Hypothesis::empty(); batch];
    // The row of each sentence still in the state, and the steps not yet read back.
    let mut sentences: Vec<usize> = (0..batch).collect();
    let mut unread: Vec<(Tensor, Tensor)> = Vec::new();
    let mut never_generated: Option<Tensor> = None;
    for step in 1..=longest {
        if !(input.still_wanted)() {
            candle_core::bail!("{ABANDONED}")
        }
        let logits = model.step(&last, &mut *state)?;
        let (best, log_prob) = match greedy_choices(&logits, input.never)? {
            // On the CPU: the best ids and their log-probabilities without the log-softmax.
            Some(choices) => {
                let (ids, log_probs): (Vec<u32>, Vec<f32>) = choices.into_iter().unzip();
                let rows = ids.len();
                (
                    Tensor::from_vec(ids, (rows, 1), device)?,
                    Tensor::from_vec(log_probs, (rows, 1), device)?,
                )
            }
            None => {
                let log_probs = log_softmax_last_dim(&logits)?;
                let never = match &never_generated {
                    Some(bias) => bias,
                    None => never_generated.insert(never_generated_bias(&log_probs, input.never)?),
                };
                let best = log_probs.broadcast_add(never)?.argmax_keepdim(D::Minus1)?;
                let log_prob = log_probs.gather(&best, D::Minus1)?;
                (best, log_prob)
            }
        };
        unread.push((best.clone(), log_prob));
        last = best;
        if step % check_every != 0 && step < longest {
            continue;
        }
        let open = read_steps(&mut unread, &sentences, &mut hypotheses, input.end)?;
        if open.is_empty() {
            break;
        }
        if open.len() < sentences.len() {
            state.reorder(&open)?;
            last = last.index_select(&Tensor::new(open.as_slice(), device)?, 0)?;
            sentences = open.iter().map(|&row| sentences[row as usize]).collect();
        }
    }
    for (hypothesis, &own_limit) in hypotheses.iter_mut().zip(input.max_steps) {
        hypothesis.ids.truncate(own_limit);
        hypothesis.log_probs.truncate(own_limit);
        if let (true, Some(end)) = (input.end_at_limit, input.end) {
            end_at_limit(hypothesis, own_limit, end);
        }
    }
    Ok(hypotheses)
}

/// A hypothesis that used all `limit` steps without ending gets `end` as its last id instead,
/// scored 0 (transformers' `forced_eos_token_id` leaves only `end`'s score, 0 in log space):
/// the id it replaces was chosen after every earlier one, so nothing else changes.
fn end_at_limit(hypothesis: &mut Hypothesis, limit: usize, end: u32) {
    if limit > 0 && hypothesis.ids.len() == limit && hypothesis.ids.last() != Some(&end) {
        hypothesis.ids[limit - 1] = end;
        hypothesis.log_probs[limit - 1] = 0.0;
    }
}

/// A row `(1, vocab)` of `log_probs`' dtype: minus infinity at the ids `never`, zero
/// elsewhere; added before the argmax, so that greedy decoding chooses as beam search does.
fn never_generated_bias(log_probs: &Tensor, never: &[u32]) -> Result<Tensor> {
    let vocab = log_probs.dim(D::Minus1)?;
    let mut bias = vec![0f32; vocab];
    for &id in never {
        if let Some(value) = bias.get_mut(id as usize) {
            *value = f32::NEG_INFINITY;
        }
    }
    Tensor::from_vec(bias, (1, vocab), log_probs.device())?.to_dtype(log_probs.dtype())
}

/// Appends the steps in `unread` (ids and log-probs `(rows, 1)` each) to the hypotheses of the
/// rows' `sentences`, up to and including each one's end symbol, and returns the rows that
/// have not ended.
fn read_steps(
    unread: &mut Vec<(Tensor, Tensor)>,
    sentences: &[usize],
    hypotheses: &mut [Hypothesis],
    end: Option<u32>,
) -> Result<Vec<u32>> {
    let (ids, scores): (Vec<Tensor>, Vec<Tensor>) = unread.drain(..).unzip();
    let ids = Tensor::cat(&ids, 1)?.to_vec2::<u32>()?;
    let scores = Tensor::cat(&scores, 1)?
        .to_dtype(DType::F32)?
        .to_vec2::<f32>()?;
    if scores.iter().flatten().any(|score| !score.is_finite()) {
        candle_core::bail!("{NOT_A_NUMBER}")
    }
    let mut open = Vec::with_capacity(sentences.len());
    for (row, (&sentence, (row_ids, row_scores))) in
        sentences.iter().zip(ids.iter().zip(&scores)).enumerate()
    {
        let hypothesis = &mut hypotheses[sentence];
        let ended_at = end.and_then(|end| row_ids.iter().position(|&id| id == end));
        let len = ended_at.map_or(row_ids.len(), |at| at + 1);
        hypothesis.ids.extend_from_slice(&row_ids[..len]);
        hypothesis.log_probs.extend_from_slice(&row_scores[..len]);
        if ended_at.is_none() {
            open.push(row as u32);
        }
    }
    Ok(open)
}

/// Index and value of the largest entry; the first one on ties.
pub(super) fn first_argmax(values: &[f32]) -> (u32, f32) {
    let mut best = (0u32, f32::NEG_INFINITY);
    for (i, &v) in values.iter().enumerate() {
        if v > best.1 {
            best = (i as u32, v);
        }
    }
    best
}

/// Log-probabilities `(batch, len, vocab)` of a teacher-forced target: for tests and scoring.
pub fn teacher_forced_log_probs(model: &dyn ModelFamily, batch: &TeacherForced) -> Result<Tensor> {
    log_softmax_last_dim(&model.logits(batch, Mode::Eval)?)
}

/// Cached log-probabilities `(batch, len, vocab)` of the same teacher-forced target
/// `prompt.prefix`, one incremental step per position: must equal
/// [`teacher_forced_log_probs`].
pub fn incremental_log_probs(
    model: &dyn DecodingModel,
    prompt: &crate::model::Prompt,
) -> Result<Tensor> {
    let mut state = model.start(prompt.source)?;
    let steps = (0..prompt.prefix.dim(1)?)
        .map(|t| log_softmax_last_dim(&model.step(&prompt.prefix.narrow(1, t, 1)?, &mut *state)?))
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
}
