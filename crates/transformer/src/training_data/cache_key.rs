//! A cache entry's key: a digest of the corpus files' bytes (SHA-256, each file's size
//! first), so that a changed file is never read from a stale entry.

use std::fs::File;
use std::io::Read;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::config::CorpusSource;
use crate::corpus::{files_of, ReadCounter};
use crate::progress::Progress;

/// SHA-256 over each file's size and bytes, in order (hex).
pub(super) fn digest_files(
    source: &CorpusSource,
    size: u64,
    progress: &dyn Progress,
) -> anyhow::Result<String> {
    let counter = Arc::new(ReadCounter::default());
    let reading = counter.clone();
    let _pass = progress.data_pass(
        "checking the corpus",
        size,
        Box::new(move || reading.read()),
    );
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    for path in files_of(source) {
        crate::corpus::refuse_unless_regular(path)?;
        let mut file = File::open(path).map_err(|e| {
            anyhow::anyhow!(
                "cannot read {}: {e}; check the path in the config (relative paths start from \
                 the directory you run in)",
                path.display()
            )
        })?;
        hasher.update(file.metadata()?.len().to_le_bytes());
        loop {
            let n = file
                .read(&mut buffer)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
            counter.add(n as u64);
        }
    }
    Ok(hex(&hasher.finalize()))
}

pub(super) fn key_of(parts: &[String]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hex(&hasher.finalize())
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
