//! Results on stdout. A reader that stops reading (`transformer translate ... | head -1`)
//! ends the command quietly, as Unix filters end; any other failure to write (a full disk)
//! is a one-line error naming stdout.

use std::io::Write;

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
