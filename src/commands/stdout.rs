//! Results on stdout. A reader that stops reading (`transformer translate ... | head -1`)
//! ends the command quietly, as Unix filters end; any other failure to write (a full disk)
//! is a one-line error naming stdout.

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// Stdout was closed by its reader: `main` exits with status 0 and says nothing.
#[derive(Debug)]
pub struct StdoutClosed;

impl std::fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stdout was closed by its reader")
    }
}

impl std::error::Error for StdoutClosed {}

/// Writes `text` and a newline to stdout and flushes it, so that each result reaches a pipe
/// as soon as it is ready.
pub fn print_line(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")
        .and_then(|()| out.flush())
        .map_err(write_error)
}

/// Writes `text` as it is (a whole generated file: no newline added) to stdout and flushes it.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(write_error)
}

/// Writes `warning: MESSAGE` to stderr, and nothing when stderr is gone: a warning about one
/// line must never end a stream whose stderr a reader closed (`eprintln!` would panic).
pub fn warn(message: std::fmt::Arguments) {
    let _ = writeln!(std::io::stderr().lock(), "warning: {message}");
}

fn write_error(e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        StdoutClosed.into()
    } else {
        anyhow::anyhow!("cannot write to stdout: {e}; check the disk or the pipe it goes to")
    }
}

/// Where a command's result lines go: stdout, flushed line by line, or the temporary file
/// of an `--out` that [`into_file`] renames into place when the command is done.
pub enum Results<'a> {
    Stdout,
    File(&'a RefCell<BufWriter<File>>),
}

impl Results<'_> {
    /// Writes `text` and a newline.
    pub fn line(&self, text: &str) -> anyhow::Result<()> {
        match self {
            Self::Stdout => print_line(text),
            Self::File(file) => Ok(writeln!(file.borrow_mut(), "{text}")?),
        }
    }

    /// Writes `bytes` as they are (a document in its own encoding).
    pub fn bytes(&self, bytes: &[u8]) -> anyhow::Result<()> {
        match self {
            Self::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(bytes)
                    .and_then(|()| out.flush())
                    .map_err(write_error)
            }
            Self::File(file) => Ok(file.borrow_mut().write_all(bytes)?),
        }
    }
}

/// Runs `fill` with results going to `out` (`-` is stdout), written atomically: the file
/// appears whole when `fill` is done. When `fill` fails part way, what it wrote before is
/// still put in place (the lines before a bad one are work a user keeps), and the error says
/// so.
pub fn into_file(
    out: &Path,
    fill: impl FnOnce(&Results) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    if out.as_os_str() == "-" {
        return fill(&Results::Stdout);
    }
    let mut failure = None;
    crate::atomic_file::write_atomic_with(out, |tmp| {
        let file = RefCell::new(BufWriter::new(
            std::fs::OpenOptions::new().write(true).open(tmp)?,
        ));
        failure = fill(&Results::File(&file)).err();
        file.into_inner().into_inner().map_err(|e| e.into_error())?;
        Ok(())
    })?;
    match failure {
        Some(error) => Err(anyhow::anyhow!(
            "{error:#}; {} holds what was done before it",
            out.display()
        )),
        None => Ok(()),
    }
}
