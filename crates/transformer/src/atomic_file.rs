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
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(tmp)?;
        file.write_all(bytes)?;
        Ok(())
    })
}

/// Lets `write` fill a temporary file beside `path` (created empty first, under a fresh name
/// no other file has, so that an unwritable directory gives the operating system's one-line
/// reason and a planted file or link is never written through), then syncs it and renames it
/// over `path`, keeping an existing file's permissions. A link is followed: its target is
/// replaced, the link kept. A device or pipe (`/dev/null`, `/dev/stdout`) is written in place,
/// as it cannot be replaced. The temporary name keeps `path`'s extension, for writers that
/// pick a format from it. Errors name `path`, not the temporary file.
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&Path) -> Result<(), Box<dyn std::error::Error>>,
) -> anyhow::Result<()> {
    let fail = |e: Box<dyn std::error::Error>| {
        anyhow::anyhow!("cannot write {}: {e}; {}", path.display(), advice_for(&*e))
    };
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let existing = std::fs::metadata(&target).ok();
    if existing
        .as_ref()
        .is_some_and(|m| !m.is_file() && !m.is_dir())
    {
        return write(&target).map_err(fail);
    }
    let tmp = create_temporary_beside(&target).map_err(|e| fail(e.into()))?;
    let outcome = write(&tmp)
        .and_then(|()| Ok(File::open(&tmp)?.sync_all()?))
        .and_then(|()| {
            if let Some(metadata) = &existing {
                std::fs::set_permissions(&tmp, metadata.permissions())?;
            }
            Ok(())
        })
        .and_then(|()| Ok(std::fs::rename(&tmp, &target)?));
    outcome.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(e)
    })?;
    remove_stale_temporaries(&target);
    Ok(())
}

/// Temporaries of `path` that writers killed before their rename left: the old fixed name
/// `.tmp.NAME`, and `.tmp-XXXXXXXX.NAME` older than a minute (a younger one may be another
/// writer's, still writing).
fn remove_stale_temporaries(path: &Path) {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return;
    };
    let name = name.to_string_lossy();
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(temporary) = Temporary::named(&file).filter(|t| t.target == name) else {
            continue;
        };
        let stale = temporary.legacy
            || entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > std::time::Duration::from_secs(60));
        if stale && entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Removes every temporary a killed writer left in `dir` (`.tmp-XXXXXXXX.NAME`, and the old
/// `.tmp.NAME`), whatever its age: for a caller that holds the lock of everything written
/// there (a run directory's), so that no writer is at work.
pub fn remove_temporaries(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let ours = Temporary::named(&file).is_some();
        if ours && entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// A temporary [`write_atomic_with`] writes before its rename, recognised by its name.
pub struct Temporary<'a> {
    /// The name it is renamed to.
    pub target: &'a str,
    /// The old fixed form `.tmp.NAME`, which no writer makes now.
    pub legacy: bool,
}

impl<'a> Temporary<'a> {
    /// `.tmp-XXXXXXXX.NAME` (eight hex digits) or `.tmp.NAME`; `None` for any other name.
    pub fn named(file: &'a str) -> Option<Self> {
        if let Some(target) = file.strip_prefix(".tmp.") {
            return Some(Temporary {
                target,
                legacy: true,
            });
        }
        let (hex, target) = file.strip_prefix(".tmp-")?.split_once('.')?;
        let random = hex.len() == 8 && hex.bytes().all(|b| b.is_ascii_hexdigit());
        random.then_some(Temporary {
            target,
            legacy: false,
        })
    }
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

/// Creates `.tmp-XXXXXXXX.NAME` in `path`'s directory, a name no file had (created
/// exclusively, so a file or link planted there is never written through).
fn create_temporary_beside(path: &Path) -> std::io::Result<PathBuf> {
    let Some(name) = path.file_name() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a file path",
        ));
    };
    loop {
        let tmp = path.with_file_name(format!(
            ".tmp-{:08x}.{}",
            rand::random::<u32>(),
            name.to_string_lossy()
        ));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
        {
            Ok(_) => return Ok(tmp),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
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
        assert!(!err.contains(".tmp-"), "{err}");
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

    #[cfg(unix)]
    #[test]
    fn a_link_is_followed_a_device_written_in_place_and_permissions_kept() {
        use std::os::unix::fs::{FileTypeExt, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("victim");
        std::fs::write(&target, b"old").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        let mode = std::fs::metadata(&target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        write_atomic(Path::new("/dev/null"), b"nothing").unwrap();
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
