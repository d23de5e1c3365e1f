//! Refusing an `--out` that would overwrite what a command reads: one of its input files,
//! or a file of the model (or the run around it) it translates with.

use std::path::{Path, PathBuf};

use crate::checkpoint;
use crate::errors::UsageError;

/// Refuses an `--out` that is one of the command's input files (`inputs`: each flag and its
/// file): the output would replace what it is made from.
pub fn refuse_output_onto_input(out: &Path, inputs: &[(&str, &Path)]) -> Result<(), UsageError> {
    use std::os::unix::fs::MetadataExt;
    let Ok(written) = std::fs::metadata(out) else {
        return Ok(());
    };
    for (flag, input) in inputs {
        let same = std::fs::metadata(input)
            .is_ok_and(|read| read.dev() == written.dev() && read.ino() == written.ino());
        if same && input.as_os_str() != "-" {
            return Err(UsageError(format!(
                "--out {} is also the {flag} input: writing it would replace what is read; \
                 choose another --out",
                out.display()
            )));
        }
    }
    Ok(())
}

/// Refuses an `--out` that is an existing file under the checkpoint directory a model was
/// read from (`loaded`), the run around it, or what `--checkpoint` named (`given`): writing it
/// would damage the model it is made with, or its run. A link is refused where it lies (a
/// Hub snapshot's files are links into its blobs) and where it points.
pub fn refuse_output_into_checkpoint(
    out: &Path,
    given: Option<&Path>,
    loaded: &Path,
) -> Result<(), UsageError> {
    if std::fs::symlink_metadata(out).is_err() {
        return Ok(());
    }
    // A run's best/ or last/ was read: the run around it is protected too.
    let run = loaded.parent().filter(|_| {
        loaded
            .file_name()
            .is_some_and(|name| name == checkpoint::BEST_DIR || name == checkpoint::LAST_DIR)
    });
    let protected: Vec<&Path> = given.into_iter().chain([loaded]).chain(run).collect();
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty());
    let as_named = parent
        .unwrap_or(Path::new("."))
        .canonicalize()
        .ok()
        .zip(out.file_name())
        .map(|(dir, name)| dir.join(name));
    let written: Vec<PathBuf> = as_named
        .into_iter()
        .chain(out.canonicalize().ok())
        .collect();
    for dir in protected {
        let Ok(dir_path) = dir.canonicalize() else {
            continue;
        };
        if written.iter().any(|w| w.starts_with(&dir_path)) {
            return Err(UsageError(format!(
                "--out {} is inside the checkpoint {}: writing it would damage the model or \
                 its run; choose another --out",
                out.display(),
                dir.display()
            )));
        }
    }
    Ok(())
}
