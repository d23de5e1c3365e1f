//! Translated files waiting to be downloaded (`/download_file/ID.NAME`, as LibreTranslate
//! names them). Each is stored under a random 128-bit id in the server's own directory, and
//! found again through an in-memory table: nothing a client sends ever becomes a path, so no
//! name can reach outside the directory. Files expire after `ttl` and the oldest go first
//! beyond `max_files`; the directory is removed when the server stops.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context;
use rand::RngCore;

use super::file_names::safe_file_name;

/// Where translated files are kept, and for how long.
#[derive(Debug, Clone)]
pub struct FileSettings {
    /// The directory; `None`: a fresh one under the system's temporary directory.
    pub dir: Option<PathBuf>,
    /// How long a download link works.
    pub ttl: Duration,
    /// Most files kept at once.
    pub max_files: usize,
    /// Largest upload, in bytes.
    pub max_file_bytes: usize,
    /// Most characters of text a file may hold.
    pub max_file_chars: usize,
    /// Longest the translation of one file may take.
    pub timeout: Duration,
}

/// One stored file.
struct Stored {
    path: PathBuf,
    /// The name it is downloaded as (the upload's, made safe).
    name: String,
    media_type: &'static str,
    expires: Instant,
    stored: Instant,
}

/// The store.
pub struct FileStore {
    dir: PathBuf,
    /// Whether `dir` is ours to remove at the end.
    owned: bool,
    pub settings: FileSettings,
    files: Mutex<HashMap<String, Stored>>,
    /// Files parsed or written at once: each can take a core for seconds.
    pub workers: tokio::sync::Semaphore,
    /// A lane of its own for files of at most [`SMALL_FILE_BYTES`], so that large uploads
    /// holding every worker do not make a short text wait behind them.
    pub small_workers: tokio::sync::Semaphore,
}

/// The size up to which a file takes the small files' lane.
pub const SMALL_FILE_BYTES: usize = 64 * 1024;

/// What a download finds.
pub struct Download {
    pub bytes: Vec<u8>,
    pub name: String,
    pub media_type: &'static str,
}

impl FileStore {
    /// Creates the directory (or a fresh temporary one). Temporary directories that servers
    /// killed before they could clean up left behind are removed.
    /// `dir_setting` names the setting that gives the directory, for errors.
    pub fn open(settings: FileSettings, dir_setting: &str) -> anyhow::Result<Self> {
        let mut settings = settings;
        // Far enough: an `Instant` cannot reach past a few centuries.
        settings.ttl = settings.ttl.min(Duration::from_secs(100 * 365 * 24 * 3600));
        let (dir, owned) = match &settings.dir {
            Some(dir) => {
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
                // Only a directory this server made is closed to others: an existing one
                // keeps the permissions its owner gave it.
                if created {
                    restrict_to_owner(dir);
                }
                remove_left_behind(dir);
                (dir.clone(), false)
            }
            None => {
                let base = std::env::temp_dir();
                remove_abandoned(&base);
                let dir = base.join(format!(
                    "transformer-serve-{}-{:08x}",
                    std::process::id(),
                    rand::rng().next_u32()
                ));
                std::fs::create_dir(&dir).with_context(|| {
                    format!("cannot create {}; give {dir_setting}", dir.display())
                })?;
                restrict_to_owner(&dir);
                (dir, true)
            }
        };
        // A directory the server cannot write to is found now, not by the first client.
        let probe = dir.join(format!(".probe-{:08x}", rand::rng().next_u32()));
        std::fs::write(&probe, b"").with_context(|| {
            format!(
                "cannot write in {dir_setting} {}; give a writable directory",
                dir.display()
            )
        })?;
        let _ = std::fs::remove_file(&probe);
        Ok(Self {
            dir,
            owned,
            settings,
            files: Mutex::new(HashMap::new()),
            workers: tokio::sync::Semaphore::new(2),
            small_workers: tokio::sync::Semaphore::new(1),
        })
    }

    /// Stores `bytes`, downloaded later as `name`; returns the id and name of its link
    /// (`ID.NAME`).
    pub fn store(
        &self,
        bytes: &[u8],
        name: &str,
        media_type: &'static str,
    ) -> anyhow::Result<String> {
        let mut id_bytes = [0u8; 16];
        rand::rng().fill_bytes(&mut id_bytes);
        let id: String = id_bytes.iter().map(|b| format!("{b:02x}")).collect();
        let path = self.dir.join(&id);
        crate::atomic_file::write_atomic(&path, bytes)
            .with_context(|| format!("storing a translated file in {}", self.dir.display()))?;
        let name = safe_file_name(name);
        let now = Instant::now();
        let expires = now.checked_add(self.settings.ttl).unwrap_or(now);
        let evicted = {
            let mut files = self.lock();
            let mut evicted = expired(&mut files, now);
            while files.len() >= self.settings.max_files {
                let Some(oldest) = files
                    .iter()
                    .min_by_key(|(_, f)| f.stored)
                    .map(|(id, _)| id.clone())
                else {
                    break;
                };
                evicted.extend(files.remove(&oldest));
            }
            files.insert(
                id.clone(),
                Stored {
                    path,
                    name: name.clone(),
                    media_type,
                    expires,
                    stored: now,
                },
            );
            evicted
        };
        remove_files(evicted);
        Ok(format!("{id}.{name}"))
    }

