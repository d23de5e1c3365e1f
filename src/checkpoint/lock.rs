//! One process at a time writes a checkpoint directory (or trains into a run directory): an
//! advisory lock (`flock`, through `std::fs::File::lock`) on a hidden file beside it,
//! `.NAME.lock`, which holds the holder's process id and command line so that a second
//! writer can name the first. The kernel drops the lock when its holder dies, however it
//! dies, so a killed writer never leaves a directory locked. The file is removed by its
//! holder while still locked; a process that locked a file already removed (it opened the
//! old one) sees that the path no longer names what it locked and tries again.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
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
    file: File,
    path: PathBuf,
}

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
        let WhenHeld::Wait(patience) = when_held;
        let deadline = Instant::now() + patience;
        loop {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .with_context(|| {
                    format!(
                        "cannot lock {}: cannot open {}",
                        dir.display(),
                        path.display()
                    )
                })?;
            match file.try_lock() {
                Ok(()) => {
                    // The holder before us may have removed the file we opened; then the
                    // path names a new file (or none) and our lock guards nothing.
                    if same_file(&file, &path) {
                        let mut lock = Self { file, path };
                        lock.record_holder();
                        return Ok(lock);
                    }
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    if Instant::now() >= deadline {
                        return Err(LockHeld {
                            dir: dir.to_path_buf(),
                            holder: holder(file),
                        }
                        .into());
                    }
                    std::thread::sleep(POLL);
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(e).with_context(|| format!("cannot lock {}", dir.display()));
                }
            }
        }
    }

    /// Writes who holds the lock into its file, for a waiting process's message.
    fn record_holder(&mut self) {
        let command: Vec<String> = std::env::args().collect();
        let line = format!("pid {}: {}\n", std::process::id(), command.join(" "));
        // Best effort: the lock is what matters, the words are for messages.
        let _ = self
            .file
            .set_len(0)
            .and_then(|()| self.file.rewind())
            .and_then(|()| self.file.write_all(line.as_bytes()));
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        // Removed while still held: a process that opened it meanwhile finds it gone once it
        // gets the lock, and opens the path again.
        let _ = std::fs::remove_file(&self.path);
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

/// What the holder wrote of itself, in one line. It writes it just after taking the lock,
/// so an empty file is read again for a moment.
fn holder(mut file: File) -> String {
    for _ in 0..20 {
        let mut text = String::new();
        let _ = file.rewind().and_then(|()| file.read_to_string(&mut text));
        let line = text.lines().next().unwrap_or("").trim();
        if !line.is_empty() {
            return line.chars().take(160).collect();
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
        // A second open file description conflicts with the first, in one process too.
        let err = DirLock::acquire(&target, WhenHeld::REFUSE)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is being written by another process"), "{err}");
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        drop(first);
        assert!(!dir.path().join(".q.lock").exists());
        let again = DirLock::acquire(&target, WhenHeld::REFUSE).unwrap();
        drop(again);
    }

    #[test]
    fn a_waiting_process_gets_the_lock_when_it_is_released() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("q");
        let first = DirLock::acquire(&target, WhenHeld::REFUSE).unwrap();
        let waiter = {
            let target = target.clone();
            std::thread::spawn(move || DirLock::acquire(&target, WhenHeld::FOR_A_SAVE).is_ok())
        };
        std::thread::sleep(Duration::from_millis(100));
        drop(first);
        assert!(waiter.join().unwrap());
    }
}
