//! The last K checkpoints of a run, kept for averaging (`training.keep_last`): each `Last`
//! checkpoint's weights are also written, atomically, as `checkpoints/step-NNNNNNNN/`, and the
//! older ones beyond K are removed. `average` takes the element-wise mean of the newest K
//! (fairseq's `average_checkpoints.py`) into a checkpoint of its own.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use candle_core::{DType, Device, Tensor};

use super::lock::WhenHeld;
use super::write::{self, Destination};
use super::{read_parts, CheckpointContents, MODEL_FILE};

pub use super::KEPT_DIR;
/// Where `average` and `training.average_last` write by default.
pub const AVERAGED_DIR: &str = "averaged";

/// Writes `contents` as the kept checkpoint of `step`, then leaves only the newest `keep`.
pub fn keep(
    run_dir: &Path,
    step: usize,
    contents: &CheckpointContents,
    keep: usize,
) -> anyhow::Result<()> {
    let dir = run_dir.join(KEPT_DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    super::save(&dir.join(format!("step-{step:08}")), contents)?;
    clear_leftovers(run_dir)?;
    let history = kept(run_dir)?;
    for (_, old) in &history[..history.len().saturating_sub(keep)] {
        std::fs::remove_dir_all(old).with_context(|| format!("cannot remove {}", old.display()))?;
    }
    Ok(())
}

/// Puts back or removes what saves of kept checkpoints killed midway left (`.step-N.old`,
/// `.step-N.tmp-...`; each save clears only its own step's), as [`write::clear_leftovers`]
/// does for one checkpoint.
pub fn clear_leftovers(run_dir: &Path) -> anyhow::Result<()> {
    let dir = run_dir.join(KEPT_DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(());
    };
    let mut steps = std::collections::BTreeSet::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(step) = name.strip_prefix('.').and_then(|n| n.split('.').next()) else {
            continue;
        };
        // A lock belongs to a save in progress (its holder removes it).
        if step.starts_with("step-") && !name.ends_with(".lock") {
            steps.insert(step.to_string());
        }
    }
    for step in steps {
        write::clear_leftovers(&dir.join(step))?;
    }
    Ok(())
}

/// Whether `out` is `run_dir`'s own `averaged/`, wherever either is named from.
fn is_own_average(out: &Path, run_dir: &Path) -> bool {
    let own = run_dir.join(AVERAGED_DIR);
    out == own || matches!((out.canonicalize(), own.canonicalize()), (Ok(a), Ok(b)) if a == b)
}

/// The kept checkpoints of `run_dir`, oldest first: (step, directory).
pub fn kept(run_dir: &Path) -> anyhow::Result<Vec<(usize, PathBuf)>> {
    let dir = run_dir.join(KEPT_DIR);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut history = Vec::new();
    for entry in entries {
        let path = entry
            .with_context(|| format!("cannot list {}", dir.display()))?
            .path();
        let step = path
            .file_name()
            .and_then(|n| n.to_str()?.strip_prefix("step-")?.parse::<usize>().ok());
        if let Some(step) = step.filter(|_| path.join(MODEL_FILE).is_file()) {
            history.push((step, path));
        }
    }
    history.sort();
    Ok(history)
}

/// Writes into `out` the element-wise mean of the newest `last` kept checkpoints of
/// `run_dir` (summed in f64), with the newest one's config and tokenizers; returns the steps
/// averaged. What is already in `out` is replaced when `out` is the run's own `averaged/`,
/// anything else only with `overwrite` (another run's average is someone's work).
pub fn average(
    run_dir: &Path,
    last: usize,
    out: &Path,
    overwrite: bool,
) -> anyhow::Result<Vec<usize>> {
    let history = kept(run_dir)?;
    if history.is_empty() && run_dir.join(super::MODEL_FILE).is_file() {
        // A checkpoint, not a run: say which, and where the checkpoints to average are.
        let int8 = super::read::is_int8_checkpoint(run_dir);
        let weights = run_dir.join(super::MODEL_FILE);
        let from = int8
            .then(|| super::tensor_file::metadata_value(&weights, super::int8_file::QUANTIZED_FROM))
            .flatten();
        anyhow::bail!(
            "{} is {}, not a run directory: average the kept checkpoints of a run (its \
             {KEPT_DIR}/step-N/){}",
            run_dir.display(),
            if int8 {
                "an int8 checkpoint (transformer quantize's), whose weights cannot be averaged"
            } else {
                "a checkpoint"
            },
            from.map_or(String::new(), |from| format!(
                " (it was quantized from {from}; average the run that one came from)"
            ))
        );
    }
    if history.len() < last {
        anyhow::bail!(
            "{} keeps {} checkpoint(s) in {KEPT_DIR}/, fewer than the {last} to average; set \
             training.keep_last = {last} (or more) and train, or average fewer",
            run_dir.display(),
            history.len()
        );
    }
    let chosen = &history[history.len() - last..];
    let mut sources: Vec<&Path> = chosen.iter().map(|(_, dir)| dir.as_path()).collect();
    sources.push(run_dir);
    super::replace::check_before_lock(out, &sources)?;
    let destination = Destination::lock(out, WhenHeld::BRIEFLY)?;
    super::replace::check(out, &sources, super::replace::Kind::Float)?;
    if !overwrite && std::fs::symlink_metadata(out).is_ok() && !is_own_average(out, run_dir) {
        return Err(super::OutRefused::Exists {
            out: out.to_path_buf(),
        }
        .into());
    }
    let device = Device::Cpu;
    let mut sums: HashMap<String, Tensor> = HashMap::new();
    let mut newest = None;
    for (step, dir) in chosen {
        let (config, tokenizers, weights) = read_parts(dir, &device)?;
        weights.refuse_int8("cannot be averaged")?;
        let tensors = weights.tensors;
        if !sums.is_empty() && sums.len() != tensors.len() {
            anyhow::bail!(
                "{} holds {} tensors but the checkpoints before it {}; they are not of one run",
                dir.display(),
                tensors.len(),
                sums.len()
            );
        }
        for (name, tensor) in tensors {
            let tensor = tensor.to_dtype(DType::F64)?;
            let sum = match sums.remove(&name) {
                None if *step == chosen[0].0 => tensor,
                None => anyhow::bail!("{} has {name}, which the others lack", dir.display()),
                Some(sum) if sum.shape() != tensor.shape() => anyhow::bail!(
                    "{name} is {:?} in {} but {:?} before it; the checkpoints are not of one run",
                    tensor.dims(),
                    dir.display(),
                    sum.dims()
                ),
                Some(sum) => (sum + tensor)?,
            };
            sums.insert(name, sum);
        }
        newest = Some((config, tokenizers));
    }
    let Some((config, tokenizers)) = newest else {
        anyhow::bail!("cannot average no checkpoints: ask for at least 1")
    };
    let mut tensors = Vec::with_capacity(sums.len());
    for (name, sum) in sums {
        tensors.push((name, (sum / last as f64)?.to_dtype(DType::F32)?));
    }
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    destination.save_contents(&CheckpointContents {
        config: &config,
        tokenizers: &tokenizers,
        tensors: &tensors,
        resume: None,
    })?;
    Ok(chosen.iter().map(|(step, _)| *step).collect())
}
