//! The run directory: what a checkpoint is on disk, written atomically, and read back.
//!
//! ```text
//! runs/<name>/
//!   metrics.jsonl         one JSON object per logged step and per epoch
//!   loss.png              training and validation curves, redrawn at each checkpoint
//!   last/                 the latest weights, plus what `train --resume` needs
//!   best/                 the weights with the best validation BLEU (when there is validation)
//! <checkpoint>/
//!   model.safetensors     every tensor under the PyTorch reference's state_dict name
//!   config.toml           the resolved config (every value explicit)
//!   vocab.src.txt, vocab.tgt.txt     word vocabularies, or
//!   tokenizer.json (joint) / tokenizer.src.json + tokenizer.tgt.json   BPE tokenizers
//!   optimizer.safetensors Adam's moments, `<parameter>.exp_avg` / `.exp_avg_sq` (last/ only)
//!   training_state.json   step, epoch, batch position, dropout stream, metrics (last/ only)
//! ```
//!
//! A checkpoint is written whole into a hidden sibling of its own (`.last.tmp-PID-RANDOM/`)
//! and then swapped in by two renames, so a crash at any moment leaves the previous
//! checkpoint readable: as `last/`, or, between the two renames, as `.last.old/`, which the
//! next reader or writer puts back. One process at a time writes a directory: each holds an
//! advisory lock on `.last.lock` ([`lock`]) from before it checks what is there until its
//! save is read back.

pub mod format;
pub mod history;
pub mod int8_file;
mod lock;
pub mod marian;
pub mod marian_export;
pub mod quantize;
mod replace;
mod strict;
mod tensor_file;
mod write;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::{bail, Context};
use candle_core::{DType, Device, Tensor};

use crate::config::{ComputeType, Config};
use crate::metrics::MetricRecord;
use crate::model::Model;
use crate::tokenize::Tokenizers;
use crate::train::{ResumePoint, TrainingState, STATE_FORMAT};
use format::ByModule;
pub use lock::{DirLock, LockHeld, WhenHeld};
use strict::{build_model, build_model_as};
pub use write::{save, save_metrics, CheckpointContents, Destination};

/// Clears what interrupted saves left in `run_dir` (beside `last/` and `best/`, and among the
/// kept checkpoints), or puts back a checkpoint a crash left only as its retired copy: `train`
/// calls it before its first step, so that a leftover it cannot remove is named before any
/// work is done rather than at the first checkpoint.
pub fn clear_leftovers(run_dir: &Path) -> anyhow::Result<()> {
    for name in [LAST_DIR, BEST_DIR] {
        write::clear_leftovers(&run_dir.join(name))?;
    }
    history::clear_leftovers(run_dir)
}

pub const MODEL_FILE: &str = "model.safetensors";
pub const CONFIG_FILE: &str = "config.toml";
pub const METRICS_FILE: &str = "metrics.jsonl";
/// The training-curves picture in the run directory.
pub const LOSS_PLOT_FILE: &str = "loss.png";
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";
pub const STATE_FILE: &str = "training_state.json";
pub const LAST_DIR: &str = "last";
pub const BEST_DIR: &str = "best";

/// Where `transformer train` puts runs by default, and `translate` looks for the latest.
pub const RUNS_ROOT: &str = "runs";

/// Reads a run directory's `metrics.jsonl`.
pub fn load_metrics(run_dir: &Path) -> anyhow::Result<Vec<MetricRecord>> {
    let path = run_dir.join(METRICS_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        anyhow::anyhow!(
            "cannot read {}: {e}; pass a run directory that `transformer train` wrote",
            path.display()
        )
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).with_context(|| {
                format!("{} line {} is not a metrics record", path.display(), i + 1)
            })
        })
        .collect()
}

/// A checkpoint read back: its config, tokenizers, and the model (either family, as its
/// config's `model.arch` says) built from its weights.
pub struct Checkpoint {
    pub dir: PathBuf,
    pub config: Config,
    pub tokenizers: Tokenizers,
    pub model: Model,
}

/// What a command asks of a checkpoint's model: which kind of model can do it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    /// Read a source and write its translation (`translate`, `eval`, `attention`, `serve`).
    Translate,
    /// Continue a prompt (`generate`).
    Continue,
}

