//! The run `translate` (or `generate`) uses when no checkpoint is named: the one under the
//! runs root whose model can do the task and whose weights were written last.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::{resolve, NoCheckpoint, Task, CONFIG_FILE, MODEL_FILE};
use crate::config::Config;

/// The run under `root` whose model can do `task` and whose weights were written last.
pub fn latest_run(root: &Path, task: Task) -> anyhow::Result<PathBuf> {
    let none_found = || NoCheckpoint::NoneUnder {
        root: root.to_path_buf(),
        kind: match task {
            Task::Translate => "translation",
            Task::Continue => "language-model",
        },
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
    best.map(|(_, dir)| dir).ok_or_else(|| none_found().into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_runs_directory_is_a_typed_error_naming_it() {
        // The binary adds how to get a checkpoint (tests/cli.rs).
        let dir = tempfile::tempdir().unwrap();
        let err = latest_run(&dir.path().join("runs"), Task::Translate).unwrap_err();
        let Some(NoCheckpoint::NoneUnder { root, kind }) = err.downcast_ref::<NoCheckpoint>()
        else {
            panic!("{err:#}")
        };
        assert_eq!(root, &dir.path().join("runs"));
        assert_eq!(*kind, "translation");
        assert!(
            err.to_string().contains("no translation checkpoint found"),
            "{err}"
        );
    }
}
