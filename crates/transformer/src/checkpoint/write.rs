//! Writing checkpoints and run files so that a crash never leaves a reader half of one.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use candle_core::{Device, Tensor};

use super::format::WeightFormat;
use super::lock::{DirLock, WhenHeld};
use super::tensor_file;
use super::{CONFIG_FILE, METRICS_FILE, MODEL_FILE, OPTIMIZER_FILE, STATE_FILE};
use crate::atomic_file::{advice_for, write_atomic};
use crate::config::Config;
use crate::metrics::MetricRecord;
use crate::tokenize::Tokenizers;
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
/// Waits for another process writing `dir` to finish (a save, a reader putting back a
/// retired copy) rather than refusing: a training run's save must not fail for that.
pub fn save(dir: &Path, contents: &CheckpointContents) -> anyhow::Result<()> {
    Destination::lock(dir, WhenHeld::FOR_A_SAVE)?.save_contents(contents)
}

/// A checkpoint directory this process alone writes: locked ([`DirLock`]), with what an
/// interrupted save of it left put back or cleared. A command checks what is there (whether
/// it may be replaced) after taking it, so that no other writer changes it between the
/// check and the save.
#[derive(Debug)]
pub struct Destination {
    dir: PathBuf,
    _lock: DirLock,
}

impl Destination {
    /// Takes `dir` for writing; another process holding it gets `when_held`'s patience, then
    /// a refusal naming it.
    pub fn lock(dir: &Path, when_held: WhenHeld) -> anyhow::Result<Self> {
        // Refused before a lock file is made beside it: `--out /dev/null` is no directory.
        if std::fs::symlink_metadata(dir).is_ok_and(|m| !m.is_dir() && !m.is_symlink()) {
            return Err(super::OutRefused::NotADirectory {
                out: dir.to_path_buf(),
            }
            .into());
        }
        let lock = DirLock::acquire(dir, when_held)?;
        clear_leftovers_locked(dir)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            _lock: lock,
        })
    }

    /// Writes `contents` as the checkpoint, as [`save`] does.
    pub fn save_contents(self, contents: &CheckpointContents) -> anyhow::Result<()> {
        self.save_with(|staging| write_whole(staging, contents))
    }

    /// Writes the directory with `write` (given an empty staging directory of its own to
    /// fill), then swaps it in by two renames, syncs, and reads the directory back: success
    /// means `dir` holds every file written, at its size. Consumes the lock.
    pub fn save_with(self, write: impl FnOnce(&Path) -> anyhow::Result<()>) -> anyhow::Result<()> {
        let dir = &self.dir;
        let retired = hidden_sibling(dir, RETIRED)?;
        let staging = create_staging(dir).map_err(|e| failed(dir, &e))?;
        let files = match write(&staging).and_then(|()| listing(&staging)) {
            Ok(files) => files,
            Err(e) => {
                let _ = remove_leftover(&staging);
                return Err(failed(dir, &e));
            }
        };
        let context = || format!("cannot write checkpoint {}", dir.display());
        if present(dir) {
            std::fs::rename(dir, &retired).with_context(context)?;
        }
        std::fs::rename(&staging, dir).with_context(context)?;
        sync_dir(parent_of(dir))?;
        remove_leftover(&retired).with_context(|| leftover_context(&retired))?;
        let found = listing(dir).with_context(context)?;
        if found != files {
            anyhow::bail!(
                "checkpoint {} does not read back as written ({} files written, {} found); \
                 check the disk and write it again",
                dir.display(),
                files.len(),
                found.len()
            );
        }
        Ok(())
    }
}

/// The error of a save of `dir` that failed with `e`: its root cause alone (the file that
/// failed is a hidden temporary one), and what to do.
fn failed(dir: &Path, e: &anyhow::Error) -> anyhow::Error {
    let cause = e.root_cause();
    anyhow::anyhow!(
        "cannot write checkpoint {}: {cause}; {}",
        dir.display(),
        advice_for(cause)
    )
}

/// Puts back, or removes, what an interrupted save of `dir` left beside it (see
/// [`clear_leftovers_locked`]), taking `dir`'s lock for it. `train` calls it before its first
/// step, so that a leftover it cannot remove is named before any work is done.
pub fn clear_leftovers(dir: &Path) -> anyhow::Result<()> {
    Destination::lock(dir, WhenHeld::FOR_A_SAVE).map(drop)
}

/// A reader's half of [`clear_leftovers`]: when `dir` is missing and a save killed between
/// its two renames left the retired copy, the copy is put back under the lock (a writer in
/// the middle of its swap is waited for). Returns where the checkpoint is: `dir`, or the
/// retired copy when it cannot be renamed (a directory this process may not write).
pub fn restore_retired(dir: &Path) -> PathBuf {
    let Ok(retired) = hidden_sibling(dir, RETIRED) else {
        return dir.to_path_buf();
    };
    if present(dir) || !retired.is_dir() {
        return dir.to_path_buf();
    }
    match Destination::lock(dir, WhenHeld::FOR_A_SAVE) {
        Ok(_) if present(dir) => dir.to_path_buf(),
        _ if retired.is_dir() => retired,
        _ => dir.to_path_buf(),
    }
}

