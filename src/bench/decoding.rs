//! Workloads 4 and 5: decoding with the base model's shape and random weights, greedy one
//! sentence at a time, greedy and beam 5 over a batch (scripts/bench_torch.py and
//! scripts/bench_ct2.py decode the same sources for the same steps).

use std::time::Instant;

use candle_core::{Device, Tensor};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::Measurement;
use crate::config::{ComputeType, LengthNormalization, ModelConfig};
use crate::decoding::{always_wanted, beam_search, greedy_batch, BeamSettings, DecodeInput};
use crate::model::{masks, DecodingModel, Prompt, Source, TrainedWeights, VocabSizes};
use crate::tokenize::specials::NEVER_GENERATED;
use crate::tokenize::specials::{BOS_ID, PAD_ID};

/// How the decoding workloads decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeWorkload {
    /// Workload 4: one sentence at a time, greedy.
    GreedyOne,
    /// Workload 5a: 32 sentences in one batch, greedy.
    GreedyBatch,
    /// Workload 5b: 32 sentences, beam 5.
    Beam,
}

/// Source length, decoding steps, vocabulary and sentences of the decoding workloads.
pub const DECODE_SRC_LEN: usize = 20;
pub const DECODE_STEPS: usize = 30;
pub const DECODE_VOCAB: usize = 8000;

/// Workloads 4 and 5: the base model with random weights, `sentences` random sources of 20
/// ids, exactly 30 decoding steps each (no end symbol, as the reference's demo); its products
/// in `compute` (int8 quantized and bfloat16 packed as a checkpoint of these weights loads).
pub fn decoding(
    kind: DecodeWorkload,
    sentences: usize,
    device: &Device,
    compute: ComputeType,
) -> anyhow::Result<Measurement> {
    let cfg = ModelConfig::default();
    let vocab = VocabSizes {
        src: DECODE_VOCAB,
        tgt: DECODE_VOCAB,
    };
    // Plain tensors, not variables, served as `translate` loads them from a checkpoint.
    let weights = TrainedWeights::fresh(&cfg, vocab, 0, device)?;
    let tensors = (weights.named_tensors().into_iter())
        .map(|(name, tensor)| (name, tensor.detach()))
        .collect();
    let model = crate::checkpoint::model_from_tensors(&cfg, vocab, tensors, device, compute)?;
    drop(weights);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let ids: Vec<u32> = (0..sentences * DECODE_SRC_LEN)
        .map(|_| rng.random_range(4..DECODE_VOCAB as u32))
        .collect();
    let src = Tensor::from_vec(ids, (sentences, DECODE_SRC_LEN), device)?;
    // One sentence decoded first, untimed, to warm up.
    decode_rows(model.decoding(), &src.narrow(0, 0, 1)?, kind)?;
    let started = Instant::now();
    decode_rows(model.decoding(), &src, kind)?;
    let seconds = started.elapsed().as_secs_f64();
    let name = match kind {
        DecodeWorkload::GreedyOne => "greedy-1",
        DecodeWorkload::GreedyBatch => "greedy-32",
        DecodeWorkload::Beam => "beam5-32",
    };
    Ok(Measurement {
        workload: name.into(),
        seconds,
        work: sentences as f64,
        unit: "sentences".into(),
        flops: 0.0,
        ranks: None,
        collective_seconds: None,
        precision: compute_precision(compute),
    })
}

/// What `bench`'s JSON says of a decoding workload's products: the compute type, and for
/// bfloat16 the engine that ran them.
pub fn compute_precision(compute: ComputeType) -> Option<String> {
    match compute {
        ComputeType::Float32 => None,
        ComputeType::Int8 => Some("int8".into()),
        ComputeType::Bfloat16 => Some(format!(
            "bfloat16 on {}",
            crate::kernels::bf16::engine().name()
        )),
    }
}

/// Decodes every row of `src` for [`DECODE_STEPS`] steps (no end symbol), as `kind` says.
fn decode_rows(
    model: &dyn DecodingModel,
    src: &Tensor,
    kind: DecodeWorkload,
) -> anyhow::Result<()> {
    let decode = |src: &Tensor, beam: Option<BeamSettings>| -> anyhow::Result<()> {
        let rows = src.dim(0)?;
        let source = Source {
            mask: masks::padding_mask(src, PAD_ID)?,
            ids: src.clone(),
        };
        let prefix = Tensor::full(BOS_ID, (rows, 1), src.device())?;
        let max_steps = vec![DECODE_STEPS; rows];
        let input = DecodeInput {
            prompt: Prompt {
                source: Some(&source),
                prefix: &prefix,
            },
            max_steps: &max_steps,
            end: None,
            never: &NEVER_GENERATED,
            end_at_limit: false,
            still_wanted: &always_wanted,
        };
        match beam {
            Some(settings) => drop(beam_search(model, &input, settings)?),
            None => drop(greedy_batch(model, &input)?),
        }
        Ok(())
    };
    match kind {
        DecodeWorkload::GreedyBatch => decode(src, None),
        DecodeWorkload::GreedyOne => {
            (0..src.dim(0)?).try_for_each(|row| decode(&src.narrow(0, row, 1)?, None))
        }
        // All 32 sentences' beams in one decoder call per step, as `translate --beam` runs.
        DecodeWorkload::Beam => decode(
            src,
            Some(BeamSettings {
                beam: 5,
                length_penalty: 1.0,
                normalization: LengthNormalization::Gnmt,
                renormalize: false,
                n_best: 1,
                prefix_in_length: 0,
            }),
        ),
    }
}