    /// The file a link names (`ID.NAME`), if it exists and has not expired.
    pub fn find(&self, link: &str) -> Option<Download> {
        let (id, _) = link.split_once('.').unwrap_or((link, ""));
        if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let (path, name, media_type) = {
            let files = self.lock();
            let stored = files.get(id)?;
            if stored.expires <= Instant::now() {
                return None;
            }
            (stored.path.clone(), stored.name.clone(), stored.media_type)
        };
        let bytes = std::fs::read(path).ok()?;
        Some(Download {
            bytes,
            name,
            media_type,
        })
    }

    /// Removes the files whose links have expired.
    pub fn sweep(&self) {
        let evicted = expired(&mut self.lock(), Instant::now());
        remove_files(evicted);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Stored>> {
        // A panic while holding the lock leaves the table consistent (each change is one
        // insert or remove).
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for FileStore {
    fn drop(&mut self) {
        let files: Vec<Stored> = self.lock().drain().map(|(_, f)| f).collect();
        remove_files(files);
        if self.owned {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn expired(files: &mut HashMap<String, Stored>, now: Instant) -> Vec<Stored> {
    let ids: Vec<String> = files
        .iter()
        .filter(|(_, f)| f.expires <= now)
        .map(|(id, _)| id.clone())
        .collect();
    ids.iter().filter_map(|id| files.remove(id)).collect()
}

fn remove_files(files: Vec<Stored>) {
    for file in files {
        let _ = std::fs::remove_file(file.path);
    }
}

/// Files this server names (32 hex digits, or their temporaries) that a server killed before
/// it could clean up left in `dir`; nothing else there is touched.
fn remove_left_behind(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let ours = |name: &str| name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit());
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let temporary = name
            .strip_prefix(".tmp-")
            .and_then(|rest| rest.split_once('.'))
            .is_some_and(|(_, id)| ours(id));
        if (ours(&name) || temporary) && entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Temporary directories of servers that no longer run (killed before they could remove
/// theirs).
fn remove_abandoned(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name
            .to_str()
            .and_then(|n| n.strip_prefix("transformer-serve-"))
        else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() && Path::new("/proc/self").exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
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
    use super::*;

    fn settings(dir: &Path, ttl: Duration, max_files: usize) -> FileSettings {
        FileSettings {
            dir: Some(dir.to_path_buf()),
            ttl,
            max_files,
            max_file_bytes: 1 << 20,
            max_file_chars: 1000,
            timeout: Duration::from_secs(1),
        }
    }

    #[test]
    fn a_link_finds_its_file_until_it_expires_and_no_other_name_finds_anything() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            FileStore::open(settings(dir.path(), Duration::from_millis(200), 8), "dir").unwrap();
        let link = store.store(b"hello", "a.txt", "text/plain").unwrap();
        assert!(link.ends_with(".a.txt"));
        assert_eq!(store.find(&link).unwrap().bytes, b"hello");
        for bad in [
            "../a.txt",
            "a.txt",
            "",
            &link[..31],
            "00000000000000000000000000000000.a.txt",
        ] {
            assert!(store.find(bad).is_none(), "{bad}");
        }
        std::thread::sleep(Duration::from_millis(250));
        assert!(store.find(&link).is_none());
        store.sweep();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[cfg(unix)]
    #[test]
    fn an_existing_directory_keeps_its_permissions_and_other_files() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
        let left = "0123456789abcdef0123456789abcdef";
        std::fs::write(dir.path().join(left), b"a killed server's").unwrap();
        let store = FileStore::open(settings(dir.path(), Duration::MAX, 8), "dir").unwrap();
        let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        assert!(dir.path().join("notes.txt").exists());
        assert!(!dir.path().join(left).exists());
        // A time to live too long for the clock is capped, not a panic.
        assert!(store.store(b"x", "x.txt", "text/plain").is_ok());
    }

    #[test]
    fn the_oldest_file_goes_first_beyond_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            FileStore::open(settings(dir.path(), Duration::from_secs(60), 2), "dir").unwrap();
        let first = store.store(b"1", "1.txt", "text/plain").unwrap();
        std::thread::sleep(Duration::from_millis(2));
        let second = store.store(b"2", "2.txt", "text/plain").unwrap();
        std::thread::sleep(Duration::from_millis(2));
        let third = store.store(b"3", "3.txt", "text/plain").unwrap();
        assert!(store.find(&first).is_none());
        assert!(store.find(&second).is_some() && store.find(&third).is_some());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
