//! Whether a command may replace an existing directory with the checkpoint it writes
//! (`average --out`, `quantize --out --overwrite`): only a checkpoint directory of the kind it
//! writes, holding nothing a checkpoint does not, never one that is or holds what is being
//! read, and never one a training run resumes from.

use std::path::Path;

use anyhow::bail;

use super::{tensor_file, CONFIG_FILE, MODEL_FILE, OPTIMIZER_FILE, STATE_FILE};

/// The kind of checkpoint a command writes, which is the only kind it replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Float weights, no resume state (`average`).
    Float,
    /// int8 weights (`quantize`).
    Int8,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Float => "an earlier averaged checkpoint",
            Self::Int8 => "an earlier int8 checkpoint (`transformer quantize`)",
        }
    }
}

/// Refuses `out` (given as `flag`, for errors) when replacing it could lose work: it is or
/// holds one of `sources`, it is not a directory, or it is not a checkpoint of `kind` with
/// only a checkpoint's files in it.
pub fn check(out: &Path, flag: &str, sources: &[&Path], kind: Kind) -> anyhow::Result<()> {
    if std::fs::symlink_metadata(out).is_err() {
        return Ok(());
    }
    let out_real = out.canonicalize().ok();
    for source in sources {
        if let (Some(out_real), Ok(source_real)) = (&out_real, source.canonicalize()) {
            if source_real.starts_with(out_real) {
                bail!(
                    "{flag} {} is or holds {}, which is being read; write somewhere else",
                    out.display(),
                    source.display()
                );
            }
        }
    }
    if std::fs::symlink_metadata(out).is_ok_and(|m| m.file_type().is_symlink()) {
        // The link is replaced, never what it points to.
        return Ok(());
    }
    if !out.is_dir() {
        bail!(
            "{flag} {} exists and is not a directory; name a new directory",
            out.display()
        );
    }
    let refuse = |why: String| {
        anyhow::anyhow!(
            "{flag} {} {why}; only {} is replaced: choose another {flag}",
            out.display(),
            kind.name()
        )
    };
    let entries = std::fs::read_dir(out).map_err(|e| refuse(format!("cannot be read ({e})")))?;
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name == OPTIMIZER_FILE || name == STATE_FILE {
            return Err(refuse("holds a training run's resume state".into()));
        }
        let written = [".toml", ".safetensors", ".txt", ".json", ".spm"]
            .iter()
            .any(|ext| name.ends_with(ext));
        if !entry.file_type()?.is_file() || !written {
            return Err(refuse(format!("holds {name}, which no checkpoint has")));
        }
    }
    if !out.join(CONFIG_FILE).is_file() || !out.join(MODEL_FILE).is_file() {
        return Err(refuse(format!(
            "is not a checkpoint (no {CONFIG_FILE} and {MODEL_FILE})"
        )));
    }
    let int8 = tensor_file::holds_int8(&out.join(MODEL_FILE));
    match (kind, int8) {
        (Kind::Int8, Some(true)) | (Kind::Float, Some(false)) => Ok(()),
        (Kind::Int8, _) => Err(refuse("holds float weights".into())),
        (Kind::Float, _) => Err(refuse("holds int8 or unreadable weights".into())),
    }
}
