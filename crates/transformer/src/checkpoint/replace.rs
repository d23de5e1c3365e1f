//! Whether a command may replace an existing directory with the checkpoint it writes
//! (averaging, quantizing): only a checkpoint directory of the kind it
//! writes, holding nothing a checkpoint does not, never one that is or holds what is being
//! read, and never one a training run resumes from.

use std::path::{Path, PathBuf};

use super::{
    tensor_file, CONFIG_FILE, KEPT_DIR, LAST_DIR, METRICS_FILE, MODEL_FILE, OPTIMIZER_FILE,
    STATE_FILE,
};
use crate::tokenize::marian::{SOURCE_SPM, TARGET_SPM, TARGET_VOCAB_FILE, VOCAB_FILE};
use crate::tokenize::tokenizer::{
    JOINT_TOKENIZER_FILE, SRC_TOKENIZER_FILE, SRC_VOCAB_FILE, TGT_TOKENIZER_FILE, TGT_VOCAB_FILE,
};

/// Every file a checkpoint of ours holds; a directory with any other is someone's.
const CHECKPOINT_FILES: [&str; 13] = [
    CONFIG_FILE,
    MODEL_FILE,
    OPTIMIZER_FILE,
    STATE_FILE,
    JOINT_TOKENIZER_FILE,
    SRC_TOKENIZER_FILE,
    TGT_TOKENIZER_FILE,
    SRC_VOCAB_FILE,
    TGT_VOCAB_FILE,
    SOURCE_SPM,
    TARGET_SPM,
    VOCAB_FILE,
    TARGET_VOCAB_FILE,
];

/// The kind of checkpoint a command writes, which is the only kind it replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Float weights, no resume state (averaging).
    Float,
    /// int8 weights (quantizing).
    Int8,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Float => "an earlier averaged checkpoint",
            Self::Int8 => "an earlier int8 checkpoint",
        }
    }
}

/// Why the output directory is not written. The message names it as "the output
/// directory"; [`OutRefused::worded`] names it (and the way to allow a replacement) as the
/// caller does.
#[derive(Debug, thiserror::Error)]
#[error("{}", self.worded("the output directory", "overwrite"))]
pub enum OutRefused {
    /// It is, or holds, what is being read.
    HoldsSource { out: PathBuf, read: PathBuf },
    /// It exists and is not a directory.
    NotADirectory { out: PathBuf },
    /// It is a directory, but not one of the kind written.
    NotReplaceable {
        out: PathBuf,
        why: String,
        kind: Kind,
    },
    /// It exists and replacing was not asked for.
    Exists { out: PathBuf },
    /// It lies inside a run's kept checkpoints, which later averages would count.
    InsideHistory { out: PathBuf, history: PathBuf },
    /// It is a run's `last/` or `best/`, which its training writes.
    RunCheckpoint { out: PathBuf },
}

impl OutRefused {
    /// The message, naming the output directory's setting `out_setting` (`--out`) and the
    /// one that allows replacing it `overwrite_setting` (`--overwrite`).
    pub fn worded(&self, out_setting: &str, overwrite_setting: &str) -> String {
        match self {
            Self::HoldsSource { out, read } => format!(
                "{out_setting} {} is or holds {}, which is being read; write somewhere else",
                out.display(),
                read.display()
            ),
            Self::NotADirectory { out } => format!(
                "{out_setting} {} exists and is not a directory; name a new directory",
                out.display()
            ),
            Self::NotReplaceable { out, why, kind } => format!(
                "{out_setting} {} {why}; only {} is replaced there: write somewhere else",
                out.display(),
                kind.name()
            ),
            Self::InsideHistory { out, history } => format!(
                "{out_setting} {} is inside {}, the run's kept checkpoints, which averaging \
                 reads; write somewhere else",
                out.display(),
                history.display()
            ),
            Self::RunCheckpoint { out } => format!(
                "{out_setting} {} is a training run's own checkpoint, which its training \
                 writes; write somewhere else",
                out.display()
            ),
            Self::Exists { out } => format!(
                "{} already exists; pass {overwrite_setting} to replace it, or {out_setting} DIR to \
                 write elsewhere",
                out.display()
            ),
        }
    }
}

