//! Sampling from the decoder-only language model: continues a prompt one token at a time
//! with the model's KV cache, picking each token greedily or by temperature and top-k.

use candle_core::{Result, Tensor};
use rand::distr::{weighted::WeightedIndex, Distribution};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::greedy::first_argmax;
use crate::model::decoder_only::DecoderOnly;

/// How `sample` picks each next token.
#[derive(Debug, Clone, Copy)]
pub struct Sampling {
    /// Logits are divided by it; 0 picks the most likely token (greedy).
    pub temperature: f64,
    /// Only the `top_k` most likely tokens are candidates; `None`: all.
    pub top_k: Option<usize>,
    pub seed: u64,
}

/// Continues `prompt` (at least one id) by `max_new` tokens with the KV cache, stopping early
/// after `end`. Returns the new ids. Stops before the position table runs out.
pub fn sample(
    model: &DecoderOnly,
    prompt: &[u32],
    max_new: usize,
    end: Option<u32>,
    max_positions: usize,
    sampling: Sampling,
    device: &candle_core::Device,
) -> Result<Vec<u32>> {
    let Some((&last, context)) = prompt.split_last() else {
        candle_core::bail!("generation needs a prompt of at least one token")
    };
    let mut rng = ChaCha8Rng::seed_from_u64(sampling.seed);
    let mut state = model.start();
    for &id in context {
        model.step(&Tensor::new(&[[id]], device)?, &mut state)?;
    }
    let mut next = last;
    let mut generated = Vec::with_capacity(max_new);
    while generated.len() < max_new && state.len < max_positions {
        let logits = model.step(&Tensor::new(&[[next]], device)?, &mut state)?;
        let logits = logits.squeeze(0)?.to_dtype(candle_core::DType::F32)?;
        next = pick(&logits.to_vec1::<f32>()?, sampling, &mut rng)?;
        generated.push(next);
        if end == Some(next) {
            break;
        }
    }
    Ok(generated)
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
