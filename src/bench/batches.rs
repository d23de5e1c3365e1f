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
/// repository root (where the benchmark runs; elsewhere the copy built into the binary).
const MULTI30K_CONFIG: &str = "configs/multi30k-cpu.toml";

/// Workload 3's config: [`MULTI30K_CONFIG`], or the shipped one where it is not a file.
pub(super) fn multi30k_config() -> anyhow::Result<Config> {
    Ok(Config::load_or_shipped(Path::new(MULTI30K_CONFIG))?.0)
}

/// Tokenizes Multi30k as configs/multi30k-cpu.toml does and writes the first `count` batches
/// of epoch 1 as `b{i}.src`, `b{i}.tgt_in`, `b{i}.tgt_out` (i64) with the vocabulary size.
pub fn export_multi30k_batches(path: &Path, count: usize) -> anyhow::Result<()> {
    let config = multi30k_config()?;
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

/// The batches of a file [`export_multi30k_batches`] wrote, and their vocabulary size (at
/// most `most_vocab`, the config's); every tensor is checked to be i64 ids of the shapes a
/// batch has, each one of the vocabulary's (the file may come from anywhere).
pub(super) fn read_batches(
    path: &Path,
    most_vocab: usize,
) -> anyhow::Result<(usize, Vec<PaddedBatch>)> {
    let file = path.display();
    let bytes = std::fs::read(path).with_context(|| format!("reading {file}"))?;
    let (_, metadata) = safetensors::SafeTensors::read_metadata(&bytes)
        .with_context(|| format!("{file} is not a safetensors batch file"))?;
    let stated = metadata
        .metadata()
        .as_ref()
        .and_then(|m| m.get("vocab"))
        .with_context(|| format!("{file} has no vocab metadata"))?;
    let vocab = stated
        .parse::<usize>()
        .ok()
        .filter(|v| (5..=most_vocab).contains(v))
        .with_context(|| {
            format!(
                "{file}: vocab metadata {stated:?} is not a vocabulary size from 5 to \
                 {most_vocab} (the config's)"
            )
        })?;
    let tensors = candle_core::safetensors::load_buffer(&bytes, &Device::Cpu)
        .with_context(|| format!("{file} is not a safetensors batch file"))?;
    let ids = |name: String| -> anyhow::Result<(usize, usize, Vec<u32>)> {
        let t = tensors
            .get(&name)
            .with_context(|| format!("{file} has no tensor {name}"))?;
        let (rows, cols) = t
            .dims2()
            .with_context(|| format!("{file}: {name} is not a matrix"))?;
        if t.dtype() != DType::I64 || rows == 0 || cols == 0 {
            anyhow::bail!(
                "{file}: {name} is {:?} {:?}, where a batch holds i64 ids, at least 1 x 1",
                t.dtype(),
                t.dims()
            )
        }
        let wide = t.flatten_all()?.to_vec1::<i64>()?;
        let flat = wide
            .iter()
            .map(|&id| u32::try_from(id).ok().filter(|&id| (id as usize) < vocab))
            .collect::<Option<Vec<u32>>>();
        let Some(flat) = flat else {
            let bad = wide.iter().find(|&&id| id < 0 || id as usize >= vocab);
            anyhow::bail!(
                "{file}: {name} holds id {}, outside the vocabulary of {vocab}; write the \
                 file again with `transformer bench export-multi30k`",
                bad.copied().unwrap_or_default()
            )
        };
        Ok((rows, cols, flat))
    };
    let mut batches = Vec::new();
    for i in 0.. {
        if !tensors.contains_key(&format!("b{i}.src")) {
            break;
        }
        let (size, src_len, src) = ids(format!("b{i}.src"))?;
        let (in_rows, tgt_len, tgt_in) = ids(format!("b{i}.tgt_in"))?;
        let (out_rows, out_len, tgt_out) = ids(format!("b{i}.tgt_out"))?;
        if (in_rows, out_rows, out_len) != (size, size, tgt_len) {
            anyhow::bail!(
                "{file}: batch {i}'s shapes do not fit: src {size} x {src_len}, tgt_in \
                 {in_rows} x {tgt_len}, tgt_out {out_rows} x {out_len}"
            )
        }
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
