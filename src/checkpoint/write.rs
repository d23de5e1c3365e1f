//! Writing checkpoints and run files so that a crash never leaves a reader half of one.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use candle_core::{Device, Tensor};

use super::format::WeightFormat;
use super::{CONFIG_FILE, METRICS_FILE, MODEL_FILE, OPTIMIZER_FILE, STATE_FILE};
use crate::atomic_file::{advice_for, write_atomic};
use crate::config::Config;
use crate::data::Tokenizers;
use crate::metrics::MetricRecord;
use crate::train::TrainingState;

/// What a checkpoint holds, borrowed from a training run.
pub struct CheckpointContents<'a> {
    pub config: &'a Config,
    pub tokenizers: &'a Tokenizers,
    pub tensors: &'a [(String, Tensor)],
    /// Adam's moments and the loop's state, for checkpoints that `train --resume` reads.
    pub resume: Option<(&'a [(String, Tensor)], &'a TrainingState)>,
}

/// Writes a checkpoint as the directory `dir`, replacing any earlier one there only once
/// every file of the new one is on disk (see the module docs). A failure (a full disk, say)
/// removes what it wrote, leaves the earlier checkpoint as it was, and is named by `dir`.
pub fn save(dir: &Path, contents: &CheckpointContents) -> anyhow::Result<()> {
    save_with(dir, |staging| write_whole(staging, contents))
}

/// Writes the directory `dir` with `write` (given the empty directory to fill), replacing any
/// earlier one there only once every file is on disk, as [`save`] does.
pub(super) fn save_with(
    dir: &Path,
    write: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let staging = hidden_sibling(dir, STAGING)?;
    let retired = hidden_sibling(dir, RETIRED)?;
    clear_leftovers(dir)?;
    let written = std::fs::create_dir_all(&staging)
        .with_context(|| format!("cannot create {}", staging.display()))
        .and_then(|()| write(&staging));
    if let Err(e) = written {
        let _ = remove_leftover(&staging);
        // The root cause alone: the file that failed is a hidden temporary one.
        let cause = e.root_cause();
        anyhow::bail!(
            "cannot write checkpoint {}: {cause}; {}",
            dir.display(),
            advice_for(cause)
        );
    }
    let context = || format!("cannot write checkpoint {}", dir.display());
    if present(dir) {
        std::fs::rename(dir, &retired).with_context(context)?;
    }
    std::fs::rename(&staging, dir).with_context(context)?;
    // A bare name's parent is the empty path: the directory we run in.
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
    sync_dir(parent.unwrap_or(Path::new(".")))?;
    remove_leftover(&retired).with_context(|| leftover_context(&retired))?;
    Ok(())
}

/// Puts back, or removes, what an interrupted save of `dir` left beside it: the retired copy
/// stands in for a `dir` the crash left missing; otherwise it, and any half-written staging
/// directory, are removed, whole or in part, directory or file. `train` calls it before its
/// first step, so that a leftover it cannot remove is named before any work is done.
pub fn clear_leftovers(dir: &Path) -> anyhow::Result<()> {
    let staging = hidden_sibling(dir, STAGING)?;
    let retired = hidden_sibling(dir, RETIRED)?;
    if !present(dir) && retired.is_dir() {
        std::fs::rename(&retired, dir).with_context(|| leftover_context(&retired))?;
    }
    remove_leftover(&staging).with_context(|| leftover_context(&staging))?;
    if present(dir) {
        remove_leftover(&retired).with_context(|| leftover_context(&retired))?;
    }
    Ok(())
}

/// The error of a leftover at `path` that cannot be removed.
pub(super) fn leftover_context(path: &Path) -> String {
    format!(
        "cannot remove {}, which an interrupted save left; remove it by hand",
        path.display()
    )
}

/// Removes whatever an interrupted save left at `path` (a directory, whole or in part, a file
/// or a link), if anything.
pub(super) fn remove_leftover(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether anything is at `path`, a dangling symbolic link included.
fn present(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Every file of the checkpoint, synced, in the directory `staging`.
fn write_whole(staging: &Path, contents: &CheckpointContents) -> anyhow::Result<()> {
    std::fs::create_dir_all(staging)
        .with_context(|| format!("cannot create {}", staging.display()))?;
    write_synced(
        &staging.join(CONFIG_FILE),
        contents.config.to_toml()?.as_bytes(),
    )?;
    for (name, bytes) in contents.tokenizers.files()? {
        write_synced(&staging.join(name), &bytes)?;
    }
    // safetensors writes through a private temporary file (mode 0600); the tensor files get
    // the mode every other file of the checkpoint has.
    let mode = std::fs::metadata(staging.join(CONFIG_FILE))?.permissions();
    write_tensors(&staging.join(MODEL_FILE), contents.tensors)?;
    std::fs::set_permissions(staging.join(MODEL_FILE), mode.clone())?;
    if let Some((moments, state)) = contents.resume {
        write_tensors(&staging.join(OPTIMIZER_FILE), moments)?;
        std::fs::set_permissions(staging.join(OPTIMIZER_FILE), mode)?;
        let json = serde_json::to_string_pretty(state)?;
        write_synced(&staging.join(STATE_FILE), json.as_bytes())?;
    }
    sync_dir(staging)
}

/// `runs/x/last` -> `runs/x/.last.<suffix>`.
fn hidden_sibling(dir: &Path, suffix: &str) -> anyhow::Result<PathBuf> {
    let name = dir
        .file_name()
        .with_context(|| format!("{} is not a directory path", dir.display()))?;
    Ok(dir.with_file_name(hidden_name(&name.to_string_lossy(), suffix)))
}

/// Suffixes of the directory a save writes into, and of the one it replaces.
const STAGING: &str = "tmp";
pub(super) const RETIRED: &str = "old";

/// `last` -> `.last.old`.
pub(super) fn hidden_name(name: &str, suffix: &str) -> String {
    format!(".{name}.{suffix}")
}

/// Creates `path`, writes `bytes` and waits until they are on disk.
pub(super) fn write_synced(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    create_synced(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

fn create_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Makes a directory's entries (new files, renames) durable.
pub(super) fn sync_dir(dir: &Path) -> anyhow::Result<()> {
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

/// Writes module-named `tensors` as safetensors, under our format's file names, and waits
/// until they are on disk. Streamed tensor by tensor, so that saving the base model with its
/// optimizer state does not first build a half-gigabyte buffer.
pub(super) fn write_tensors(path: &Path, tensors: &[(String, Tensor)]) -> anyhow::Result<()> {
    let on_host = tensors
        .iter()
        .map(|(name, t)| {
            let file_name = super::format::OURS.file_name(name);
            Ok((file_name, t.to_device(&Device::Cpu)?.contiguous()?))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    // "format": "pt" lets Hugging Face tooling treat the file as a PyTorch state_dict.
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    let cannot = || format!("cannot write {}", path.display());
    safetensors::serialize_to_file(on_host, Some(metadata), path)
        .map_err(anyhow::Error::new)
        .with_context(cannot)?;
    File::open(path)
        .and_then(|f| f.sync_all())
        .with_context(cannot)
}
