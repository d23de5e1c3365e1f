//! The Hugging Face cache on disk, laid out as `huggingface_hub` lays it out, so that Python's
//! tools and this one share downloads:
//!
//! ```text
//! CACHE/models--org--name/blobs/ETAG                    a file's bytes (ETAG: its sha256, or
//!                                                       its git blob id when not in LFS)
//! CACHE/models--org--name/snapshots/COMMIT/FILE -> ../../blobs/ETAG
//! CACHE/models--org--name/refs/REVISION                 the commit a branch or tag named
//! ```
//!
//! Every write lands whole or not at all: a blob is written under a temporary name and
//! renamed once its bytes are checked, a snapshot's link and a ref are renamed into place.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::name::HubName;

/// One model's folder in the cache.
pub struct CachedModel {
    root: PathBuf,
}

impl CachedModel {
    pub fn new(cache: &Path, name: &HubName) -> Self {
        Self {
            root: cache.join(name.folder()),
        }
    }

    /// The snapshot folder of `commit`.
    pub fn snapshot(&self, commit: &str) -> PathBuf {
        self.root.join("snapshots").join(commit)
    }

    /// The commit `revision` names in the cache: itself for a commit hash, else its ref.
    pub fn commit_of(&self, revision: &str) -> Option<String> {
        if super::name::is_commit(revision) {
            return Some(revision.to_string());
        }
        let text = std::fs::read_to_string(self.root.join("refs").join(revision)).ok()?;
        let commit = text.trim();
        super::name::is_commit(commit).then(|| commit.to_string())
    }

    /// Whether the snapshot of `commit` has `file` (its link resolving to a blob), of `size`
    /// bytes when given (a blob damaged since is fetched again).
    pub fn has(&self, commit: &str, file: &str, size: Option<u64>) -> bool {
        std::fs::metadata(self.snapshot(commit).join(file))
            .is_ok_and(|meta| meta.is_file() && size.is_none_or(|size| meta.len() == size))
    }

    /// Where a download of the blob `etag` is written before it is checked: beside its final
    /// place (one file system, so the rename is atomic), named for this process. What a killed
    /// process left of the same blob is removed first.
    pub fn partial_blob(&self, etag: &str) -> anyhow::Result<PathBuf> {
        let blobs = self.root.join("blobs");
        std::fs::create_dir_all(&blobs)
            .with_context(|| format!("cannot create the cache folder {}", blobs.display()))?;
        let prefix = format!("{etag}.incomplete.");
        for entry in std::fs::read_dir(&blobs).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let owner = name
                .strip_prefix(&prefix)
                .and_then(|pid| pid.parse::<u32>().ok());
            // A process that is gone left it; a live one (another download) is let be.
            if owner.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(blobs.join(format!("{prefix}{}", std::process::id())))
    }

    /// Moves the checked download `partial` to the blob `etag` and links `file` of the
    /// snapshot `commit` to it.
    pub fn place(
        &self,
        partial: &Path,
        etag: &str,
        commit: &str,
        file: &str,
    ) -> anyhow::Result<()> {
        let blob = self.root.join("blobs").join(etag);
        std::fs::rename(partial, &blob)
            .with_context(|| format!("cannot move {} into the cache", partial.display()))?;
        let link = self.snapshot(commit).join(file);
        let parent = link.parent().unwrap_or(&self.root);
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create the cache folder {}", parent.display()))?;
        // From snapshots/COMMIT/[dirs/]FILE up to the model's folder, then into blobs/.
        let depth = file.matches('/').count() + 2;
        let target = PathBuf::from("../".repeat(depth)).join("blobs").join(etag);
        let temporary = parent.join(format!(".{etag}.link.{}", std::process::id()));
        let _ = std::fs::remove_file(&temporary);
        std::os::unix::fs::symlink(&target, &temporary)
            .and_then(|()| std::fs::rename(&temporary, &link))
            .with_context(|| format!("cannot link {} in the cache", link.display()))
    }

    /// Records that `revision` names `commit` (a branch or tag; a commit needs no ref).
    pub fn set_ref(&self, revision: &str, commit: &str) -> anyhow::Result<()> {
        if super::name::is_commit(revision) || self.commit_of(revision).as_deref() == Some(commit) {
            return Ok(());
        }
        let path = self.root.join("refs").join(revision);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create the cache folder {}", parent.display()))?;
        }
        crate::atomic_file::write_atomic(&path, commit.as_bytes())
            .with_context(|| format!("cannot write the cache's ref {}", path.display()))
    }
}
