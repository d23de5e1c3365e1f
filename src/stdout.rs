//! Results on stdout. A reader that stops reading (`transformer translate ... | head -1`)
//! ends the command quietly, as Unix filters end; any other failure to write (a full disk)
//! is a one-line error naming stdout.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

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
    File(&'a Mutex<Written>),
}

/// The temporary file of an `--out`, how many bytes are in it, and the `--out` it becomes.
pub struct Written {
    file: File,
    bytes: u64,
    out: std::path::PathBuf,
}

impl Results<'_> {
    /// Writes `text` and a newline.
    pub fn line(&self, text: &str) -> anyhow::Result<()> {
        match self {
            Self::Stdout => print_line(text),
            Self::File(_) => self.bytes(format!("{text}\n").as_bytes()),
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
            // One write a line, under the lock a stop signal takes: the file never ends in
            // half a line.
            Self::File(written) => {
                let mut written = written.lock().unwrap_or_else(|e| e.into_inner());
                if let Err(e) = written.file.write_all(bytes) {
                    // A write cut short (a full disk) is taken back to the last whole line.
                    let whole = written.bytes;
                    let _ = written.file.set_len(whole);
                    anyhow::bail!(
                        "cannot write {}: {e}; {}",
                        written.out.display(),
                        crate::atomic_file::advice_for(&e)
                    );
                }
                written.bytes += bytes.len() as u64;
                Ok(())
            }
        }
    }
}

/// Runs `fill` with results going to `out` (`-` is stdout), written atomically: the file
/// appears whole when `fill` is done. What `fill` wrote before it failed, or before a SIGINT or
/// SIGTERM stopped it, is put in place all the same (the lines before a bad one are work a
/// user keeps), and the error says so; when it wrote nothing, an existing `out` is left as it
/// was.
pub fn into_file(
    out: &Path,
    fill: impl FnOnce(&Results) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    if out.as_os_str() == "-" {
        return fill(&Results::Stdout);
    }
    let mut failure = None;
    let written = crate::atomic_file::write_atomic_with(out, |tmp| {
        let file = std::fs::OpenOptions::new().write(true).open(tmp)?;
        let written = Arc::new(Mutex::new(Written {
            file,
            bytes: 0,
            out: out.to_path_buf(),
        }));
        keep_on_a_stop_signal(&written, tmp, out)?;
        failure = fill(&Results::File(&written)).err();
        let written = written.lock().unwrap_or_else(|e| e.into_inner());
        if failure.is_some() && written.bytes == 0 {
            return Err("nothing was written".into());
        }
        Ok(())
    });
    match (failure, written) {
        (Some(error), Ok(())) => Err(anyhow::anyhow!(
            "{error:#}; {} holds what was done before it",
            out.display()
        )),
        // Nothing done: the error is the command's, and `out` is as it was.
        (Some(error), Err(_)) => Err(anyhow::anyhow!(
            "{error:#}; {} was left as it was",
            out.display()
        )),
        (None, written) => written,
    }
}

/// On the first SIGINT or SIGTERM, puts what was written to `tmp` in place as `out` (once
/// the line being written is whole) and ends the process as the signal would, saying so.
fn keep_on_a_stop_signal(
    written: &Arc<Mutex<Written>>,
    tmp: &Path,
    out: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let (written, tmp, out) = (written.clone(), tmp.to_path_buf(), out.to_path_buf());
    let target = std::fs::canonicalize(&out).unwrap_or_else(|_| out.clone());
    let on_first = move |signal: i32| {
        let held = written.lock().unwrap_or_else(|e| e.into_inner());
        let name = crate::stop_signals::signal_name(signal);
        let kept = held.bytes > 0
            && held.file.sync_all().is_ok()
            && std::fs::rename(&tmp, &target).is_ok();
        let said = if kept {
            format!("{} holds the translations done before it", out.display())
        } else {
            let _ = std::fs::remove_file(&tmp);
            format!("{} was not written", out.display())
        };
        let _ = writeln!(std::io::stderr(), "stopped by {name}: {said}");
        std::process::exit(128 + signal);
    };
    crate::stop_signals::StopSignals::install(on_first, "nothing more was written")?;
    Ok(())
}
