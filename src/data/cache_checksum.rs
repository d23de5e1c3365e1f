//! Checksums of the corpus cache's files (XXH3, 64-bit): taken as an entry is written, checked
//! when it is read, so that an entry changed on disk after it was published (edited in place
//! with its size kept, a bit flipped) is encoded again instead of trained on. XXH3 reads at
//! many gigabytes a second, a small cost beside reading the entry itself.

use std::io::Write;

use xxhash_rust::xxh3::{xxh3_64, Xxh3};

/// The checksum of `bytes`, as the cache's metadata writes it (16 hex digits).
pub fn checksum(bytes: &[u8]) -> String {
    format!("{:016x}", xxh3_64(bytes))
}

/// A writer that checksums what passes through it.
pub struct Checksummed<W: Write> {
    inner: W,
    hasher: Xxh3,
}

impl<W: Write> Checksummed<W> {
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            hasher: Xxh3::new(),
        }
    }

    /// The writer, and the checksum of everything written (as [`checksum`] gives it).
    pub fn finish(self) -> (W, String) {
        (self.inner, format!("{:016x}", self.hasher.digest()))
    }
}

impl<W: Write> Write for Checksummed<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let written = self.inner.write(bytes)?;
        self.hasher.update(&bytes[..written]);
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_checksum_is_the_checksum_of_the_whole_and_a_changed_byte_changes_it() {
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut writer = Checksummed::new(Vec::new());
        for chunk in bytes.chunks(333) {
            writer.write_all(chunk).unwrap();
        }
        let (written, streamed) = writer.finish();
        assert_eq!(written, bytes);
        assert_eq!(streamed, checksum(&bytes));
        let mut changed = bytes.clone();
        changed[5000] ^= 1;
        assert_ne!(checksum(&changed), streamed);
    }
}
