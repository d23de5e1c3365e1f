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
//! A checkpoint is written whole into a hidden sibling (`.last.tmp/`) and then swapped in by
//! two renames, so a crash at any moment leaves the previous checkpoint readable: as `last/`,
//! or, between the two renames, as `.last.old/`, which loading falls back to.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use anyhow::{bail, Context};
use candle_core::{DType, Device, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::{Init, VarBuilder};

use crate::config::Config;
use crate::data::Tokenizers;
use crate::model::{EncoderDecoder, VocabSizes};
use crate::train::{MetricRecord, ResumePoint, TrainingState};
use crate::translator::{DecodeOptions, Translator};

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

/// What a checkpoint holds, borrowed from a training run.
pub struct CheckpointContents<'a> {
    pub config: &'a Config,
    pub tokenizers: &'a Tokenizers,
    pub tensors: &'a [(String, Tensor)],
    /// Adam's moments and the loop's state, for checkpoints that `train --resume` reads.
    pub resume: Option<(&'a [(String, Tensor)], &'a TrainingState)>,
}

/// Writes a checkpoint as the directory `dir`, replacing any earlier one there only once
/// every file of the new one is on disk (see the module docs).
pub fn save(dir: &Path, contents: &CheckpointContents) -> anyhow::Result<()> {
    let staging = hidden_sibling(dir, "tmp")?;
    let retired = hidden_sibling(dir, "old")?;
    let context = || format!("cannot write checkpoint {}", dir.display());
    // A crash between the two renames of an earlier save leaves only the retired copy.
    if !dir.exists() && retired.is_dir() {
        std::fs::rename(&retired, dir).with_context(context)?;
    }
    // A crash during an earlier save leaves a half-written staging directory.
    if staging.exists() {
        std::fs::remove_dir_all(&staging).with_context(context)?;
    }
    std::fs::create_dir_all(&staging).with_context(context)?;
    write_synced(
        &staging.join(CONFIG_FILE),
        contents.config.to_toml()?.as_bytes(),
    )?;
    for (name, text) in contents.tokenizers.files()? {
        write_synced(&staging.join(name), text.as_bytes())?;
    }
    write_synced(
        &staging.join(MODEL_FILE),
        &serialize_tensors(contents.tensors)?,
    )?;
    if let Some((moments, state)) = contents.resume {
        write_synced(&staging.join(OPTIMIZER_FILE), &serialize_tensors(moments)?)?;
        let json = serde_json::to_string_pretty(state)?;
        write_synced(&staging.join(STATE_FILE), json.as_bytes())?;
    }
    sync_dir(&staging)?;
    if dir.exists() {
        std::fs::rename(dir, &retired).with_context(context)?;
    }
    std::fs::rename(&staging, dir).with_context(context)?;
    if let Some(parent) = dir.parent() {
        sync_dir(parent)?;
    }
    if retired.exists() {
        std::fs::remove_dir_all(&retired).with_context(context)?;
    }
    Ok(())
}

/// `runs/x/last` -> `runs/x/.last.<suffix>`.
fn hidden_sibling(dir: &Path, suffix: &str) -> anyhow::Result<PathBuf> {
    let name = dir
        .file_name()
        .with_context(|| format!("{} is not a directory path", dir.display()))?;
    Ok(dir.with_file_name(format!(".{}.{suffix}", name.to_string_lossy())))
}

/// Creates `path`, writes `bytes` and waits until they are on disk.
fn write_synced(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let write = || -> std::io::Result<()> {
        let mut file = File::create(path)?;
        file.write_all(bytes)?;
        file.sync_all()
    };
    write().with_context(|| format!("cannot write {}", path.display()))
}

/// Makes a directory's entries (new files, renames) durable.
fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync directory {}", dir.display()))
}

/// Writes `metrics.jsonl` (one JSON object per line) into the run directory.
pub fn save_metrics(run_dir: &Path, metrics: &[MetricRecord]) -> anyhow::Result<()> {
    std::fs::create_dir_all(run_dir)
        .with_context(|| format!("cannot create run directory {}", run_dir.display()))?;
    let mut text = String::new();
    for record in metrics {
        text.push_str(&serde_json::to_string(record)?);
        text.push('\n');
    }
    write_atomic(&run_dir.join(METRICS_FILE), text.as_bytes())
}

