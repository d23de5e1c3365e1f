//! One process at a time writes a checkpoint directory (or trains into a run directory): an
//! advisory lock (`flock`, through `std::fs::File::lock`) on a hidden file beside it,
//! `.NAME.lock`, which holds the holder's process id and command line so that a second
//! writer can name the first. The kernel drops the lock when its holder dies, however it
//! dies, so a killed writer never leaves a directory locked. The file is removed by its
//! holder while still locked; a process that locked a file already removed (it opened the
//! old one) sees that the path no longer names what it locked and tries again.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context;

/// What to do when another process holds the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenHeld {
    /// Wait up to this long for it, then refuse naming the holder.
    Wait(Duration),
}

impl WhenHeld {
    /// Refuse at once.
    pub const REFUSE: Self = Self::Wait(Duration::ZERO);
    /// What a writer of a named output waits: long enough for a reader putting back a copy,
    /// or a short save, and no longer.
    pub const BRIEFLY: Self = Self::Wait(Duration::from_secs(2));
    /// What a save in a training run, or a reader, waits: a whole save of a large model.
    pub const FOR_A_SAVE: Self = Self::Wait(Duration::from_secs(120));
}

/// The held lock of one directory; dropping it releases it.
#[derive(Debug)]
pub struct DirLock {
    /// The locked file, or none where this process held the lock already (a reader putting
    /// back a retired copy inside a writer's save): the outer holder releases it.
    file: Option<File>,
    path: PathBuf,
}

/// The lock files this process holds, by path, with how many holders each has: a second
/// `acquire` in one process nests instead of waiting for itself (flock refuses a second
/// open file even in the process that holds the first).
static HELD: Mutex<Vec<(PathBuf, usize)>> = Mutex::new(Vec::new());

/// The refusal of a lock another process holds.
#[derive(Debug)]
pub struct LockHeld {
    pub dir: PathBuf,
    /// What the holder wrote of itself: `pid N: COMMAND LINE`.
    pub holder: String,
}

impl std::fmt::Display for LockHeld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is being written by another process ({}); wait for it to finish, or write \
             somewhere else",
            self.dir.display(),
            self.holder
        )
    }
}

impl std::error::Error for LockHeld {}

/// How long a process waits for a lock before it says it is waiting.
const SAY_WAITING_AFTER: Duration = Duration::from_secs(1);

/// How often a waiting process tries again.
const POLL: Duration = Duration::from_millis(20);

impl DirLock {
    /// Locks `dir` (which need not exist; its parent is created) for this process, or
    /// refuses naming the process that holds it.
    pub fn acquire(dir: &Path, when_held: WhenHeld) -> anyhow::Result<Self> {
        let path = lock_path(dir)?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        let key = held_key(&path);
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, holders)) = held.iter_mut().find(|(p, _)| *p == key) {
            *holders += 1;
            return Ok(Self { file: None, path });
        }
        drop(held);
        let file = lock_file(dir, &path, when_held)?;
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        held.push((key, 1));
        let mut lock = Self {
            file: Some(file),
            path,
        };
        lock.record_holder();
        Ok(lock)
    }

    /// Writes who holds the lock into its file, for a waiting process's message.
    fn record_holder(&mut self) {
        let Some(file) = &mut self.file else {
            return;
        };
        let command: Vec<String> = std::env::args().collect();
        let line = format!("pid {}: {}\n", std::process::id(), command.join(" "));
        // Best effort: the lock is what matters, the words are for messages.
        let _ = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(line.as_bytes()));
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let key = held_key(&self.path);
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = held.iter().position(|(p, _)| *p == key) {
            held[at].1 -= 1;
            if held[at].1 > 0 {
                return;
            }
            held.swap_remove(at);
        }
        // Removed while still held: a process that opened it meanwhile finds it gone once it
        // gets the lock, and opens the path again.
        if self.file.is_some() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// `path` as the registry of held locks knows it: its directory made absolute.
