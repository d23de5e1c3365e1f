//! The directory translated files are kept in: which one (a given one, or the user's own
//! under the system's temporary directory, refused unless private), its layout (a file
//! `transformer-ID` beside its record `transformer-ID.json`, ID 32 hex digits, each mode 0600
//! and read only as a regular file, never through a link), and the sweep that removes what no
//! link can reach any more. Nothing named otherwise is read or removed: a user's own files in
//! the directory (an md5-named download, say) are left alone.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use transformer::atomic_file::Temporary;

/// How long a file without its record, or a temporary, may lie before a sweep takes it for
/// the leftover of a server killed between two writes (a live writer finishes within this).
const LEFTOVER_AGE: Duration = Duration::from_secs(60);

/// Largest record read back.
const MOST_RECORD_BYTES: u64 = 64 * 1024;

/// Every stored file's name starts with this, its record's too.
const PREFIX: &str = "transformer-";

/// What is kept beside a stored file (`transformer-ID.json`): how a server that did not store it serves
/// it, and when any server may remove it.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Record {
    /// The name it is downloaded as (the upload's, made safe).
    pub(super) name: String,
    pub(super) media_type: String,
    /// When its link expires, in milliseconds since 1970.
    pub(super) expires_unix_ms: u64,
}

/// A given directory: created when missing (mode 0700), an existing one kept as its owner
/// made it.
pub(super) fn given_dir(dir: &Path, dir_setting: &str) -> anyhow::Result<PathBuf> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!(
            "{dir_setting} {} is not a directory; give a directory",
            dir.display()
        );
    }
    let created = !dir.exists();
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "cannot create {dir_setting} {}; give a writable directory",
            dir.display()
        )
    })?;
    // Only a directory this server made is closed to others: an existing one keeps the
    // permissions its owner gave it.
    if created {
        restrict_to_owner(dir);
    } else if writable_by_others(dir) {
        log::warn!(
            "{dir_setting} {} is writable by other users, who could place files there for \
             this server to hand out; give a directory of your own",
            dir.display()
        );
    }
    Ok(dir.to_path_buf())
}

#[cfg(unix)]
fn writable_by_others(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o022 != 0)
}

#[cfg(not(unix))]
fn writable_by_others(_dir: &Path) -> bool {
    false
}

/// This user's directory under the system's temporary one, shared by the user's servers:
/// made mode 0700, and refused unless it is a real directory of the user's closed to others
/// (another user could have made it first, to read or replace the files).
pub(super) fn users_dir(dir_setting: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("transformer-serve-files-{}", user_id()));
    match std::fs::create_dir(&dir) {
        Ok(()) => restrict_to_owner(&dir),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => anyhow::bail!(
            "cannot create {}: {e}; give {dir_setting} DIR",
            dir.display()
        ),
    }
    if let Some(why) = not_private(&dir) {
        anyhow::bail!(
            "{} {why}, so translated files are not kept there; remove it, or give \
             {dir_setting} DIR",
            dir.display()
        );
    }
    Ok(dir)
}

#[cfg(unix)]
fn user_id() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

#[cfg(not(unix))]
fn user_id() -> u32 {
    0
}

/// Why `dir` is not a directory only this user can read; `None` when it is.
#[cfg(unix)]
fn not_private(dir: &Path) -> Option<&'static str> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return Some("cannot be examined");
    };
    if !meta.file_type().is_dir() {
        Some("is not a directory (a link, or a file)")
    } else if meta.uid() != user_id() {
        Some("belongs to another user")
    } else if meta.mode() & 0o077 != 0 {
        Some("is open to other users (its mode is not 0700)")
    } else {
        None
    }
}

#[cfg(not(unix))]
fn not_private(_dir: &Path) -> Option<&'static str> {
    None
}

/// Whether `id` is one this store names files by: 32 hex digits.
pub(super) fn is_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The stored file of `id`: `transformer-ID`.
pub(super) fn file_name(id: &str) -> String {
    format!("{PREFIX}{id}")
}

/// The record of `id`: `transformer-ID.json`.
pub(super) fn record_name(id: &str) -> String {
    format!("{PREFIX}{id}.json")
}

pub(super) fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The record of file `id`, if there is a readable one.
pub(super) fn read_record(dir: &Path, id: &str) -> Option<Record> {
    let bytes = read_regular(&dir.join(record_name(id)), MOST_RECORD_BYTES)?;
    serde_json::from_slice(&bytes).ok()
}

/// The stored file of `id`, if it is a regular file.
pub(super) fn read_stored(dir: &Path, id: &str) -> Option<Vec<u8>> {
    read_regular(&dir.join(file_name(id)), u64::MAX)
}

