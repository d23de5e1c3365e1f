//! What the Hub lists of a revision's file: its name, its size, and the hash it is checked
//! against and named by in the cache.

use serde::Deserialize;

/// A file of a revision, as the Hub lists it.
#[derive(Debug, Clone, Deserialize)]
pub struct Sibling {
    pub rfilename: String,
    /// Bytes (the file's, in LFS or not).
    pub size: Option<u64>,
    /// The git blob id (sha1 of `blob SIZE\0` and the bytes) of a file kept in git.
    #[serde(rename = "blobId")]
    pub blob_id: Option<String>,
    /// Set for a file kept in LFS: its sha256 and size.
    pub lfs: Option<LfsFile>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LfsFile {
    pub sha256: String,
    pub size: u64,
}

impl Sibling {
    /// The name of its blob in the cache (`huggingface_hub`'s etag, lowercase): the sha256 of
    /// an LFS file, the git blob id of another. `None` when the Hub gave neither.
    pub fn etag(&self) -> Option<String> {
        let etag = match &self.lfs {
            Some(lfs) => &lfs.sha256,
            None => self.blob_id.as_ref()?,
        };
        Some(etag.to_ascii_lowercase())
    }

    /// Its bytes, as the Hub lists them.
    pub fn expected_size(&self) -> Option<u64> {
        self.lfs.as_ref().map(|l| l.size).or(self.size)
    }
}
