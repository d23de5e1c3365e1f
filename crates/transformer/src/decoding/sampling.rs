//! Sampling: continues each row one token at a time on the model's cache, picking each token
//! greedily or by temperature and top-k, never `<pad>` or `<s>`. Any model family; the text
//! generator uses it.

use candle_core::{DType, Result};
use rand::distr::{weighted::WeightedIndex, Distribution};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::greedy::first_argmax;
use super::{DecodeInput, ABANDONED, NOT_A_NUMBER};
use crate::model::step::feed_prefix;
use crate::model::DecodingModel;

/// How `sample` picks each next token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// Logits are divided by it; 0 picks the most likely token (greedy).
    pub temperature: f64,
    /// Only the `top_k` most likely tokens are candidates; `None`: all.
    pub top_k: Option<usize>,
    pub seed: u64,
}

/// Continues every row of `input` by at most its `max_steps` tokens, stopping a row early
/// after `end`. Returns each row's new ids. Every row draws from its own stream seeded by
/// `sampling.seed`, so a row continues as it would alone, whatever else is in the batch.
pub fn sample(
    model: &dyn DecodingModel,
    input: &DecodeInput,
    sampling: Sampling,
) -> Result<Vec<Vec<u32>>> {
    let prompt = &input.prompt;
    let longest = input.longest()?;
    let mut state = model.start(prompt.source)?;
    let mut last = feed_prefix(model, prompt, &mut *state)?;
    let rows = prompt.rows()?;
    let mut rngs: Vec<ChaCha8Rng> = (0..rows)
        .map(|_| ChaCha8Rng::seed_from_u64(sampling.seed))
        .collect();
    let mut generated: Vec<Vec<u32>> = vec![Vec::new(); rows];
    let mut open: Vec<usize> = (0..rows).filter(|&r| input.max_steps[r] > 0).collect();
    if open.len() < rows {
        keep(&mut *state, &mut last, &open)?;
    }
    for _ in 0..longest {
        if open.is_empty() {
            break;
        }
        if !(input.still_wanted)() {
            candle_core::bail!("{ABANDONED}")
        }
        let logits = model.step(&last, &mut *state)?.to_dtype(DType::F32)?;
        let mut next = Vec::with_capacity(open.len());
        for (row_logits, &row) in logits.to_vec2::<f32>()?.iter_mut().zip(&open) {
            if row_logits.iter().any(|logit| !logit.is_finite()) {
                candle_core::bail!("{NOT_A_NUMBER}")
            }
            // As the other decoders: <pad> and <s> are never drawn (they would print as
            // nothing and use up the continuation).
            for &id in input.never {
                if let Some(logit) = row_logits.get_mut(id as usize) {
                    *logit = f32::NEG_INFINITY;
                }
            }
            let id = pick(row_logits, sampling, &mut rngs[row])?;
            generated[row].push(id);
            next.push(id);
        }
        let still_open: Vec<usize> = (0..open.len())
            .filter(|&i| {
                let row = open[i];
                input.end != Some(next[i]) && generated[row].len() < input.max_steps[row]
            })
            .collect();
        last = candle_core::Tensor::from_vec(next, (open.len(), 1), prompt.prefix.device())?;
        if still_open.len() < open.len() {
            keep(&mut *state, &mut last, &still_open)?;
        }
        open = still_open.iter().map(|&i| open[i]).collect();
    }
    Ok(generated)
}

/// Keeps the rows `kept` (positions among the current rows) of the state and of `last`.
fn keep(
    state: &mut dyn crate::model::DecodingState,
    last: &mut candle_core::Tensor,
    kept: &[usize],
) -> Result<()> {
    let rows: Vec<u32> = kept.iter().map(|&r| r as u32).collect();
    if rows.is_empty() {
        return Ok(());
    }
    state.reorder(&rows)?;
    *last = last.index_select(
        &candle_core::Tensor::new(rows.as_slice(), last.device())?,
        0,
    )?;
    Ok(())
}

/// One token from `logits` under `sampling`: the argmax (first on ties) at temperature 0,
/// else a draw from softmax(logits / T) restricted to the top k.
fn pick(logits: &[f32], sampling: Sampling, rng: &mut ChaCha8Rng) -> Result<u32> {
    if sampling.temperature <= 0.0 {
        return Ok(first_argmax(logits).0);
    }
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    order.truncate(sampling.top_k.unwrap_or(logits.len()).max(1));
    let top = logits[order[0]] as f64;
    let weights: Vec<f64> = order
        .iter()
        .map(|&i| ((logits[i] as f64 - top) / sampling.temperature).exp())
        .collect();
    let distribution = WeightedIndex::new(&weights)
        .map_err(|e| candle_core::Error::Msg(format!("sampling weights: {e}")))?;
    Ok(order[distribution.sample(rng)] as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampling(temperature: f64, top_k: Option<usize>) -> Sampling {
        Sampling {
            temperature,
            top_k,
            seed: 7,
        }
    }

    #[test]
    fn temperature_zero_is_the_argmax_and_top_1_is_too() {
        let logits = [0.1f32, 2.0, -1.0, 2.0];
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        assert_eq!(pick(&logits, sampling(0.0, None), &mut rng).unwrap(), 1);
        for _ in 0..20 {
            assert_eq!(pick(&logits, sampling(1.5, Some(1)), &mut rng).unwrap(), 1);
        }
    }

    #[test]
    fn top_k_never_draws_outside_the_k_most_likely() {
        let logits = [3.0f32, 2.9, 2.8, -5.0, 0.0];
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..500 {
            seen.insert(pick(&logits, sampling(1.0, Some(3)), &mut rng).unwrap());
        }
        assert_eq!(seen, [0, 1, 2].into_iter().collect());
    }

    #[test]
    fn draws_follow_the_softmax_of_logits_over_temperature() {
        // softmax([ln 3, 0] / 1) = (0.75, 0.25).
        let logits = [3f32.ln(), 0.0];
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let zeros = (0..20_000)
            .filter(|_| pick(&logits, sampling(1.0, None), &mut rng).unwrap() == 0)
            .count();
        assert!((zeros as f64 / 20_000.0 - 0.75).abs() < 0.015, "{zeros}");
    }
}
