//! Translated files waiting to be downloaded (`/download_file/ID.NAME`, as LibreTranslate
//! names them). Each is stored under a random 128-bit id, beside a record of the name it is
//! downloaded as, its media type and when its link expires (see [`directory`]), so that a link
//! outlives the server that made it: after a restart, or from another server sharing the
//! directory, it works until it expires (LibreTranslate's files outlive a restart too).
//! Nothing a client sends ever becomes a path, so no name can reach outside the directory.
//! Whichever server sweeps the directory (at start and every minute) removes files whose links
//! have expired; no server removes a file whose link still works. The oldest of a server's own
//! files go first beyond `max_files`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use rand::RngCore;

use super::file_names::safe_file_name;
use directory::{
    file_name, given_dir, is_id, read_record, read_stored, record_name, remove_stored, sweep_dir,
    unix_ms, users_dir, write_private, Record,
};
use transformer_documents::DocumentFormat;

mod directory;

/// Where translated files are kept, and for how long.
#[derive(Debug, Clone)]
pub struct FileSettings {
    /// The directory; `None`: this user's own under the system's temporary directory
    /// (`transformer-serve-files-UID`, mode 0700), which every server of the user shares.
    pub dir: Option<PathBuf>,
    /// How long a download link works.
    pub ttl: Duration,
    /// Most files this server keeps at once.
    pub max_files: usize,
    /// Largest upload, in bytes.
    pub max_file_bytes: usize,
    /// Most characters of text a file may hold.
    pub max_file_chars: usize,
    /// Longest the translation of one file may take.
    pub timeout: Duration,
}

/// One of this server's own files, for the `max_files` bound.
struct Own {
    stored: Instant,
}

