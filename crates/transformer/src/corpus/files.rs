//! The files a corpus is read from: opened (a `.gz` decompressed), refused when they are not
//! regular files (a corpus is read several times), and counted as they are read, for a
//! progress bar.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::config::CorpusSource;

/// How far reading has come, for a progress bar: bytes of the files read so far (compressed
/// bytes for a `.gz`) out of `total`.
#[derive(Default)]
pub struct ReadCounter {
    read: AtomicU64,
}

impl ReadCounter {
    pub fn read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    pub fn add(&self, bytes: u64) {
        self.read.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// A reader that counts its bytes into a [`ReadCounter`].
struct Counted<R> {
    inner: R,
    counter: Arc<ReadCounter>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.counter.add(n as u64);
        Ok(n)
    }
}

/// The files a corpus is read from, in the order they are read.
pub fn files_of(source: &CorpusSource) -> Vec<&Path> {
    match source {
        CorpusSource::Tsv(path) => vec![path.as_path()],
        CorpusSource::Parallel { src, tgt } => vec![src.as_path(), tgt.as_path()],
        CorpusSource::Text { text } => vec![text.as_path()],
        CorpusSource::Builtin { .. } => Vec::new(),
    }
}

/// The sizes of the corpus's files added up, for a progress bar's length.
pub fn total_bytes(source: &CorpusSource) -> u64 {
    files_of(source)
        .iter()
        .filter_map(|path| std::fs::metadata(path).ok())
        .map(|m| m.len())
        .sum()
}

/// Opens a corpus file for reading, decompressing a `.gz`.
pub(super) fn open(
    path: &Path,
    counter: &Arc<ReadCounter>,
) -> anyhow::Result<Box<dyn BufRead + Send>> {
    refuse_unless_regular(path)?;
    let file = std::fs::File::open(path).map_err(|e| {
        anyhow::anyhow!(
            "cannot read {}: {e}; check the path in the config (relative paths start from the \
             directory you run in)",
            path.display()
        )
    })?;
    let counted = Counted {
        inner: file,
        counter: counter.clone(),
    };
    Ok(if path.extension().is_some_and(|e| e == "gz") {
        Box::new(BufReader::with_capacity(
            1 << 20,
            flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 20, counted)),
        ))
    } else {
        Box::new(BufReader::with_capacity(1 << 20, counted))
    })
}

/// A training corpus is read more than once (its digest, the tokenizer's pass, the encoding
/// pass): a pipe or device would hang the second read, so it is refused by name.
pub fn refuse_unless_regular(path: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() && !meta.is_dir() => anyhow::bail!(
            "{} is not a regular file (a pipe or device); a corpus is read several times, so \
             write it to a file first",
            path.display()
        ),
        _ => Ok(()),
    }
}

/// A read that failed, named by its file; a `.gz` that is not one says so.
pub(super) fn read_error(path: &Path, e: std::io::Error) -> anyhow::Error {
    if path.extension().is_some_and(|e| e == "gz") && e.kind() != std::io::ErrorKind::NotFound {
        anyhow::anyhow!("{} is not a valid gzip file ({e})", path.display())
    } else {
        anyhow::anyhow!("cannot read {}: {e}", path.display())
    }
}
