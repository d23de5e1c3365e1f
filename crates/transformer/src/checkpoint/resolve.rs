//! Which checkpoint a path names: a checkpoint directory, a Hugging Face MarianMT
//! directory, or a run directory's `best/` or `last/`, with a retired copy put back first.

use std::path::{Path, PathBuf};

use anyhow::bail;

use super::{hugging_face, write, BEST_DIR, LAST_DIR, MODEL_FILE};

/// A checkpoint that is not there to read; the caller says how to get one.
#[derive(Debug, thiserror::Error)]
pub enum NoCheckpoint {
    #[error("checkpoint directory {} does not exist", path.display())]
    Missing { path: PathBuf },
    #[error("no {kind} checkpoint found under {}/", root.display())]
    NoneUnder { root: PathBuf, kind: &'static str },
}

/// The checkpoint a path names: the directory itself when it holds weights (or is a Hugging
/// Face MarianMT directory), else its `best/`, else its `last/` (so a run directory works
/// too). A checkpoint that a save killed between its two renames left only as its retired
/// copy is put back first (see [`super::write::restore_retired`]).
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
        return Err(NoCheckpoint::Missing {
            path: path.to_path_buf(),
        }
        .into());
    }
    if hugging_face::is_hugging_face_dir(path) {
        return Ok(path.to_path_buf());
    }
    // Weights that are there but not a file (a FIFO, a link to a device) are named as such,
    // not taken for missing ones.
    let mut candidates = std::iter::once(path.to_path_buf()).chain(
        [BEST_DIR, LAST_DIR]
            .into_iter()
            .map(|name| write::restore_retired(&path.join(name))),
    );
    candidates
        .find_map(|dir| {
            let weights = dir.join(MODEL_FILE);
            match crate::small_file::not_regular(&weights) {
                Some(what) => Some(Err(crate::small_file::not_regular_error(&weights, what))),
                None => weights.is_file().then_some(Ok(dir)),
            }
        })
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{} holds no {MODEL_FILE} (nor best/ or last/ with one); the checkpoint is \
                 incomplete, train again or pick another run",
                path.display()
            )
        })?
}

#[cfg(test)]
mod tests {
    use super::*;

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