fn held_key(path: &Path) -> PathBuf {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    let parent = std::fs::canonicalize(parent.unwrap_or(Path::new(".")))
        .unwrap_or_else(|_| parent.unwrap_or(Path::new(".")).to_path_buf());
    parent.join(path.file_name().unwrap_or_default())
}

/// Locks the file at `path` for `dir`, creating it (never through a link), as `when_held`
/// says to wait.
fn lock_file(dir: &Path, path: &Path, when_held: WhenHeld) -> anyhow::Result<File> {
    let WhenHeld::Wait(patience) = when_held;
    let started = Instant::now();
    let deadline = started + patience;
    let mut said_so = false;
    loop {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| {
                let what = match e.raw_os_error() {
                    Some(libc::ELOOP) => "it is a link".to_string(),
                    Some(libc::EISDIR) => "it is a directory".to_string(),
                    _ => e.to_string(),
                };
                // A lock file that is not there could not be made: its directory is the problem.
                let advice = if std::fs::symlink_metadata(path).is_ok() {
                    "remove it if no other process is writing there"
                } else {
                    "write somewhere this user may create files"
                };
                anyhow::anyhow!(
                    "cannot lock {}: cannot open {} ({what}); {advice}",
                    dir.display(),
                    path.display()
                )
            })?;
        // The holder before us removed the file between our open and now: open again.
        if file.metadata().is_ok_and(|m| m.nlink() == 0) {
            continue;
        }
        if !is_ours(&mut file) {
            anyhow::bail!(
                "cannot lock {}: {} is not a lock file this tool made (a pipe, a device, a \
                 file with other links or other contents); remove it",
                dir.display(),
                path.display()
            );
        }
        match file.try_lock() {
            // The holder before us may have removed the file we opened; then the path names
            // a new file (or none) and our lock guards nothing.
            Ok(()) if same_file(&file, path) => return Ok(file),
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                if Instant::now() >= deadline {
                    return Err(LockHeld {
                        dir: dir.to_path_buf(),
                        holder: holder(&mut file),
                    }
                    .into());
                }
                // A wait longer than a moment is said, once, so that it is not a hang.
                if !said_so && started.elapsed() >= SAY_WAITING_AFTER {
                    said_so = true;
                    log::info!(
                        "waiting for {}: another process is writing it ({}); giving up in {:.0} s",
                        dir.display(),
                        holder(&mut file),
                        deadline
                            .saturating_duration_since(Instant::now())
                            .as_secs_f64()
                            .ceil()
                    );
                }
                std::thread::sleep(POLL);
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {}", dir.display()));
            }
        }
    }
}

/// `runs/x/last` -> `runs/x/.last.lock`.
pub fn lock_path(dir: &Path) -> anyhow::Result<PathBuf> {
    let name = dir
        .file_name()
        .with_context(|| format!("{} is not a directory path", dir.display()))?;
    Ok(dir.with_file_name(format!(".{}.lock", name.to_string_lossy())))
}

/// Whether `path` still names the file `file` has open.
fn same_file(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(open), Ok(named)) => open.dev() == named.dev() && open.ino() == named.ino(),
        _ => false,
    }
}

/// Whether the open `file` can be a lock file of this tool: a regular file with no other
/// name (a hard link to someone's file would be emptied and written), empty or holding a
/// holder's line. Its contents are written and the file removed, so anything else is refused.
fn is_ours(file: &mut File) -> bool {
    let regular = file.metadata().is_ok_and(|m| m.is_file() && m.nlink() == 1);
    regular && {
        let mut start = [0u8; 4];
        let read = file.rewind().and_then(|()| file.read(&mut start));
        matches!(read, Ok(0)) || (matches!(read, Ok(4)) && &start == b"pid ")
    }
}

/// The most bytes of a lock file read for its holder's line.
const MOST_HOLDER_BYTES: u64 = 512;