impl Checkpoint {
    /// The model, when it can do `task`; else an error that names the checkpoint and the
    /// command to use instead.
    pub fn model_for(&self, task: Task) -> anyhow::Result<&Model> {
        match (task, self.model.reads_source()) {
            (Task::Translate, true) | (Task::Continue, false) => Ok(&self.model),
            (Task::Translate, false) => bail!(
                "{} holds a decoder-only language model (model.arch = \"decoder-only\"); use \
                 `transformer generate`: translate, eval, attention and serve need an encoder-decoder",
                self.dir.display()
            ),
            (Task::Continue, true) => bail!(
                "{} holds a translation model (model.arch = \"encoder-decoder\"); use \
                 `transformer translate`: generate needs a decoder-only language model",
                self.dir.display()
            ),
        }
    }
}

/// The checkpoint a path names: the directory itself when it holds weights (or is a Hugging
/// Face MarianMT directory), else its `best/`, else its `last/` (so a run directory works
/// too). A checkpoint that a save killed between its two renames left only as its retired
/// copy is put back first (see [`write::restore_retired`]).
pub fn resolve(path: &Path) -> anyhow::Result<PathBuf> {
    let path = &write::restore_retired(path);
    if path.is_file() {
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
        bail!(
            "{} is a file, not a checkpoint directory; pass the directory that holds it ({})",
            path.display(),
            parent.map_or_else(|| ".".into(), |p| p.display().to_string())
        );
    }
    if !path.is_dir() {
        bail!(
            "checkpoint directory {} does not exist; train one with `transformer train` or pass \
             --checkpoint DIR",
            path.display()
        );
    }
    if marian::is_hugging_face_dir(path) {
        return Ok(path.to_path_buf());
    }
    std::iter::once(path.to_path_buf())
        .chain(
            [BEST_DIR, LAST_DIR]
                .into_iter()
                .map(|name| write::restore_retired(&path.join(name))),
        )
        .find(|dir| dir.join(MODEL_FILE).is_file())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{} holds no {MODEL_FILE} (nor best/ or last/ with one); the checkpoint is \
                 incomplete, train again or pick another run",
                path.display()
            )
        })
}

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
    let (mut config, tokenizers, weights) = read_parts(&dir, device)?;
    // An int8 checkpoint decodes in int8 unless asked otherwise, whatever its config says.
    let default = if weights.is_int8() {
        ComputeType::Int8
    } else {
        config.decode.compute_type
    };
    let mut compute = compute.unwrap_or(default);
    if compute == ComputeType::Int8 && !crate::device::multiplies_int8(device) {
        config.notes.push(format!(
            "int8 products run on the CPU only: decoding in float32 on {}{}",
            crate::device::describe(device),
            if weights.is_int8() {
                " from the int8 weights scaled back"
            } else {
                ""
            }
        ));
        compute = ComputeType::Float32;
    }
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
    let dir = Some(write::restore_retired(&run_dir.join(LAST_DIR)))
        .filter(|dir| dir.join(MODEL_FILE).is_file())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{} has no {LAST_DIR}/{MODEL_FILE}; pass the run directory that `transformer \
                 train` wrote (runs/<name>)",
                run_dir.display()
            )
        })?;
    let state_path = dir.join(STATE_FILE);
    let text = std::fs::read_to_string(&state_path).with_context(|| {
        format!(
            "cannot read {}; this checkpoint was not written for resuming (an older version \
             or a best/ copy), so start a new run",
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
    let moments = read_tensors(&dir.join(OPTIMIZER_FILE), device)?;
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

/// A checkpoint directory's config, tokenizers and weights (under their module names,
/// through our format), each failure naming its file.
fn read_parts(dir: &Path, device: &Device) -> anyhow::Result<(Config, Tokenizers, ByModule)> {
    let (config, tokenizers) = read_config_and_tokenizers(dir)?;
    if marian::is_hugging_face_dir(dir) {
        let weights = read_marian_weights(dir, &config, device)?;
        marian::check_sizes(&config, &weights)?;
        return Ok((config, tokenizers, weights));
    }
    let path = dir.join(MODEL_FILE);
    let file = read_weights_file(&path, device, true)?;
    let mut weights = format::to_modules(
        Arc::new(format::AnnotatedTransformer),
        file.tensors,
        path.clone(),
    )
    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    weights.quantized_from = file.metadata.get(int8_file::QUANTIZED_FROM).cloned();
    Ok((config, tokenizers, weights))
}

/// A checkpoint directory's config and tokenizers (a MarianMT directory's read from its
/// JSON files and checked against each other), each failure naming its file.
fn read_config_and_tokenizers(dir: &Path) -> anyhow::Result<(Config, Tokenizers)> {
    if marian::is_hugging_face_dir(dir) {
        let config = marian::read_config(dir)?;
        let tokenizers = Tokenizers::load(dir, &config.data)?;
        marian::check_agreement(dir, &config, &tokenizers)?;
        return Ok((config, tokenizers));
    }
    let marian_files = [
        marian::SAFETENSORS_FILE,
        crate::tokenize::marian::VOCAB_FILE,
    ];
    if !dir.join(CONFIG_FILE).is_file() && marian_files.iter().all(|f| dir.join(f).is_file()) {
        bail!(
            "{} looks like a Hugging Face MarianMT directory but has no {}; download that \
             file too (it holds the model's sizes)",
            dir.display(),
            marian::CONFIG_JSON
        );
    }
    let config = Config::load_saved(&dir.join(CONFIG_FILE))?;
    let tokenizers = Tokenizers::load(dir, &config.data).with_context(|| {
        format!(
            "checkpoint {} is incomplete or damaged (train again or pick another run)",
            dir.display()
        )
    })?;
    Ok((config, tokenizers))
}

/// The config and tokenizers of the checkpoint at `path` (see `resolve`), without its
/// weights: what `tokenize` needs.
pub fn load_tokenizers(path: &Path) -> anyhow::Result<(PathBuf, Config, Tokenizers)> {
    let dir = resolve(path)?;
    let (config, tokenizers) = read_config_and_tokenizers(&dir)?;
    Ok((dir, config, tokenizers))
}

/// A Hugging Face MarianMT directory's weights, through [`marian::MarianFormat`].
fn read_marian_weights(dir: &Path, config: &Config, device: &Device) -> anyhow::Result<ByModule> {
    let path = marian::weights_file(dir)?;
    let tensors = if path.extension().is_some_and(|e| e == "bin") {
        read_pytorch_tensors(&path, device)?
    } else {
        read_tensors(&path, device)?
    };
    let format = Arc::new(marian::MarianFormat {
        shared: config.model.share_source_embeddings,
    });
    format::to_modules(format, tensors, path.clone())
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// A PyTorch `torch.save` file's tensors (candle reads its zip and pickle), checked as
/// [`read_tensors`] checks a safetensors file's.
fn read_pytorch_tensors(path: &Path, device: &Device) -> anyhow::Result<HashMap<String, Tensor>> {
    let tensors = candle_core::pickle::read_all(path).map_err(|e| {
        anyhow::anyhow!(
            "cannot read {}: {e}; the file is damaged or not a PyTorch state_dict",
            path.display()
        )
    })?;
    let tensors = tensors
        .into_iter()
        .map(|(name, tensor)| Ok((name, tensor.to_device(device)?)))
        .collect::<candle_core::Result<HashMap<_, _>>>()?;
    check_tensors(path, &tensors, &HashSet::new(), &HashMap::new())?;
    Ok(tensors)
}

/// A safetensors file of this format: float tensors only (our own are F32; F16 and BF16 are
/// what a PyTorch user's half-precision state_dict holds), every value finite. Anything else
/// would be converted or used silently: integer weights truncated, F64 rounded, NaN weights
/// translating every line to nothing.
fn read_tensors(path: &Path, device: &Device) -> anyhow::Result<HashMap<String, Tensor>> {
    Ok(read_weights_file(path, device, false)?.tensors)
}

/// As [`read_tensors`], and, with `int8_allowed`, an int8 checkpoint's int8 matrices (see
/// [`int8_file`]), checked.
fn read_weights_file(
    path: &Path,
    device: &Device,
    int8_allowed: bool,
) -> anyhow::Result<tensor_file::TensorFile> {
    let file = tensor_file::read(path, device).map_err(|e| {
        anyhow::anyhow!(
            "cannot read {}: {e:#}; the file is damaged: copy it again from where it came from, train again, or pick another checkpoint",
            path.display()
        )
    })?;
    let int8 = if int8_allowed {
        int8_file::check(path, &file.tensors, &file.int8, &file.stored_dtypes)?;
        file.int8.clone()
    } else {
        HashSet::new()
    };
    check_tensors(path, &file.tensors, &int8, &file.stored_dtypes)?;
    Ok(file)
}

/// Refuses a weights file with a tensor that cannot be a weight (see [`check_tensor`]);
/// the `int8` ones are checked apart. `stored` names the dtypes as the file spells them.
fn check_tensors(
    path: &Path,
    tensors: &HashMap<String, Tensor>,
    int8: &HashSet<String>,
    stored: &HashMap<String, String>,
) -> anyhow::Result<()> {
    let mut names: Vec<&String> = tensors.keys().filter(|n| !int8.contains(*n)).collect();
    names.sort();
    for name in names {
        let dtype = stored.get(name).map(String::as_str);
        check_tensor(&tensors[name], dtype).map_err(|problem| {
            anyhow::anyhow!(
                "{} tensor {name} {problem}; the file is damaged or not a checkpoint of this \
                 tool: train again or pick another run",
                path.display()
            )
        })?;
    }
    Ok(())
}

/// Why a tensor (stored as `stored`, where the file says) cannot be a weight (or one of
/// Adam's moments), if it cannot.
fn check_tensor(tensor: &Tensor, stored: Option<&str>) -> Result<(), String> {
    if !matches!(tensor.dtype(), DType::F32 | DType::F16 | DType::BF16) {
        return Err(format!(
            "has dtype {}, where a checkpoint holds {}",
            stored.unwrap_or(tensor_file::dtype_name(tensor.dtype())),
            tensor_file::CHECKPOINT_DTYPES
        ));
    }
    let bad = non_finite_count(tensor).map_err(|e| format!("cannot be read: {e}"))?;
    if bad == 0 {
        Ok(())
    } else {
        Err(format!(
            "holds {bad} NaN or infinite value{} of {}",
            if bad == 1 { "" } else { "s" },
            tensor.elem_count()
        ))
    }
}

/// How many values of `tensor` are NaN or infinite: read in place for an f32 tensor on the
/// CPU (a copy of OPUS-MT's output layer, 119 MB, would raise the load's peak), else
/// through `0 x`, which is 0 for every finite x and NaN for NaN and the infinities.
fn non_finite_count(tensor: &Tensor) -> candle_core::Result<usize> {
    let tensor = tensor.contiguous()?;
    let (storage, layout) = tensor.storage_and_layout();
    if let (candle_core::Storage::Cpu(cpu), DType::F32) = (&*storage, tensor.dtype()) {
        let start = layout.start_offset();
        let values = &cpu.as_slice::<f32>()?[start..start + tensor.elem_count()];
        return Ok(values.iter().filter(|v| !v.is_finite()).count());
    }
    drop(storage);
    let zeros = tensor.to_dtype(DType::F32)?.affine(0.0, 0.0)?;
    if zeros.sum_all()?.to_scalar::<f32>()?.is_finite() {
        return Ok(0);
    }
    // Counted on the host only for a tensor already known to be damaged.
    let values = zeros.flatten_all()?.to_vec1::<f32>()?;
    Ok(values.iter().filter(|v| v.is_nan()).count())
}

/// The run under `root` whose model can do `task` and whose weights were written last.
pub fn latest_run(root: &Path, task: Task) -> anyhow::Result<PathBuf> {
    let none_found = || {
        anyhow::anyhow!(
            "no {} checkpoint found under {}/; train one with `transformer train` or pass \
             --checkpoint DIR",
            match task {
                Task::Translate => "translation",
                Task::Continue => "language-model",
            },
            root.display()
        )
    };
    let entries = std::fs::read_dir(root).map_err(|_| none_found())?;
    let mut best: Option<(SystemTime, PathBuf)> = None;
    for entry in entries.flatten() {
        let Ok(dir) = resolve(&entry.path()) else {
            continue;
        };
        let reads_source =
            Config::load(&dir.join(CONFIG_FILE)).map(|c| c.model.arch.reads_source());
        if reads_source.ok() != Some(task == Task::Translate) {
            continue;
        }
        let Ok(modified) = dir.join(MODEL_FILE).metadata().and_then(|m| m.modified()) else {
            continue;
        };
        if best.as_ref().is_none_or(|(t, _)| modified > *t) {
            best = Some((modified, entry.path()));
        }
    }
    best.map(|(_, dir)| dir).ok_or_else(none_found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_runs_directory_says_how_to_get_a_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let err = latest_run(&dir.path().join("runs"), Task::Translate)
            .unwrap_err()
            .to_string();
        assert!(err.contains("transformer train"), "{err}");
    }

    #[test]
    fn a_weights_file_given_as_the_checkpoint_names_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(MODEL_FILE);
        std::fs::write(&file, b"").unwrap();
        let err = resolve(&file).unwrap_err().to_string();
        assert!(
            err.contains("is a file, not a checkpoint directory"),
            "{err}"
        );
        assert!(err.contains(&dir.path().display().to_string()), "{err}");
    }
}
