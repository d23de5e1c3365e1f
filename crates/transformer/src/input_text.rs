//! Inputs read whole (`translate --file`, HTML on stdin, `eval --hyp/--ref/--src`): any file
//! that can be read, a pipe included (`--file <(zcat book.txt.gz)`), but never more than a
//! cap, so that `/dev/zero` or a gzip bomb ends in an error naming it rather than in the
//! out-of-memory killer.

use std::io::Read;
use std::path::Path;

/// The most an input read whole may hold (after decompression): 512 MiB, more text than any
/// test set or document; a larger corpus is translated line by line from stdin.
pub const MOST_INPUT_BYTES: u64 = 512 << 20;

/// What `reader` holds, at most `most` bytes; past that, an error of kind `FileTooLarge`
/// that says so (the caller names the input).
pub fn read_at_most(mut reader: impl Read, most: u64) -> std::io::Result<Vec<u8>> {
    let most = usize::try_from(most).unwrap_or(usize::MAX);
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => return Ok(bytes),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if bytes.len() + n > most {
            return Err(too_large(most as u64));
        }
        // Doubling, but never past the cap: at the cap the peak is the cap, not twice it.
        if bytes.capacity() < bytes.len() + n {
            let grown = (bytes.capacity() * 2).max(bytes.len() + n).min(most);
            bytes.reserve_exact(grown - bytes.len());
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
}

/// The file at `path` (`-`: stdin), at most `most` bytes.
pub fn read_path(path: &Path, most: u64) -> std::io::Result<Vec<u8>> {
    if path == Path::new("-") {
        return read_at_most(std::io::stdin().lock(), most);
    }
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(std::io::Error::other("it is a directory"));
    }
    if !meta.is_file() {
        return read_at_most(file, most);
    }
    // A regular file is refused before it is read, and read into a buffer of its size.
    if meta.len() > most {
        return Err(too_large(most));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(most + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > most {
        // It grew while read.
        return Err(too_large(most));
    }
    Ok(bytes)
}

/// The error for an input of more than `most` bytes.
fn too_large(most: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::FileTooLarge,
        format!("it holds more than {most} bytes, the most read whole"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_input_is_cut_at_the_cap_and_a_fitting_one_read_whole() {
        let err = read_path(Path::new("/dev/zero"), 1000).unwrap_err();
        assert!(err.to_string().contains("more than 1000 bytes"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, b"0123456789").unwrap();
        assert_eq!(read_path(&file, 10).unwrap(), b"0123456789");
        assert!(read_path(&file, 9).is_err());
        assert!(read_path(dir.path(), 10)
            .unwrap_err()
            .to_string()
            .contains("directory"));
    }
}
