//! The speed benchmark's workloads on this side (scripts/bench_torch.py runs the same ones in
//! PyTorch): training steps on the toy pairs, the copy task and Multi30k batches, and greedy
//! and beam decoding with the base model. Each returns the seconds the timed part took, the
//! work it did, and the matrix-product FLOPs of that work.

use std::path::Path;
use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarMap;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

mod batches;
mod decoding;
mod marian;
pub use batches::export_multi30k_batches;
use batches::{multi30k_config, read_batches};
pub use decoding::{decoding, DecodeWorkload};
pub use marian::{marian_decoding, MarianWorkload};

use crate::config::{ComputeDtype, Config, ModelConfig};
use crate::corpus::{read_corpus, SentencePair};
use crate::distributed::{Collective, SingleProcess};
use crate::model::{TrainedWeights, VocabSizes};
use crate::tokenize::Tokenizers;
use crate::train::precision::Precision;
use crate::train::{Trainer, TrainingData};
use crate::training_data::{copy_task_batch, encode_pairs, EncodedCorpus, IdWidth, PaddedBatch};

/// Training steps run before timing starts (allocator and caches warm up).
const WARMUP_STEPS: usize = 2;

/// What one workload run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    pub workload: String,
    pub seconds: f64,
    /// Units of work done in `seconds`.
    pub work: f64,
    /// What `work` counts: steps, target tokens, sentences.
    pub unit: String,
    /// Matrix-product FLOPs in `seconds` (training: forward + backward, 3x forward).
    pub flops: f64,
    /// A distributed run's ranks and the seconds of `seconds` spent summing gradients.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranks: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collective_seconds: Option<f64>,
    /// What the products computed in (`f32`, `bf16 products (avx512-bf16)`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precision: Option<String>,
}

/// Matrix-product FLOPs of one forward pass of the encoder-decoder on a padded batch.
pub fn forward_flops(cfg: &ModelConfig, batch: usize, src: usize, tgt: usize, vocab: usize) -> f64 {
    let (b, s, t) = (batch as f64, src as f64, tgt as f64);
    let (d, ff, n) = (cfg.d_model as f64, cfg.d_ff as f64, cfg.layers as f64);
    let linear = |rows: f64, inner: f64, out: f64| 2.0 * rows * inner * out;
    // Scores Q K^T and the weighted sum of values: 2 products of q x k x d per sentence.
    let attend = |q: f64, k: f64| 2.0 * 2.0 * b * q * k * d;
    let encoder = 4.0 * linear(b * s, d, d) + attend(s, s) + 2.0 * linear(b * s, d, ff);
    let decoder = 4.0 * linear(b * t, d, d)
        + attend(t, t)
        + 2.0 * linear(b * t, d, d)
        + 2.0 * linear(b * s, d, d)
        + attend(t, s)
        + 2.0 * linear(b * t, d, ff);
    n * (encoder + decoder) + linear(b * t, d, vocab as f64)
}

/// A word tokenizer pair with exactly `size` ids (the four specials included) on each side.
fn synthetic_tokenizers(size: usize) -> anyhow::Result<Tokenizers> {
    let words: Vec<String> = (4..size).map(|i| format!("w{i}")).collect();
    let text = words.join(" ");
    let pair = SentencePair {
        src: text.clone(),
        tgt: text,
    };
    Tokenizers::learn(&Config::default().data, &[pair])
}

fn trainer(
    config: Config,
    vocab: usize,
    device: &Device,
    collective: Box<dyn Collective>,
) -> anyhow::Result<Trainer> {
    let data = TrainingData {
        pairs: EncodedCorpus::from_pairs(&[], IdWidth::U32).into(),
        tokenizers: synthetic_tokenizers(vocab)?,
        valid: None,
    };
    Trainer::joined(config, data, device, collective)
}

