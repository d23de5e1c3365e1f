//! Checksums of the corpus cache's files (XXH3, 64-bit): taken as an entry is written, checked
//! when it is read, so that an entry changed on disk after it was published (edited in place
//! with its size kept, a bit flipped) is encoded again instead of trained on. XXH3 reads at
//! many gigabytes a second, a small cost beside reading the entry itself.

use std::fs::File;
use std::io::{Read, Write};
use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Serialize;
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

/// The most bytes a cache entry's `meta.json` may have (it holds a few sample sentences).
pub const MOST_META_BYTES: u64 = 16 << 20;

/// The file `name` of the entry `dir`, opened when it is a regular file as the cache writes
/// them (a link, a pipe or a device is refused: a pipe would hang the run, `/dev/zero` fill
/// its memory).
pub fn open_entry_file(dir: &Path, name: &str) -> Result<File, String> {
    let path = dir.join(name);
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_file() => {
            File::open(&path).map_err(|e| format!("{name} cannot be read ({e})"))
        }
        Ok(_) => Err(format!(
            "{name} is not a file the cache wrote (a link, pipe or device)"
        )),
        Err(e) => Err(format!("{name} cannot be read ({e})")),
    }
}

/// The bytes of the entry file `name`, when it is a regular file of at most `most` bytes.
pub fn read_entry_file(dir: &Path, name: &str, most: u64) -> Result<Vec<u8>, String> {
    let mut file = open_entry_file(dir, name)?;
    let size = file.metadata().map_err(|e| format!("{name}: {e}"))?.len();
    if size > most {
        return Err(format!(
            "{name} is {size} bytes, more than the cache writes"
        ));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.read_to_end(&mut bytes)
        .map_err(|e| format!("{name} cannot be read ({e})"))?;
    Ok(bytes)
}

/// `meta` as JSON with a checksum of itself under `checksum`, so that an edit of any of its
/// fields (sizes, counts, the other files' checksums) is seen.
pub fn sealed<T: Serialize>(meta: &T) -> serde_json::Result<Vec<u8>> {
    let mut value = serde_json::to_value(meta)?;
    let digest = checksum(&serde_json::to_vec(&value)?);
    if let serde_json::Value::Object(map) = &mut value {
        map.insert(SEAL.into(), digest.into());
    }
    serde_json::to_vec_pretty(&value)
}

/// The metadata `bytes` hold, when its own checksum agrees with it.
pub fn unsealed<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let mut value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("meta.json cannot be read ({e})"))?;
    let stated = value
        .as_object_mut()
        .and_then(|map| map.remove(SEAL))
        .and_then(|v| v.as_str().map(str::to_string));
    let actual = serde_json::to_vec(&value).map(|b| checksum(&b)).ok();
    if stated.is_none() || stated != actual {
        return Err("meta.json does not match its checksum (it changed on disk)".into());
    }
    serde_json::from_value(value).map_err(|e| format!("meta.json cannot be read ({e})"))
}

/// The key of the metadata's checksum of itself.
const SEAL: &str = "checksum";

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

    #[test]
    fn sealed_metadata_reads_back_and_an_edit_of_any_field_is_seen() {
        #[derive(Serialize, serde::Deserialize, PartialEq, Debug)]
        struct Meta {
            pairs: usize,
            samples: Vec<String>,
        }
        let meta = Meta {
            pairs: 3,
            samples: vec!["ein Satz".into()],
        };
        let bytes = sealed(&meta).unwrap();
        assert_eq!(unsealed::<Meta>(&bytes).unwrap(), meta);
        let text = String::from_utf8(bytes).unwrap();
        let edited = text.replace("\"pairs\": 3", "\"pairs\": 4");
        assert_ne!(edited, text);
        assert!(unsealed::<Meta>(edited.as_bytes()).is_err());
        assert!(unsealed::<Meta>(br#"{"pairs": 3, "samples": []}"#).is_err());
    }

    #[test]
    fn entry_files_that_are_links_or_devices_are_refused_and_sizes_bounded() {
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero")).unwrap();
        assert!(read_entry_file(dir.path(), "zero", 100).is_err());
        std::fs::write(dir.path().join("big"), [0u8; 200]).unwrap();
        assert!(read_entry_file(dir.path(), "big", 100)
            .unwrap_err()
            .contains("more than"));
        assert_eq!(read_entry_file(dir.path(), "big", 200).unwrap().len(), 200);
    }
}