/// The bytes of the regular file at `path` (at most `most`), opened without following a link
/// and refused when it has another name (a link or hard link planted in the directory would
/// hand out whatever it points to).
fn read_regular(path: &Path, most: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options.open(path).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > most || linked_elsewhere(&meta) {
        return None;
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(most).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Whether the file has a name outside the store too (a hard link planted there): the store
/// writes each file by a rename, one name only.
#[cfg(unix)]
fn linked_elsewhere(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    meta.nlink() > 1
}

#[cfg(not(unix))]
fn linked_elsewhere(_meta: &std::fs::Metadata) -> bool {
    false
}

/// Writes `bytes` as `name` in `dir`, atomically, readable by its owner only.
pub(super) fn write_private(dir: &Path, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
    transformer::atomic_file::write_atomic_with(&dir.join(name), |tmp| {
        let mut file = std::fs::OpenOptions::new().write(true).open(tmp)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
        std::io::Write::write_all(&mut file, bytes)?;
        Ok(())
    })
}

/// Removes file `id` and its record (the record first: a link stops working before its
/// file goes).
pub(super) fn remove_stored(dir: &Path, id: &str) {
    let _ = std::fs::remove_file(dir.join(record_name(id)));
    let _ = std::fs::remove_file(dir.join(file_name(id)));
}

/// Removes from `dir` what this store names and no link can reach any more: files whose
/// record says they expired by `now` (or is unreadable), and files without a record and
/// temporaries older than [`LEFTOVER_AGE`] (left by a server killed between its writes).
/// Nothing else there is touched.
pub(super) fn sweep_dir(dir: &Path, now: SystemTime) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now_ms = unix_ms(now);
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let old = meta
            .modified()
            .ok()
            .and_then(|modified| now.duration_since(modified).ok())
            .is_some_and(|age| age > LEFTOVER_AGE);
        let stored = name.strip_prefix(PREFIX);
        if let Some(id) = stored
            .and_then(|n| n.strip_suffix(".json"))
            .filter(|id| is_id(id))
        {
            let expired = read_record(dir, id).is_none_or(|r| r.expires_unix_ms <= now_ms);
            if expired {
                remove_stored(dir, id);
            }
        } else if let Some(id) = stored.filter(|id| is_id(id)) {
            if old && std::fs::symlink_metadata(dir.join(record_name(id))).is_err() {
                let _ = std::fs::remove_file(entry.path());
            }
        } else if old && is_temporary(&name) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// `.tmp-XXXXXXXX.transformer-ID` or `.tmp-XXXXXXXX.transformer-ID.json`: a file or record
/// being written.
fn is_temporary(name: &str) -> bool {
    Temporary::named(name)
        .filter(|temporary| !temporary.legacy)
        .and_then(|temporary| temporary.target.strip_prefix(PREFIX))
        .is_some_and(|id| is_id(id.strip_suffix(".json").unwrap_or(id)))
}

#[cfg(unix)]
fn restrict_to_owner(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
}

#[cfg(not(unix))]
fn restrict_to_owner(_dir: &Path) {}

#[cfg(test)]
mod tests {
    use super::super::{FileSettings, FileStore};
    use super::*;

    fn settings(dir: &Path) -> FileSettings {
        FileSettings {
            dir: Some(dir.to_path_buf()),
            ttl: Duration::from_secs(60),
            max_files: 8,
            max_file_bytes: 1 << 20,
            max_file_chars: 1000,
            timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn a_record_that_expired_or_is_damaged_takes_its_file_with_it_at_the_next_sweep() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::open(settings(dir.path()), "dir").unwrap();
        let kept = store
            .store(b"1", "1.txt", "text/plain; charset=utf-8")
            .unwrap();
        let damaged = store
            .store(b"2", "2.txt", "text/plain; charset=utf-8")
            .unwrap();
        let id = |link: &str| link.split_once('.').unwrap().0.to_string();
        std::fs::write(dir.path().join(record_name(&id(&damaged))), b"{").unwrap();
        assert!(store.find(&damaged).is_none());
        sweep_dir(dir.path(), SystemTime::now());
        assert!(!dir.path().join(id(&damaged)).exists());
        assert!(store.find(&kept).is_some());
        // An hour on, every link has expired and the directory is empty.
        sweep_dir(dir.path(), SystemTime::now() + Duration::from_secs(3600));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[cfg(unix)]
    #[test]
    fn a_shared_directory_open_to_others_or_a_link_is_not_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let own = dir.path().join("own");
        std::fs::create_dir(&own).unwrap();
        restrict_to_owner(&own);
        assert_eq!(not_private(&own), None);
        std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(not_private(&own).unwrap().contains("open to other users"));
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&own, &link).unwrap();
        assert!(not_private(&link).unwrap().contains("not a directory"));
    }
}
