//! A checkpoint loaded for each use: decoding (in a compute type), resuming a run, starting
//! a new run from its weights (`training.init_from`, export), or only its tokenizers.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::bail;
use candle_core::{Device, Tensor};

use super::read::{
    is_int8_checkpoint, read_config_and_tokenizers, read_parts, read_tensors, read_weights,
};
use super::strict::{build_model, build_model_as};
use super::{resolve, write, Checkpoint, LAST_DIR, MODEL_FILE, OPTIMIZER_FILE, STATE_FILE};
use crate::config::{ComputeType, Config};
use crate::tokenize::Tokenizers;
use crate::train::{ResumePoint, TrainingState, STATE_FORMAT};

/// Loads the checkpoint at `path` (see `resolve`) onto `device`, in float32.
pub fn load(path: &Path, device: &Device) -> anyhow::Result<Checkpoint> {
    load_as(path, device, Some(ComputeType::Float32))
}

/// Loads the checkpoint at `path` onto `device` for decoding in `compute`, or without it in
/// the checkpoint's `decode.compute_type`: int8 quantizes every linear layer's weight as the
/// model is built. A device without int8 products decodes in float32, with a note saying so
/// (in `config.notes`); `config.decode.compute_type` is what the model computes in.
pub fn load_as(
    path: &Path,
    device: &Device,
    compute: Option<ComputeType>,
) -> anyhow::Result<Checkpoint> {
    let dir = resolve(path)?;
    let (mut config, tokenizers) = read_config_and_tokenizers(&dir)?;
    let int8_file = is_int8_checkpoint(&dir);
    // An int8 checkpoint decodes in int8 unless asked otherwise, whatever its config says.
    let default = if int8_file {
        ComputeType::Int8
    } else {
        config.decode.compute_type
    };
    let mut compute = compute.unwrap_or(default);
    if compute == ComputeType::Int8 && !crate::device::multiplies_int8(device) {
        config.notes.push(format!(
            "int8 products run on the CPU only: decoding in float32 on {}{}",
            crate::device::describe(device),
            if int8_file {
                " from the int8 weights scaled back"
            } else {
                ""
            }
        ));
        compute = ComputeType::Float32;
    }
    if compute == ComputeType::Bfloat16 && device.is_cpu() {
        let engine = crate::kernels::bf16::engine();
        if !engine.is_native() && !crate::kernels::bf16::engine_asked_for() {
            bail!(
                "compute type bfloat16 needs bf16 products, and {}: decode in float32, which is \
                 faster here (or set TRANSFORMER_BF16_ENGINE=emulated to run bfloat16 emulated \
                 anyway)",
                crate::kernels::bf16::no_native_engine()
            );
        }
        log::info!(
            "bfloat16: bf16 weights and products on {}, f32 sums",
            engine.name()
        );
    }
    // Read in the form the model computes in (float32: as stored): no float copy of the
    // whole model is held.
    // An int8 checkpoint's weights are read as stored, whatever the model computes in.
    let read_form = if int8_file {
        ComputeType::Float32
    } else {
        compute
    };
    let weights = read_weights(&dir, &config, device, read_form)?;
    let model = build_model_as(&config, &tokenizers, weights, device, compute)?;
    config.decode.compute_type = compute;
    Ok(Checkpoint {
        dir,
        config,
        tokenizers,
        model,
    })
}

/// A run's `last/` checkpoint with everything `train --resume` needs, checked as strictly
/// as `load` checks weights.
pub struct ResumeCheckpoint {
    pub dir: PathBuf,
    pub config: Config,
    pub tokenizers: Tokenizers,
    pub point: ResumePoint,
}