/// Times `steps` optimiser steps after the warm-up, each on a group of `accumulate` batches
/// per rank from `batch_for`: consecutive ones, so that one process accumulating R batches
/// and R ranks taking one each train on the same batches.
fn time_training(
    name: &str,
    trainer: &mut Trainer,
    (steps, accumulate): (usize, usize),
    unit: &str,
    batch_for: &mut dyn FnMut(usize) -> PaddedBatch,
) -> anyhow::Result<Measurement> {
    let world = trainer.collective().world();
    let group = world * accumulate.max(1);
    let mut group_for =
        |i: usize| -> Vec<PaddedBatch> { (0..group).map(|b| batch_for(i * group + b)).collect() };
    for i in 0..WARMUP_STEPS {
        trainer.step_on(&group_for(i))?;
    }
    let cfg = trainer.config().model.clone();
    let vocab = trainer.data().tokenizers.tgt.vocab_size();
    let before = trainer.collective_seconds();
    let (mut seconds, mut tokens, mut flops) = (0.0, 0usize, 0.0);
    for i in 0..steps {
        let group = group_for(WARMUP_STEPS + i);
        let started = Instant::now();
        trainer.step_on(&group)?;
        seconds += started.elapsed().as_secs_f64();
        for batch in &group {
            tokens += batch.ntokens;
            flops += 3.0 * forward_flops(&cfg, batch.size, batch.src_len, batch.tgt_len, vocab);
        }
    }
    let distributed = world > 1;
    let work = if unit == "steps" {
        steps as f64
    } else {
        tokens as f64
    };
    Ok(Measurement {
        workload: name.into(),
        seconds,
        work,
        unit: unit.into(),
        flops,
        ranks: distributed.then_some(world),
        collective_seconds: distributed.then(|| trainer.collective_seconds() - before),
        precision: Some(trainer.precision().describe()),
    })
}

/// Workload 1: the built-in base config (N=6, d_model=512) on the two toy pairs.
pub fn toy_training(
    steps: usize,
    dtype: ComputeDtype,
    device: &Device,
) -> anyhow::Result<Measurement> {
    let mut config = Config::builtin_base()?;
    config.training.dtype = dtype;
    let (pairs, _) = read_corpus(&config.data.train)?;
    let tokenizers = Tokenizers::learn(&config.data, &pairs)?;
    let (encoded, _) = encode_pairs(&pairs, &tokenizers, config.model.max_len)?;
    let data = TrainingData {
        pairs: EncodedCorpus::from_pairs(&encoded, IdWidth::U32).into(),
        tokenizers,
        valid: None,
    };
    let mut trainer = Trainer::new(config, data, device)?;
    let batch = PaddedBatch::new(&encoded.iter().collect::<Vec<_>>());
    time_training("toy-train", &mut trainer, (steps, 1), "steps", &mut |_| {
        batch.clone()
    })
}

/// Workload 2: The Annotated Transformer's copy task: vocabulary 11, batches of 80 random
/// sequences of 10 symbols starting with 1, N=2, d_model 512, d_ff 2048, h 8, no smoothing.
pub fn copy_task(
    steps: usize,
    dtype: ComputeDtype,
    device: &Device,
) -> anyhow::Result<Measurement> {
    let mut config = Config::default();
    config.training.dtype = dtype;
    config.model.layers = 2;
    config.training.label_smoothing = 0.0;
    config.training.warmup = 400;
    let mut trainer = trainer(config, 11, device, Box::new(SingleProcess))?;
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let mut batch_for = |_| copy_task_batch(&mut rng, 80);
    time_training("copy", &mut trainer, (steps, 1), "tokens", &mut batch_for)
}

/// Workload 3: the configs/multi30k-cpu.toml model on real Multi30k batches, read from the
/// file `export_multi30k_batches` wrote (so both implementations train on the same ids).
/// Each step takes `accumulate` batches per rank of `collective` (one process, or mpirun's).
pub fn multi30k_training(
    batches: &Path,
    steps: usize,
    accumulate: usize,
    dtype: ComputeDtype,
    device: &Device,
    collective: Box<dyn Collective>,
) -> anyhow::Result<Measurement> {
    let mut config = multi30k_config()?;
    let (vocab, loaded) = read_batches(batches, config.data.vocab_size)?;
    config.training.dtype = dtype;
    let needed = (WARMUP_STEPS + steps) * collective.world() * accumulate.max(1);
    let mut trainer = trainer(config, vocab, device, collective)?;
    anyhow::ensure!(
        loaded.len() >= needed,
        "{} holds {} batches; {needed} are needed (write more with export-multi30k --steps)",
        batches.display(),
        loaded.len(),
    );
    time_training(
        "multi30k",
        &mut trainer,
        (steps, accumulate),
        "tokens",
        &mut |i| loaded[i].clone(),
    )
}