/// With `dir`'s lock held: the retired copy stands in for a `dir` the crash left missing;
/// otherwise it, and every staging directory (no other writer is at work), are removed,
/// whole or in part, directory or file.
fn clear_leftovers_locked(dir: &Path) -> anyhow::Result<()> {
    let retired = hidden_sibling(dir, RETIRED)?;
    if !present(dir) && retired.is_dir() {
        std::fs::rename(&retired, dir).with_context(|| leftover_context(&retired))?;
        sync_dir(parent_of(dir))?;
    }
    for staging in stagings_of(dir)? {
        remove_leftover(&staging).with_context(|| leftover_context(&staging))?;
    }
    if present(dir) {
        remove_leftover(&retired).with_context(|| leftover_context(&retired))?;
    }
    Ok(())
}

/// `.NAME.tmp-PID-RANDOM` beside `dir`, created here (exclusively: a name no other writer
/// or leftover has).
fn create_staging(dir: &Path) -> anyhow::Result<PathBuf> {
    loop {
        let name = format!(
            "{STAGING}-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        );
        let staging = hidden_sibling(dir, &name)?;
        match std::fs::create_dir(&staging) {
            Ok(()) => return Ok(staging),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e).with_context(|| format!("cannot create {}", staging.display()))
            }
        }
    }
}

/// The staging directories of saves of `dir` (this version's `.NAME.tmp-...` and older
/// versions' `.NAME.tmp`).
fn stagings_of(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let prefix = hidden_name(&file_name(dir)?, STAGING);
    let Ok(entries) = std::fs::read_dir(parent_of(dir)) else {
        return Ok(Vec::new());
    };
    Ok(entries
        .flatten()
        .filter(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            name == prefix || name.starts_with(&format!("{prefix}-"))
        })
        .map(|entry| entry.path())
        .collect())
}

/// Every file of `dir` with its size, by name.
fn listing(dir: &Path) -> anyhow::Result<Vec<(String, u64)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let entry = entry?;
        let size = entry.metadata()?.len();
        files.push((entry.file_name().to_string_lossy().into_owned(), size));
    }
    files.sort();
    Ok(files)
}

/// The directory holding `dir`; a bare name's is the directory we run in.
fn parent_of(dir: &Path) -> &Path {
    dir.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
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
    let record = tensor_file::model_record(&contents.config.model)?;
    write_tensors(&staging.join(MODEL_FILE), contents.tensors, Some(&record))?;
    std::fs::set_permissions(staging.join(MODEL_FILE), mode.clone())?;
    if let Some((moments, state)) = contents.resume {
        write_tensors(&staging.join(OPTIMIZER_FILE), moments, None)?;
        std::fs::set_permissions(staging.join(OPTIMIZER_FILE), mode)?;
        let json = serde_json::to_string_pretty(state)?;
        write_synced(&staging.join(STATE_FILE), json.as_bytes())?;
    }
    sync_dir(staging)
}

/// `runs/x/last` -> `runs/x/.last.<suffix>`.
fn hidden_sibling(dir: &Path, suffix: &str) -> anyhow::Result<PathBuf> {
    Ok(dir.with_file_name(hidden_name(&file_name(dir)?, suffix)))
}

fn file_name(dir: &Path) -> anyhow::Result<String> {
    let name = dir
        .file_name()
        .with_context(|| format!("{} is not a directory path", dir.display()))?;
    Ok(name.to_string_lossy().into_owned())
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
/// `model_record` ([`tensor_file::model_record`]) is kept in the metadata when given.
pub(super) fn write_tensors(
    path: &Path,
    tensors: &[(String, Tensor)],
    model_record: Option<&str>,
) -> anyhow::Result<()> {
    let on_host = tensors
        .iter()
        .map(|(name, t)| {
            let file_name = super::format::OURS.file_name(name);
            Ok((file_name, t.to_device(&Device::Cpu)?.contiguous()?))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    // "format": "pt" lets Hugging Face tooling treat the file as a PyTorch state_dict.
    let mut metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    if let Some(digest) = digest_of(&on_host)? {
        metadata.insert(tensor_file::CHECKSUM_KEY.to_string(), digest);
    }
    if let Some(record) = model_record {
        metadata.insert(tensor_file::MODEL_KEY.to_string(), record.to_string());
    }
    let cannot = || format!("cannot write {}", path.display());
    safetensors::serialize_to_file(on_host, Some(metadata), path)
        .map_err(anyhow::Error::new)
        .with_context(cannot)?;
    tensor_file::sort_header(path).with_context(cannot)?;
    File::open(path)
        .and_then(|f| f.sync_all())
        .with_context(cannot)
}

/// The checksum of `tensors` as they will be stored (see [`tensor_file::TensorDigest`]),
/// read in place; `None` when one of them is of a dtype it does not cover.
fn digest_of<N: AsRef<str>>(tensors: &[(N, Tensor)]) -> anyhow::Result<Option<String>> {
    let mut digest = tensor_file::TensorDigest::default();
    for (name, tensor) in tensors {
        if !tensor_file::with_stored_bytes(tensor, |bytes| digest.add(name.as_ref(), bytes))? {
            return Ok(None);
        }
    }
    Ok(Some(digest.finish()))
}
