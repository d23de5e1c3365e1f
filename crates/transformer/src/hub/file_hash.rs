//! What a downloaded file is checked against: the hash the Hub's file list gives, or, for a
//! file listed without one, the hash its download's answer gives (as huggingface_hub takes
//! it), checked as the bytes stream in.

use anyhow::{anyhow, bail};
use sha1::Sha1;
use sha2::{Digest, Sha256};

use super::listing::{LfsFile, Sibling};
use super::name::HubName;
use super::HubSettings;

/// `file` with the hash and size the Hub's answer for it gives (`HEAD
/// /ID/resolve/COMMIT/FILE`, its redirect not followed: `X-Linked-Etag` and `X-Linked-Size`
/// for a file in LFS, else `ETag` and `Content-Length`), as huggingface_hub reads them, for a
/// file listed without them (some mirrors list names and sizes only). The etag is taken for a
/// sha256 when it is 64 hex digits long, else for a git blob id (40).
pub fn with_hash_from_etag(
    agent: &ureq::Agent,
    (name, commit, file): (&HubName, &str, &Sibling),
    settings: &HubSettings,
) -> anyhow::Result<Sibling> {
    let what = format!("{} of {name}", file.rfilename);
    let url = format!(
        "{}/{}/resolve/{commit}/{}",
        settings.endpoint, name.id, file.rfilename
    );
    let mut request = agent
        .head(&url)
        .config()
        .max_redirects(0)
        .build()
        .header("Accept-Encoding", "identity");
    if let Some(token) = &settings.token {
        request = request.header("Authorization", format!("Bearer {token}"));
    }
    let response = request.call().map_err(|e| {
        anyhow!(
            "cannot ask the Hub at {} for {what}: {e}",
            settings.endpoint
        )
    })?;
    let header = |key: &str| {
        response
            .headers()
            .get(key)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.trim()
                    .trim_start_matches("W/")
                    .trim_matches('"')
                    .to_ascii_lowercase()
            })
            .filter(|v| !v.is_empty())
    };
    let status = response.status().as_u16();
    if !(200..400).contains(&status) {
        bail!(
            "cannot download {what}: the Hub at {} answered {status}",
            settings.endpoint
        )
    }
    let etag = header("x-linked-etag").or_else(|| header("etag"));
    let size = header("x-linked-size")
        .or_else(|| header("content-length"))
        .and_then(|v| v.parse::<u64>().ok())
        .or(file.expected_size());
    let is_hex =
        |e: &String, len: usize| e.len() == len && e.bytes().all(|b| b.is_ascii_hexdigit());
    let mut found = file.clone();
    match (etag, size) {
        (Some(etag), Some(size)) if is_hex(&etag, 64) => {
            found.lfs = Some(LfsFile { sha256: etag, size });
        }
        (Some(etag), Some(size)) if is_hex(&etag, 40) => {
            found.blob_id = Some(etag);
            found.size = Some(size);
        }
        _ => bail!(
            "the Hub at {} gives no hash for {what}, neither in its file list nor in the file's \
             ETag, so it cannot be checked and nothing was downloaded; use a Hub or mirror that \
             gives hashes, or put the model in the cache with huggingface_hub and set \
             HF_HUB_OFFLINE=1",
            settings.endpoint
        ),
    }
    Ok(found)
}

/// The hash a file is checked against as it streams in: sha256 for an LFS file, git's blob
/// id (sha1 of `blob SIZE\0` and the bytes, SIZE the listed one) for another.
pub enum Check {
    Sha256(Sha256, String),
    GitBlob(Sha1, String),
}

impl Check {
    /// `None` when the Hub listed neither hash.
    pub fn for_file(file: &Sibling, size: u64) -> Option<Self> {
        let want = file.etag()?;
        Some(if file.lfs.is_some() {
            Self::Sha256(Sha256::new(), want)
        } else {
            let mut hasher = Sha1::new();
            hasher.update(format!("blob {size}\0").as_bytes());
            Self::GitBlob(hasher, want)
        })
    }

    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            Self::Sha256(hasher, _) => hasher.update(bytes),
            Self::GitBlob(hasher, _) => hasher.update(bytes),
        }
    }

    pub fn verify(self, what: &str) -> anyhow::Result<()> {
        let (got, want, kind) = match self {
            Self::Sha256(hasher, want) => (hex(&hasher.finalize()), want, "sha256"),
            Self::GitBlob(hasher, want) => (hex(&hasher.finalize()), want, "git blob id"),
        };
        if got != want {
            bail!(
                "{what} arrived with {kind} {got}, not the {want} the Hub gives for it; \
                 nothing was kept: try again, and if it persists the file on the Hub is damaged"
            )
        }
        Ok(())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