/// The communication of one data-parallel step alone: `steps` sums over the ranks of a flat
/// buffer as large as configs/multi30k-cpu.toml's gradients (built here, untrained, to count
/// them), after one untimed sum.
pub fn all_reduce(
    steps: usize,
    device: &Device,
    collective: &dyn Collective,
) -> anyhow::Result<Measurement> {
    let config = multi30k_config()?;
    let vocab = VocabSizes {
        src: config.data.vocab_size,
        tgt: config.data.vocab_size,
    };
    let weights = TrainedWeights::fresh(&config.model, vocab, 0, device)?;
    let floats: usize = weights.vars().iter().map(|v| v.elem_count()).sum();
    let flat = Tensor::ones(floats, DType::F32, device)?;
    collective.sum(&flat)?;
    let started = Instant::now();
    for _ in 0..steps {
        collective.sum(&flat)?;
    }
    Ok(Measurement {
        workload: "allreduce".into(),
        seconds: started.elapsed().as_secs_f64(),
        work: (steps * floats * 4) as f64,
        unit: "bytes".into(),
        flops: 0.0,
        ranks: Some(collective.world()),
        collective_seconds: None,
        precision: None,
    })
}

/// Rows, inner and output size of the matrix-product ceiling: a feed-forward layer's first
/// product on an 800-token batch (the copy task's shape).
pub const MATMUL_SHAPE: (usize, usize, usize) = (800, 512, 2048);

/// Workload 0, a ceiling rather than a task: `x W^T` of the shape above, `reps` times, through
/// the same fused linear layer as training. What one matrix product reaches on this machine,
/// against which the training workloads' FLOP/s can be read.
pub fn matmul_ceiling(
    reps: usize,
    dtype: ComputeDtype,
    device: &Device,
) -> anyhow::Result<Measurement> {
    let (rows, inner, out) = MATMUL_SHAPE;
    // The layer's weight is a variable, as in training: in bf16 its products are bf16's.
    let precision = Precision::plan(dtype, device)?;
    let _scope = precision.scope();
    let varmap = VarMap::new();
    let vb = candle_nn::VarBuilder::from_varmap(&varmap, DType::F32, device);
    let layer = crate::model::weights::linear::Linear::new(inner, out, vb)?;
    let xs = Tensor::randn(0f32, 1.0, (rows, inner), device)?;
    for _ in 0..3 {
        layer.forward(&xs)?;
    }
    device.synchronize()?;
    let started = Instant::now();
    for _ in 0..reps {
        layer.forward(&xs)?;
    }
    device.synchronize()?;
    let seconds = started.elapsed().as_secs_f64();
    Ok(Measurement {
        workload: "matmul".into(),
        seconds,
        work: reps as f64,
        unit: "products".into(),
        flops: reps as f64 * 2.0 * (rows * inner * out) as f64,
        ranks: None,
        collective_seconds: None,
        precision: Some(precision.describe()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forward_flops_count_every_matrix_product_of_a_one_layer_model() {
        let cfg = ModelConfig {
            layers: 1,
            d_model: 4,
            d_ff: 8,
            heads: 2,
            ..ModelConfig::default()
        };
        // b=1, s=3, t=2, vocab 5, by hand:
        // encoder: 4 projections 4*2*3*4*4=384, attention 2*2*3*3*4=144, FFN 2*2*3*4*8=384
        // decoder: self 4*2*2*4*4=256 + 2*2*2*2*4=64; cross q,o 2*2*2*4*4=128,
        // k,v 2*2*3*4*4=192, attention 2*2*2*3*4=96; FFN 2*2*2*4*8=256; generator 2*2*4*5=80
        let want = 384.0 + 144.0 + 384.0 + 256.0 + 64.0 + 128.0 + 192.0 + 96.0 + 256.0 + 80.0;
        assert_eq!(forward_flops(&cfg, 1, 3, 2, 5), want);
    }
}