/// The refusals that no other writer's save can change: `out` is or holds one of `sources`,
/// lies in a run's kept checkpoints, or is something other than a directory (a save swaps
/// directories, so `out` is one or is missing at every moment). A writer checks these before
/// it takes `out`'s lock, so that such a refusal names `out` as such, and [`check`]s the rest
/// under the lock, where what `out` holds cannot change under it.
pub fn check_before_lock(out: &Path, sources: &[&Path]) -> Result<(), OutRefused> {
    refuse_inside_a_run(out)?;
    // One look at `out`: another writer may be swapping it at this moment, and two looks
    // could see it there and then gone.
    let Ok(metadata) = std::fs::symlink_metadata(out) else {
        return Ok(());
    };
    let out_real = out.canonicalize().ok();
    for source in sources {
        if let (Some(out_real), Ok(source_real)) = (&out_real, source.canonicalize()) {
            if source_real.starts_with(out_real) {
                return Err(OutRefused::HoldsSource {
                    out: out.to_path_buf(),
                    read: source.to_path_buf(),
                });
            }
        }
    }
    if !metadata.is_dir() && !metadata.file_type().is_symlink() {
        return Err(OutRefused::NotADirectory {
            out: out.to_path_buf(),
        });
    }
    Ok(())
}

/// Refuses `out` when replacing it could lose work: it is or holds one of `sources`, it is
/// not a directory, or it is not a checkpoint of `kind` with only a checkpoint's files in it.
/// Call it holding `out`'s lock (see [`check_before_lock`]).
pub fn check(out: &Path, sources: &[&Path], kind: Kind) -> Result<(), OutRefused> {
    check_before_lock(out, sources)?;
    let Ok(metadata) = std::fs::symlink_metadata(out) else {
        return Ok(());
    };
    if metadata.file_type().is_symlink() {
        // The link is replaced, never what it points to.
        return Ok(());
    }
    let refuse = |why: String| OutRefused::NotReplaceable {
        out: out.to_path_buf(),
        why,
        kind,
    };
    if std::fs::read_dir(out).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name() == OPTIMIZER_FILE || e.file_name() == STATE_FILE)
    }) {
        return Err(refuse("holds a training run's resume state".into()));
    }
    if let Some(why) = foreign_content(out) {
        return Err(refuse(why));
    }
    if !out.join(CONFIG_FILE).is_file() || !out.join(MODEL_FILE).is_file() {
        return Err(refuse(format!(
            "is not a checkpoint (no {CONFIG_FILE} and {MODEL_FILE})"
        )));
    }
    let int8 = tensor_file::file_holds_int8(&out.join(MODEL_FILE));
    match (kind, int8) {
        (Kind::Int8, Some(true)) | (Kind::Float, Some(false)) => Ok(()),
        (Kind::Int8, _) => Err(refuse("holds float weights".into())),
        (Kind::Float, _) => Err(refuse("holds int8 or unreadable weights".into())),
    }
}

/// Refuses an `out` that lies in a training run's kept checkpoints (`RUN/checkpoints/`),
/// where averaging would count it as one of the run's and a resumed run's pruning would
/// delete it.
pub fn refuse_inside_a_run(out: &Path) -> Result<(), OutRefused> {
    // `out` need not exist yet: where it would be is its parent's real path.
    let real = out.canonicalize().ok().or_else(|| {
        let parent = match out.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        Some(parent.canonicalize().ok()?.join(out.file_name()?))
    });
    let Some(real) = real else { return Ok(()) };
    let is_run = |run: &Path| run.join(LAST_DIR).is_dir() || run.join(METRICS_FILE).is_file();
    let own = real
        .file_name()
        .is_some_and(|name| name == LAST_DIR || name == super::BEST_DIR);
    if own && real.parent().is_some_and(is_run) {
        return Err(OutRefused::RunCheckpoint {
            out: out.to_path_buf(),
        });
    }
    for history in real.ancestors().skip(1) {
        let Some(run) = history.parent() else { break };
        if history.file_name().is_some_and(|n| n == KEPT_DIR) && is_run(run) {
            return Err(OutRefused::InsideHistory {
                out: out.to_path_buf(),
                history: history.to_path_buf(),
            });
        }
    }
    Ok(())
}

/// What in `dir` no checkpoint of ours holds (a file of another name, a folder, a link), or
/// that it cannot be read; `None` when it holds a checkpoint's files only.
pub fn foreign_content(dir: &Path) -> Option<String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => return Some(format!("cannot be read ({e})")),
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => return Some(format!("cannot be read ({e})")),
        };
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if !is_file || !CHECKPOINT_FILES.contains(&name.as_ref()) {
            return Some(format!("holds {name}, which no checkpoint has"));
        }
    }
    None
}
