//! Greedy decoding as the reference's `greedy_decode` does it: encode once, then re-decode the
//! whole prefix at every step and append the most probable next word.

use candle_core::{Device, Result, Tensor};

use crate::model::{masks, EncoderDecoder, Mode};

/// A decoded sequence: ids after the start symbol and the Generator's log-probability of each.
#[derive(Debug, Clone, PartialEq)]
pub struct Hypothesis {
    pub ids: Vec<u32>,
    pub log_probs: Vec<f32>,
}

/// When greedy decoding stops.
#[derive(Debug, Clone, Copy)]
pub struct DecodeLimits {
    /// Most ids to generate.
    pub max_steps: usize,
    /// Stop after producing this id (it is kept in the hypothesis); `None` never stops early,
    /// as the reference's demo does.
    pub end: Option<u32>,
}

/// Greedily decodes one source sentence `src` `(1, src_len)` with mask `src_mask`
/// `(1, 1, src_len)`, starting from `start`. Ties go to the lowest id, as torch.max does.
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
    let mut hypothesis = Hypothesis {
        ids: Vec::new(),
        log_probs: Vec::new(),
    };
    for _ in 0..limits.max_steps {
        let log_probs = next_word_log_probs(model, &memory, src_mask, &prefix, device)?;
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

/// The Generator's log-probabilities `(tgt_vocab,)` for the word after `prefix`.
fn next_word_log_probs(
    model: &EncoderDecoder,
    memory: &Tensor,
    src_mask: &Tensor,
    prefix: &[u32],
    device: &Device,
) -> Result<Vec<f32>> {
    let ys = Tensor::from_slice(prefix, (1, prefix.len()), device)?;
    let tgt_mask = masks::subsequent_mask(prefix.len(), device)?;
    let hidden = model.decode(memory, src_mask, &ys, &tgt_mask, Mode::Eval)?;
    let last = hidden.narrow(1, prefix.len() - 1, 1)?.squeeze(1)?;
    model
        .generator()
        .forward(&last)?
        .squeeze(0)?
        .to_dtype(candle_core::DType::F32)?
        .to_vec1::<f32>()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_takes_the_first_of_equal_maxima() {
        assert_eq!(first_argmax(&[0.1, 0.5, 0.5, 0.2]), (1, 0.5));
    }
}