/// Reads the resumable checkpoint of the run directory `run_dir`.
pub fn load_for_resume(run_dir: &Path, device: &Device) -> anyhow::Result<ResumeCheckpoint> {
    let weights = run_dir.join(LAST_DIR).join(MODEL_FILE);
    if let Some(what) = crate::small_file::not_regular(&weights) {
        return Err(crate::small_file::not_regular_error(&weights, what));
    }
    let dir = Some(write::restore_retired(&run_dir.join(LAST_DIR)))
        .filter(|dir| dir.join(MODEL_FILE).is_file())
        .ok_or_else(|| {
            // A run directory with files but no checkpoint: a run stopped before its first.
            let started = std::fs::read_dir(run_dir).is_ok_and(|mut files| files.next().is_some());
            match started {
                _ if !run_dir.exists() => anyhow::anyhow!("{} does not exist", run_dir.display()),
                _ if !run_dir.is_dir() => {
                    anyhow::anyhow!("{} is a file, not a run directory", run_dir.display())
                }
                true => anyhow::anyhow!(
                    "{} has no checkpoint yet: its run stopped before writing one; start the \
                     run again into it",
                    run_dir.display()
                ),
                false => anyhow::anyhow!(
                    "{} has no {LAST_DIR}/{MODEL_FILE}; pass the run directory that \
                     `transformer train` wrote (runs/<name>)",
                    run_dir.display()
                ),
            }
        })?;
    let state_path = dir.join(STATE_FILE);
    if let Some(what) = crate::small_file::not_regular(&state_path) {
        return Err(crate::small_file::not_regular_error(&state_path, what));
    }
    let bytes = crate::small_file::read_unnamed(&state_path, crate::small_file::MOST_CONFIG_BYTES)
        .map_err(|why| {
            anyhow::anyhow!(
                "cannot read {} ({why}); this checkpoint was not written for resuming (an older \
                 version or a best/ copy), so start a new run",
                state_path.display()
            )
        })?;
    let text = String::from_utf8(bytes).map_err(|_| {
        anyhow::anyhow!(
            "{} is not UTF-8 text; resume from a copy or start a new run",
            state_path.display()
        )
    })?;
    let state: TrainingState = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{} is damaged ({e}); resume from a copy or start a new run",
            state_path.display()
        )
    })?;
    if state.format != STATE_FORMAT {
        bail!(
            "{} has format {}, but this version of transformer reads format {STATE_FORMAT}; \
             resume it with the version that wrote it, or start a new run",
            state_path.display(),
            state.format
        );
    }
    let (config, tokenizers, weights) = read_parts(&dir, device)?;
    weights.refuse_int8("cannot be trained")?;
    let weights =
        build_model(&config, &tokenizers, weights.clone(), device).map(|_| weights.tensors)?;
    let optimizer = dir.join(OPTIMIZER_FILE);
    if let Some(what) = crate::small_file::not_regular(&optimizer) {
        return Err(crate::small_file::not_regular_error(&optimizer, what));
    }
    let moments = read_tensors(&optimizer, device)?;
    Ok(ResumeCheckpoint {
        dir,
        config,
        tokenizers,
        point: ResumePoint {
            weights,
            moments,
            state,
        },
    })
}

/// A checkpoint's weights to start a new run from (`training.init_from`): its config,
/// tokenizers and tensors, checked as strictly as `load` checks them.
pub struct InitialWeights {
    pub dir: PathBuf,
    pub config: Config,
    pub tokenizers: Tokenizers,
    pub weights: HashMap<String, Tensor>,
}

/// Reads the checkpoint at `path` (see `resolve`) for `training.init_from` or an export,
/// which `purpose` names in the refusal of an int8 checkpoint ("cannot be ...").
pub fn load_initial_weights(
    path: &Path,
    device: &Device,
    purpose: &str,
) -> anyhow::Result<InitialWeights> {
    let dir = resolve(path)?;
    let (config, tokenizers, weights) = read_parts(&dir, device)?;
    weights.refuse_int8(purpose)?;
    let weights =
        build_model(&config, &tokenizers, weights.clone(), device).map(|_| weights.tensors)?;
    Ok(InitialWeights {
        dir,
        config,
        tokenizers,
        weights,
    })
}
/// The config and tokenizers of the checkpoint at `path` (see `resolve`), without its
/// weights: what `tokenize` needs.
pub fn load_tokenizers(path: &Path) -> anyhow::Result<(PathBuf, Config, Tokenizers)> {
    let dir = resolve(path)?;
    let (config, tokenizers) = read_config_and_tokenizers(&dir)?;
    Ok((dir, config, tokenizers))
}