/// What the holder wrote of itself, in one line (its first bytes, control characters
/// shown as `?`). It writes it just after taking the lock, so an empty file is read again for
/// a moment.
fn holder(file: &mut File) -> String {
    for _ in 0..20 {
        let mut bytes = Vec::new();
        let _ = file
            .rewind()
            .and_then(|()| file.take(MOST_HOLDER_BYTES).read_to_end(&mut bytes));
        let text = String::from_utf8_lossy(&bytes);
        let line = text.lines().next().unwrap_or("").trim();
        if !line.is_empty() {
            return line
                .chars()
                .take(160)
                .map(|c| if c.is_control() { '?' } else { c })
                .collect();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    "it has not said which".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_naming_the_holder_and_free_once_released() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("q");
        let first = DirLock::acquire(&target, WhenHeld::REFUSE).unwrap();
        // Another open file on it conflicts, as another process's would.
        let path = lock_path(&target).unwrap();
        let err = lock_file(&target, &path, WhenHeld::REFUSE)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is being written by another process"), "{err}");
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        drop(first);
        assert!(!dir.path().join(".q.lock").exists());
        lock_file(&target, &path, WhenHeld::REFUSE).unwrap();
    }

    #[test]
    fn a_process_that_holds_a_lock_takes_it_again_without_waiting_for_itself() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("q");
        let outer = DirLock::acquire(&target, WhenHeld::REFUSE).unwrap();
        let inner = DirLock::acquire(&target, WhenHeld::REFUSE).unwrap();
        drop(inner);
        // Still held by the outer holder.
        let path = lock_path(&target).unwrap();
        assert!(lock_file(&target, &path, WhenHeld::REFUSE).is_err());
        drop(outer);
        assert!(!path.exists());
    }

    #[test]
    fn a_lock_file_that_is_a_link_or_a_directory_is_refused_and_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"mine").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join(".q.lock")).unwrap();
        let err = DirLock::acquire(&dir.path().join("q"), WhenHeld::REFUSE).unwrap_err();
        assert!(format!("{err:#}").contains("cannot open"), "{err:#}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"mine");
        std::fs::create_dir(dir.path().join(".r.lock")).unwrap();
        assert!(DirLock::acquire(&dir.path().join("r"), WhenHeld::REFUSE).is_err());
        // A hard link is a regular file with a second name: writing it would write the other.
        std::fs::hard_link(&victim, dir.path().join(".s.lock")).unwrap();
        let err = DirLock::acquire(&dir.path().join("s"), WhenHeld::REFUSE).unwrap_err();
        assert!(
            err.to_string()
                .contains("is not a lock file this tool made"),
            "{err}"
        );
        // Nor is a file of someone's that happens to have the name.
        std::fs::write(dir.path().join(".t.lock"), b"notes").unwrap();
        assert!(DirLock::acquire(&dir.path().join("t"), WhenHeld::REFUSE).is_err());
        assert_eq!(std::fs::read(dir.path().join(".t.lock")).unwrap(), b"notes");
        assert_eq!(std::fs::read(&victim).unwrap(), b"mine");
        // A dead holder's lock file is taken over.
        std::fs::write(dir.path().join(".u.lock"), b"pid 99999: transformer\n").unwrap();
        drop(DirLock::acquire(&dir.path().join("u"), WhenHeld::REFUSE).unwrap());
        assert!(!dir.path().join(".u.lock").exists());
    }

    #[test]
    fn a_waiting_process_gets_the_lock_when_it_is_released() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("q");
        let first = DirLock::acquire(&target, WhenHeld::REFUSE).unwrap();
        let waiter = {
            let target = target.clone();
            let path = lock_path(&target).unwrap();
            std::thread::spawn(move || lock_file(&target, &path, WhenHeld::FOR_A_SAVE).is_ok())
        };
        std::thread::sleep(Duration::from_millis(100));
        drop(first);
        assert!(waiter.join().unwrap());
    }
}