fn serialize_tensors(tensors: &[(String, Tensor)]) -> anyhow::Result<Vec<u8>> {
    let on_host = tensors
        .iter()
        .map(|(name, t)| Ok((name.as_str(), t.to_device(&Device::Cpu)?.contiguous()?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // "format": "pt" lets Hugging Face tooling treat the file as a PyTorch state_dict.
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    Ok(safetensors::serialize(on_host, Some(metadata))?)
}

/// Writes `bytes` to a temporary file beside `path`, syncs it, then renames it over `path`:
/// readers see the old file or the new one, never half of one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let file_name = path
        .file_name()
        .with_context(|| format!("{} is not a file path", path.display()))?;
    let tmp = path.with_file_name(format!(".{}.tmp", file_name.to_string_lossy()));
    write_synced(&tmp, bytes)?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

/// Reads a run directory's `metrics.jsonl`.
pub fn load_metrics(run_dir: &Path) -> anyhow::Result<Vec<MetricRecord>> {
    let path = run_dir.join(METRICS_FILE);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}; is this a run directory?", path.display()))?;
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

/// A checkpoint read back: its config, tokenizers, and the model built from its weights.
pub struct Checkpoint {
    pub dir: PathBuf,
    pub config: Config,
    pub tokenizers: Tokenizers,
    pub model: EncoderDecoder,
}

impl Checkpoint {
    /// A translator over this checkpoint's model and tokenizers.
    pub fn translator<'a>(&'a self, device: &'a Device, options: DecodeOptions) -> Translator<'a> {
        Translator {
            model: &self.model,
            tokenizers: &self.tokenizers,
            max_positions: self.config.model.max_len,
            device,
            options,
        }
    }
}

/// Serves a checkpoint's tensors to a `VarBuilder` and remembers which names the model asked
/// for, so that tensors nobody asked for can be reported (PyTorch's strict loading).
struct RecordingBackend {
    tensors: HashMap<String, Tensor>,
    requested: Arc<Mutex<HashSet<String>>>,
}

impl RecordingBackend {
    fn new(tensors: HashMap<String, Tensor>) -> (Self, Arc<Mutex<HashSet<String>>>) {
        let requested = Arc::new(Mutex::new(HashSet::new()));
        let backend = Self {
            tensors,
            requested: requested.clone(),
        };
        (backend, requested)
    }

    fn fetch(&self, name: &str) -> candle_core::Result<&Tensor> {
        if let Ok(mut requested) = self.requested.lock() {
            requested.insert(name.to_string());
        }
        self.tensors
            .get(name)
            .ok_or_else(|| candle_core::Error::Msg(format!("tensor {name} is missing")))
    }
}

impl SimpleBackend for RecordingBackend {
    fn get(
        &self,
        shape: Shape,
        name: &str,
        _: Init,
        dtype: DType,
        device: &Device,
    ) -> candle_core::Result<Tensor> {
        let tensor = self.fetch(name)?;
        if tensor.shape() != &shape {
            candle_core::bail!(
                "tensor {name} has shape {:?} but the config needs {:?}",
                tensor.dims(),
                shape.dims()
            )
        }
        tensor.to_device(device)?.to_dtype(dtype)
    }

    fn get_unchecked(
        &self,
        name: &str,
        dtype: DType,
        device: &Device,
    ) -> candle_core::Result<Tensor> {
        self.fetch(name)?.to_device(device)?.to_dtype(dtype)
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }
}

/// The checkpoint a path names: the directory itself when it holds weights, else its `best/`,
/// else its `last/` (so a run directory works too).
pub fn resolve(path: &Path) -> anyhow::Result<PathBuf> {
    if !path.is_dir() {
        bail!(
            "checkpoint directory {} does not exist; train one with `transformer train` or pass \
             --checkpoint DIR",
            path.display()
        );
    }
    std::iter::once(path.to_path_buf())
        .chain(
            [BEST_DIR, LAST_DIR]
                .into_iter()
                .flat_map(|name| [path.join(name), path.join(format!(".{name}.old"))]),
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

/// Loads the checkpoint at `path` (see `resolve`) onto `device`.
pub fn load(path: &Path, device: &Device) -> anyhow::Result<Checkpoint> {
    let dir = resolve(path)?;
    let (config, tokenizers, tensors) = read_parts(&dir, device)?;
    let model = build_model(&dir, &config, &tokenizers, tensors, device)?;
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
    let dir = [
        run_dir.join(LAST_DIR),
        run_dir.join(format!(".{LAST_DIR}.old")),
    ]
    .into_iter()
    .find(|dir| dir.join(MODEL_FILE).is_file())
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
    let (config, tokenizers, weights) = read_parts(&dir, device)?;
    build_model(&dir, &config, &tokenizers, weights.clone(), device)?;
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

/// A checkpoint directory's config, tokenizers and weights, each failure naming its file.
fn read_parts(
    dir: &Path,
    device: &Device,
) -> anyhow::Result<(Config, Tokenizers, HashMap<String, Tensor>)> {
    let config = Config::load(&dir.join(CONFIG_FILE))
        .with_context(|| format!("checkpoint {} has no usable config", dir.display()))?;
    let tokenizers = Tokenizers::load(dir).with_context(|| {
        format!(
            "checkpoint {} is incomplete or damaged (train again or pick another run)",
            dir.display()
        )
    })?;
    let tensors = read_tensors(&dir.join(MODEL_FILE), device)?;
    Ok((config, tokenizers, tensors))
}

fn read_tensors(path: &Path, device: &Device) -> anyhow::Result<HashMap<String, Tensor>> {
    candle_core::safetensors::load(path, device).map_err(|e| {
        anyhow::anyhow!(
            "cannot read {}: {e}; the file is damaged, train again or pick another run",
            path.display()
        )
    })
}

/// The model for `config` from `tensors`, loaded strictly: a tensor missing, of the wrong
/// shape, or left over is named.
fn build_model(
    dir: &Path,
    config: &Config,
    tokenizers: &Tokenizers,
    tensors: HashMap<String, Tensor>,
    device: &Device,
) -> anyhow::Result<EncoderDecoder> {
    let weights_path = dir.join(MODEL_FILE);
    let file_names: Vec<String> = tensors.keys().cloned().collect();
    let (backend, requested) = RecordingBackend::new(tensors);
    let vb = VarBuilder::from_backend(Box::new(backend), DType::F32, device.clone());
    let vocab = VocabSizes {
        src: tokenizers.src.vocab_size(),
        tgt: tokenizers.tgt.vocab_size(),
    };
    let model = EncoderDecoder::new(&config.model, vocab, vb).map_err(|e| {
        anyhow::anyhow!(
            "{} does not match its config and tokenizers: {e}",
            weights_path.display()
        )
    })?;
    let requested = requested
        .lock()
        .map_err(|_| anyhow::anyhow!("lock poisoned"))?;
    let mut unused: Vec<&String> = file_names
        .iter()
        .filter(|n| !requested.contains(*n))
        .collect();
    if !unused.is_empty() {
        unused.sort();
        bail!(
            "{} holds tensors that a model with its config.toml does not have: {}; the weights \
             and the config do not belong together",
            weights_path.display(),
            unused
                .iter()
                .map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(model)
}

/// The run under `root` whose weights were written last.
pub fn latest_run(root: &Path) -> anyhow::Result<PathBuf> {
    let none_found = || {
        anyhow::anyhow!(
            "no checkpoint found under {}/; train one with `transformer train` or pass \
             --checkpoint DIR",
            root.display()
        )
    };
    let entries = std::fs::read_dir(root).map_err(|_| none_found())?;
    let mut best: Option<(SystemTime, PathBuf)> = None;
    for entry in entries.flatten() {
        let Ok(dir) = resolve(&entry.path()) else {
            continue;
        };
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
    fn an_atomic_write_replaces_the_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.txt");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn a_missing_runs_directory_says_how_to_get_a_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let err = latest_run(&dir.path().join("runs"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("transformer train"), "{err}");
    }
}
