//! `transformer quantize`: a checkpoint's int8 copy (see [`super::int8_file`]), about a
//! quarter of the float one, which every command loads directly and decodes in int8.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use candle_core::{DType, Device};

use super::lock::WhenHeld;
use super::replace::{self, Kind, OutRefused};
use super::strict::build_model_int8_served;
use super::write::{sync_dir, write_synced, Destination};
use super::{int8_file, read_parts, resolve, CONFIG_FILE, MODEL_FILE};
use crate::config::ComputeType;

/// What a quantization wrote.
pub struct Quantized {
    /// The checkpoint read.
    pub source: PathBuf,
    /// Matrices stored as int8, and the bytes of the weights before and after.
    pub int8_matrices: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// Writes the int8 copy of the checkpoint at `source` (ours, or a Hugging Face MarianMT
/// directory, written in our layout) as the checkpoint directory `out`; an existing `out` is
/// replaced only with `overwrite`, and only when it is an earlier quantized or averaged
/// checkpoint, never the source or a checkpoint training resumes from.
pub fn quantize(source: &Path, out: &Path, overwrite: bool) -> anyhow::Result<Quantized> {
    let dir = resolve(source)?;
    replace::check_before_lock(out, &[source, &dir])?;
    // Taken before anything is checked: what `out` holds cannot change until the save.
    let destination = Destination::lock(out, WhenHeld::BRIEFLY)?;
    replace::check(out, &[source, &dir], Kind::Int8)?;
    if !overwrite && std::fs::symlink_metadata(out).is_ok() {
        return Err(OutRefused::Exists {
            out: out.to_path_buf(),
        }
        .into());
    }
    let device = Device::Cpu;
    let (mut config, tokenizers, weights) = read_parts(&dir, &device)?;
    weights.refuse_int8("is quantized already")?;
    let bytes_before = std::fs::metadata(&weights.path).map_or(0, |m| m.len());
    let (model, served) = build_model_int8_served(&config, &tokenizers, weights, &device)?;
    // A shared matrix is stored once (its other names left out, as the loader expects), and
    // the fixed position tables not at all: the loader computes them.
    let tied: HashSet<String> = model
        .tied_names()
        .into_iter()
        .chain(model.buffers().into_iter().map(|(name, _)| name))
        .collect();
    let mut seen = HashSet::new();
    let mut tensors: Vec<_> = served
        .into_iter()
        .filter(|(name, _)| !tied.contains(name) && seen.insert(name.clone()))
        .collect();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    let int8_matrices = tensors
        .iter()
        .filter(|(_, t)| t.dtype() == DType::U8)
        .count();
    config.decode.compute_type = ComputeType::Int8;
    let metadata = HashMap::from([
        ("format".to_string(), "pt".to_string()),
        (
            super::tensor_file::MODEL_KEY.to_string(),
            super::tensor_file::model_record(&config.model)?,
        ),
        (
            int8_file::QUANTIZED_FROM.to_string(),
            dir.canonicalize()
                .unwrap_or(dir.clone())
                .display()
                .to_string(),
        ),
    ]);
    destination.save_with(|staging| {
        write_synced(&staging.join(CONFIG_FILE), config.to_toml()?.as_bytes())?;
        for (name, bytes) in tokenizers.files()? {
            write_synced(&staging.join(name), &bytes)?;
        }
        let model_file = staging.join(MODEL_FILE);
        int8_file::write(&model_file, &tensors, metadata)?;
        // As every checkpoint's: safetensors writes through a private (0600) temporary file.
        let mode = std::fs::metadata(staging.join(CONFIG_FILE))?.permissions();
        std::fs::set_permissions(&model_file, mode)?;
        sync_dir(staging)
    })?;
    let bytes_after = std::fs::metadata(out.join(MODEL_FILE)).map_or(0, |m| m.len());
    Ok(Quantized {
        source: dir,
        int8_matrices,
        bytes_before,
        bytes_after,
    })
}
