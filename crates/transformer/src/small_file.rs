//! Reading the files that describe a model or a run (configs, vocabularies, tokenizers):
//! regular files only, since a FIFO blocks the read and a device such as `/dev/zero` never
//! ends it, and no longer than a cap, checked before the read and held during it.

use std::io::Read;
use std::path::Path;

/// A JSON or TOML config (`config.json`, `tokenizer_config.json`, `config.toml`): real ones
/// are a few KB.
pub const MOST_CONFIG_BYTES: u64 = 16 << 20;

/// A vocabulary or tokenizer file (`vocab.json`, a `.spm`, `tokenizer.json`): NLLB-200's
/// `tokenizer.json`, among the largest, is 17 MB.
pub const MOST_TOKENIZER_BYTES: u64 = 512 << 20;

/// What is at `path` when something is there but not a regular file ("a pipe or device",
/// "a directory", "a link to nothing"); `None` when it is a regular file or nothing is
/// there. For a reader that would take such a thing for a missing file.
pub fn not_regular(path: &Path) -> Option<&'static str> {
    std::fs::symlink_metadata(path).ok()?;
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => None,
        Ok(meta) if meta.is_dir() => Some("a directory"),
        Ok(_) => Some("a pipe or device"),
        Err(_) => Some("a link to nothing"),
    }
}

/// The error for `path`, which is `what` (see [`not_regular`]).
pub fn not_regular_error(path: &Path, what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{} is {what}, not a regular file; put the file itself there",
        path.display()
    )
}

/// The bytes of the regular file at `path`, at most `most` of them; an error names the file
/// and says what it is instead.
pub fn read(path: &Path, most: u64) -> anyhow::Result<Vec<u8>> {
    read_unnamed(path, most).map_err(|why| anyhow::anyhow!("{}: {why}", path.display()))
}

/// [`read`], its error saying what is wrong without naming the file (for a caller that
/// names it in its own words).
pub fn read_unnamed(path: &Path, most: u64) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        let kind = if meta.is_dir() {
            "a directory"
        } else {
            "a pipe or device"
        };
        return Err(format!(
            "it is {kind}, not a regular file; put the file itself there"
        ));
    }
    let too_long = || {
        format!(
            "it is more than the {most} bytes such a file may be; it is not the file it should be"
        )
    };
    if meta.len() > most {
        return Err(too_long());
    }
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read it: {e}"))?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(most + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > most {
        return Err(too_long());
    }
    Ok(bytes)
}

/// [`read`] as UTF-8 text; an error names the file.
pub fn read_text(path: &Path, most: u64) -> anyhow::Result<String> {
    String::from_utf8(read(path, most)?)
        .map_err(|e| anyhow::anyhow!("{} is not UTF-8 text: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_a_directory_and_an_oversized_file_are_refused_by_name() {
        let err = read(Path::new("/dev/zero"), 10).unwrap_err().to_string();
        assert!(err.contains("/dev/zero: it is a pipe or device"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let err = read(dir.path(), 10).unwrap_err().to_string();
        assert!(err.contains("is a directory"), "{err}");
        let file = dir.path().join("big.json");
        std::fs::write(&file, [b' '; 11]).unwrap();
        let err = read(&file, 10).unwrap_err().to_string();
        assert!(err.contains("more than the 10 bytes"), "{err}");
        assert_eq!(read(&file, 11).unwrap().len(), 11);
    }

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("config.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let err = read(&fifo, 10).unwrap_err().to_string();
        assert!(err.contains("is a pipe or device"), "{err}");
    }
}
