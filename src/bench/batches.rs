//! The Multi30k batch file both benchmark sides read (`transformer bench export-multi30k`):
//! the first batches of epoch 1 as configs/multi30k-cpu.toml makes them, as safetensors of i64
//! ids (`b{i}.src`, `b{i}.tgt_in`, `b{i}.tgt_out`) with the vocabulary size in the metadata, so
//! that PyTorch trains on exactly the ids this tool does.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Context;
use candle_core::{DType, Device, Tensor};

use crate::config::Config;
use crate::corpus::read_corpus;
use crate::tokenize::specials::PAD_ID;
use crate::tokenize::Tokenizers;
use crate::training_data::{encode_pairs, PaddedBatch};

/// The config of workload 3, whose data pipeline the batches come from, relative to the
/// repository root (where the benchmark runs).
pub(super) const MULTI30K_CONFIG: &str = "configs/multi30k-cpu.toml";

/// Tokenizes Multi30k as configs/multi30k-cpu.toml does and writes the first `count` batches
/// of epoch 1 as `b{i}.src`, `b{i}.tgt_in`, `b{i}.tgt_out` (i64) with the vocabulary size.
pub fn export_multi30k_batches(path: &Path, count: usize) -> anyhow::Result<()> {
    let config = Config::load(Path::new(MULTI30K_CONFIG))?;
    let (pairs, _) = read_corpus(&config.data.train)?;
    let tokenizers = Tokenizers::learn(&config.data, &pairs)?;
    let (encoded, _) = encode_pairs(&pairs, &tokenizers, config.model.max_len)?;
    let t = &config.training;
    let corpus = crate::training_data::EncodedCorpus::from_pairs(
        &encoded,
        crate::training_data::IdWidth::U32,
    );
    let batches = crate::training_data::epoch_batches(&corpus, t.max_tokens, (t.seed, 0), PAD_ID);
    let mut tensors = Vec::new();
    for (i, batch) in batches.iter().take(count).enumerate() {
        let as_i64 = |ids: &[u32], cols: usize| -> anyhow::Result<Tensor> {
            let ids: Vec<i64> = ids.iter().map(|&id| i64::from(id)).collect();
            Ok(Tensor::from_vec(ids, (batch.size, cols), &Device::Cpu)?)
        };
        tensors.push((format!("b{i}.src"), as_i64(&batch.src, batch.src_len)?));
        tensors.push((
            format!("b{i}.tgt_in"),
            as_i64(&batch.tgt_in, batch.tgt_len)?,
        ));
        tensors.push((
            format!("b{i}.tgt_out"),
            as_i64(&batch.tgt_out, batch.tgt_len)?,
        ));
    }
    let vocab = tokenizers.tgt.vocab_size().to_string();
    let metadata = HashMap::from([("vocab".to_string(), vocab)]);
    safetensors::serialize_to_file(
        tensors.iter().map(|(n, t)| (n.as_str(), t)),
        Some(metadata),
        path,
    )?;
    Ok(())
}

pub(super) fn read_batches(path: &Path) -> anyhow::Result<(usize, Vec<PaddedBatch>)> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let (_, metadata) = safetensors::SafeTensors::read_metadata(&bytes)?;
    let vocab: usize = metadata
        .metadata()
        .as_ref()
        .and_then(|m| m.get("vocab"))
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("{} has no vocab metadata", path.display()))?;
    let tensors = candle_core::safetensors::load_buffer(&bytes, &Device::Cpu)?;
    let ids = |name: String| -> anyhow::Result<(usize, usize, Vec<u32>)> {
        let t = tensors
            .get(&name)
            .with_context(|| format!("{name} missing"))?;
        let (rows, cols) = t.dims2()?;
        let flat = t.to_dtype(DType::U32)?.flatten_all()?.to_vec1::<u32>()?;
        Ok((rows, cols, flat))
    };
    let mut batches = Vec::new();
    for i in 0.. {
        if !tensors.contains_key(&format!("b{i}.src")) {
            break;
        }
        let (size, src_len, src) = ids(format!("b{i}.src"))?;
        let (_, tgt_len, tgt_in) = ids(format!("b{i}.tgt_in"))?;
        let (_, _, tgt_out) = ids(format!("b{i}.tgt_out"))?;
        let ntokens = tgt_out.iter().filter(|&&id| id != PAD_ID).count();
        batches.push(PaddedBatch {
            size,
            src,
            src_len,
            tgt_in,
            tgt_out,
            tgt_len,
            ntokens,
        });
    }
    Ok((vocab, batches))
}