/// The store.
pub struct FileStore {
    dir: PathBuf,
    pub settings: FileSettings,
    own: Mutex<HashMap<String, Own>>,
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
    /// Opens the directory (created when missing) and sweeps it; `dir_setting` names the
    /// setting that gives the directory, for errors.
    pub fn open(settings: FileSettings, dir_setting: &str) -> anyhow::Result<Self> {
        let mut settings = settings;
        // Far enough: a time cannot reach past a few centuries.
        settings.ttl = settings.ttl.min(Duration::from_secs(100 * 365 * 24 * 3600));
        let dir = match &settings.dir {
            Some(dir) => given_dir(dir, dir_setting)?,
            None => users_dir(dir_setting)?,
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
        sweep_dir(&dir, SystemTime::now());
        Ok(Self {
            dir,
            settings,
            own: Mutex::new(HashMap::new()),
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
        let name = safe_file_name(name);
        let expires = SystemTime::now()
            .checked_add(self.settings.ttl)
            .unwrap_or_else(SystemTime::now);
        let record = Record {
            name: name.clone(),
            media_type: media_type.to_string(),
            expires_unix_ms: unix_ms(expires),
        };
        let storing = || {
            write_private(&self.dir, &file_name(&id), bytes)?;
            // The record last: a file is served only once it is whole.
            write_private(&self.dir, &record_name(&id), &serde_json::to_vec(&record)?)
        };
        if let Err(error) = storing() {
            // A file without its record (the disk full by then) would hold its space until a
            // sweep a minute later.
            remove_stored(&self.dir, &id);
            return Err(error)
                .with_context(|| format!("storing a translated file in {}", self.dir.display()));
        }
        let evicted = {
            let mut own = self.lock();
            let mut evicted = Vec::new();
            while own.len() >= self.settings.max_files {
                let Some(oldest) = own
                    .iter()
                    .min_by_key(|(_, f)| f.stored)
                    .map(|(id, _)| id.clone())
                else {
                    break;
                };
                own.remove(&oldest);
                evicted.push(oldest);
            }
            own.insert(
                id.clone(),
                Own {
                    stored: Instant::now(),
                },
            );
            evicted
        };
        for id in evicted {
            remove_stored(&self.dir, &id);
        }
        Ok(format!("{id}.{name}"))
    }

    /// The file a link names (`ID.NAME`), if it is in the directory and has not expired,
    /// whichever server stored it.
    pub fn find(&self, link: &str) -> Option<Download> {
        let (id, _) = link.split_once('.').unwrap_or((link, ""));
        if !is_id(id) {
            return None;
        }
        let record = read_record(&self.dir, id)?;
        if record.expires_unix_ms <= unix_ms(SystemTime::now()) {
            return None;
        }
        let media_type = known_media_type(&record.media_type)?;
        let bytes = read_stored(&self.dir, id)?;
        Some(Download {
            bytes,
            name: safe_file_name(&record.name),
            media_type,
        })
    }

    /// Removes the files whose links have expired (this server's and any other's).
    pub fn sweep(&self) {
        sweep_dir(&self.dir, SystemTime::now());
        let mut own = self.lock();
        own.retain(|id, _| self.dir.join(record_name(id)).exists());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Own>> {
        // A panic while holding the lock leaves the table consistent (each change is one
        // insert or remove).
        self.own.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A stopping server removes what has expired; the files whose links still work stay for
/// the server that comes after it.
impl Drop for FileStore {
    fn drop(&mut self) {
        sweep_dir(&self.dir, SystemTime::now());
    }
}

/// The media types files are stored with.
fn known_media_type(media_type: &str) -> Option<&'static str> {
    [
        DocumentFormat::Text,
        DocumentFormat::Html,
        DocumentFormat::Docx,
    ]
    .into_iter()
    .map(DocumentFormat::media_type)
    .find(|known| *known == media_type)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

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
        let link = store
            .store(b"hello", "a.txt", "text/plain; charset=utf-8")
            .unwrap();
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
        let two_minutes_ago = |name: &str| {
            std::fs::File::options()
                .write(true)
                .open(dir.path().join(name))
                .unwrap()
                .set_modified(SystemTime::now() - Duration::from_secs(120))
                .unwrap();
        };
        // A user's own files named by hashes, as downloads and caches are: never ours.
        let users = [
            "0123456789abcdef0123456789abcdef",
            "0cc175b9c0f1b6a831c399e269772661.json",
        ];
        for name in users {
            std::fs::write(dir.path().join(name), b"a user's").unwrap();
            two_minutes_ago(name);
        }
        // Killed between writing a file and its record, two minutes ago; and a live server's,
        // its record on the way.
        let left = file_name("0123456789abcdef0123456789abcdef");
        std::fs::write(dir.path().join(&left), b"a killed server's").unwrap();
        two_minutes_ago(&left);
        let fresh = file_name("fedcba9876543210fedcba9876543210");
        std::fs::write(dir.path().join(&fresh), b"a live server's").unwrap();
        let store = FileStore::open(settings(dir.path(), Duration::MAX, 8), "dir").unwrap();
        let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        for kept in ["notes.txt", users[0], users[1], &fresh] {
            assert!(dir.path().join(kept).exists(), "{kept}");
        }
        assert!(!dir.path().join(&left).exists());
        // A time to live too long for the clock is capped, not a panic; what is stored is
        // its owner's alone.
        let link = store
            .store(b"x", "x.txt", "text/plain; charset=utf-8")
            .unwrap();
        let id = link.split_once('.').unwrap().0;
        for name in [file_name(id), record_name(id)] {
            let mode = std::fs::metadata(dir.path().join(name))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_link_planted_in_the_directory_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            FileStore::open(settings(dir.path(), Duration::from_secs(60), 8), "dir").unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, b"not for download").unwrap();
        let id = "0123456789abcdef0123456789abcdef";
        std::os::unix::fs::symlink(&secret, dir.path().join(file_name(id))).unwrap();
        let record = r#"{"name":"x.txt","media_type":"text/plain; charset=utf-8","expires_unix_ms":99999999999999}"#;
        std::fs::write(dir.path().join(record_name(id)), record).unwrap();
        assert!(store.find(&format!("{id}.x.txt")).is_none());
        // A hard link to it, too.
        std::fs::remove_file(dir.path().join(file_name(id))).unwrap();
        std::fs::hard_link(&secret, dir.path().join(file_name(id))).unwrap();
        assert!(store.find(&format!("{id}.x.txt")).is_none());
    }

    #[test]
    fn the_oldest_file_goes_first_beyond_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            FileStore::open(settings(dir.path(), Duration::from_secs(60), 2), "dir").unwrap();
        let first = store
            .store(b"1", "1.txt", "text/plain; charset=utf-8")
            .unwrap();
        std::thread::sleep(Duration::from_millis(2));
        let second = store
            .store(b"2", "2.txt", "text/plain; charset=utf-8")
            .unwrap();
        std::thread::sleep(Duration::from_millis(2));
        let third = store
            .store(b"3", "3.txt", "text/plain; charset=utf-8")
            .unwrap();
        assert!(store.find(&first).is_none());
        assert!(store.find(&second).is_some() && store.find(&third).is_some());
        // Each kept file and its record.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 4);
    }

    #[test]
    fn a_link_outlives_its_server_and_a_second_server_leaves_the_firsts_files() {
        let dir = tempfile::tempdir().unwrap();
        let first =
            FileStore::open(settings(dir.path(), Duration::from_secs(60), 8), "dir").unwrap();
        let link = first.store(b"translated", "a.docx", DocumentFormat::Docx.media_type());
        let link = link.unwrap();
        // A second server on the same directory, while the first runs.
        let second =
            FileStore::open(settings(dir.path(), Duration::from_secs(60), 8), "dir").unwrap();
        assert_eq!(first.find(&link).unwrap().bytes, b"translated");
        let found = second.find(&link).unwrap();
        assert_eq!(found.bytes, b"translated");
        assert_eq!(found.name, "a.docx");
        assert_eq!(found.media_type, DocumentFormat::Docx.media_type());
        second.sweep();
        drop(second);
        // The first stops; the server that replaces it still has the link.
        drop(first);
        let restarted =
            FileStore::open(settings(dir.path(), Duration::from_secs(60), 8), "dir").unwrap();
        assert_eq!(restarted.find(&link).unwrap().bytes, b"translated");
    }
}
