//! Files replaced whole: written to a temporary file beside their final name, synced, then
//! renamed over it, so that a reader (or a crash) sees the old file or the new one, never half
//! of one. Checkpoint metadata, `metrics.jsonl`, `eval --out` and the pictures all go through
//! here.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_atomic_with(path, |tmp| {
        let mut file = File::create(tmp)?;
        file.write_all(bytes)?;
        Ok(())
    })
}

/// Lets `write` fill a temporary file beside `path` (created empty first, so that an
/// unwritable directory gives the operating system's one-line reason), then syncs it and
/// renames it over `path`. The temporary name keeps `path`'s extension, for writers that pick
/// a format from it. Errors name `path`, not the temporary file.
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&Path) -> Result<(), Box<dyn std::error::Error>>,
) -> anyhow::Result<()> {
    let tmp = temporary_beside(path)?;
    let outcome = File::create(&tmp)
        .map_err(Into::into)
        .and_then(|_| write(&tmp))
        .and_then(|()| Ok(File::open(&tmp)?.sync_all()?))
        .and_then(|()| Ok(std::fs::rename(&tmp, path)?));
    outcome.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::anyhow!("cannot write {}: {e}; {}", path.display(), advice_for(&*e))
    })
}

/// What to do about a failed write: the fix for a full disk is not another directory.
pub fn advice_for(error: &(dyn std::error::Error + 'static)) -> &'static str {
    use std::io::ErrorKind;
    let kind = std::iter::successors(Some(error), |e| e.source())
        .find_map(|e| e.downcast_ref::<std::io::Error>())
        .map(std::io::Error::kind);
    match kind {
        Some(ErrorKind::StorageFull | ErrorKind::QuotaExceeded) => {
            "the disk is full: free some space and run the command again"
        }
        Some(ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem) => {
            "pick a path in a directory you can write to"
        }
        Some(ErrorKind::IsADirectory | ErrorKind::DirectoryNotEmpty) => {
            "a directory has that name: pick another path"
        }
        Some(ErrorKind::NotFound) => "create the directory first, or pick another path",
        _ => "check the path and the disk, then run the command again",
    }
}

/// `.tmp.NAME` in `path`'s directory.
fn temporary_beside(path: &Path) -> anyhow::Result<PathBuf> {
    let Some(name) = path.file_name() else {
        anyhow::bail!("{} is not a file path", path.display())
    };
    Ok(path.with_file_name(format!(".tmp.{}", name.to_string_lossy())))
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
    fn a_failed_atomic_write_names_the_file_asked_for_not_the_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("out.txt");
        let err = write_atomic(&path, b"x").unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("cannot write {}: ", path.display())),
            "{err}"
        );
        assert!(!err.contains(".tmp.out.txt"), "{err}");
    }

    #[test]
    fn a_full_disk_is_reported_as_one_not_as_an_unwritable_directory() {
        let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
        assert!(advice_for(&full).contains("disk is full"));
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert!(advice_for(&denied).contains("directory you can write to"));
    }

    #[test]
    fn a_writer_that_fails_leaves_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plot.png");
        write_atomic(&path, b"old").unwrap();
        let err = write_atomic_with(&path, |_| Err("no ink".into())).unwrap_err();
        assert!(err.to_string().contains("no ink"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
