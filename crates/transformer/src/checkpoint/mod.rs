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
mod latest_run;
mod load;
mod lock;

pub mod hugging_face;
mod pth_index;
pub mod quantize;
mod read;
pub(crate) use read::non_finite_count;
mod replace;
mod resolve;
mod strict;
mod tensor_file;
mod tensor_index;
mod write;

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::config::Config;
use crate::metrics::MetricRecord;
use crate::model::Model;
use crate::tokenize::Tokenizers;
pub use latest_run::latest_run;
pub use load::{
    load, load_as, load_for_resume, load_initial_weights, load_tokenizers, InitialWeights,
    ResumeCheckpoint,
};
pub use lock::{DirLock, LockHeld, WhenHeld};
use read::read_parts;
pub use replace::{foreign_content, refuse_inside_a_run, OutRefused};
pub use resolve::{resolve, NoCheckpoint};
pub use strict::model_from_tensors;
pub use write::{save, save_metrics, CheckpointContents, Destination};

/// Clears what interrupted saves left in `run_dir` (beside `last/` and `best/`, among the
/// kept checkpoints, and the temporaries of its metrics and picture), or puts back a
/// checkpoint a crash left only as its retired copy: `train` calls it, holding the run's lock,
/// before its first step, so that a leftover it cannot remove is named before any work is done
/// rather than at the first checkpoint.
pub fn clear_leftovers(run_dir: &Path) -> anyhow::Result<()> {
    for name in [LAST_DIR, BEST_DIR] {
        write::clear_leftovers(&run_dir.join(name))?;
    }
    crate::atomic_file::remove_temporaries(run_dir);
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
/// Where a run keeps its checkpoint history.
pub const KEPT_DIR: &str = "checkpoints";

/// Where `transformer train` puts runs by default, and `translate` looks for the latest.
pub const RUNS_ROOT: &str = "runs";

/// Reads a run directory's `metrics.jsonl`.
pub fn load_metrics(run_dir: &Path) -> anyhow::Result<Vec<MetricRecord>> {
    let path = run_dir.join(METRICS_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        anyhow::anyhow!(
            "cannot read {}: {e}; pass a run directory that training wrote",
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

/// A checkpoint whose model cannot do `task`.
#[derive(Debug, thiserror::Error)]
#[error("{} {}", .dir.display(), .task.refused_by_the_other_family())]
pub struct WrongModel {
    pub dir: PathBuf,
    /// What was asked of it.
    pub task: Task,
}

impl Task {
    /// What a checkpoint of the other family says when asked to do this.
    fn refused_by_the_other_family(self) -> &'static str {
        match self {
            Self::Translate => {
                "holds a decoder-only language model (model.arch = \"decoder-only\"), which \
                 cannot translate"
            }
            Self::Continue => {
                "holds a translation model (model.arch = \"encoder-decoder\"), which cannot \
                 continue a prompt alone"
            }
        }
    }
}

impl Checkpoint {
    /// The model, when it can do `task`; else a [`WrongModel`] naming the checkpoint.
    pub fn model_for(&self, task: Task) -> Result<&Model, WrongModel> {
        match (task, self.model.reads_source()) {
            (Task::Translate, true) | (Task::Continue, false) => Ok(&self.model),
            _ => Err(WrongModel {
                dir: self.dir.clone(),
                task,
            }),
        }
    }
}
