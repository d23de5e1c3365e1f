//! The binary's own errors and the wording of the library's: a usage error (exit status 2),
//! a command stopped by a signal (128 + the signal), and a library error turned into the flag
//! a user changes.

use crate::checkpoint;
use crate::infer::settings::Refused;

/// A command stopped on request, its work saved; `main` exits with `exit_code` (128 + the
/// signal, as shells report death by a signal).
#[derive(Debug)]
pub struct Interrupted {
    pub exit_code: u8,
    pub message: String,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Interrupted {}

/// A flag whose value makes no sense for the command (or for the checkpoint it names), found
/// after parsing; `main` exits with status 2, as for the usage errors clap reports itself.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// `error` in the words of a command that reads the checkpoint its CHECKPOINT argument
/// names and writes `--out` (`quantize`, `average`, `export`): a refused output directory
/// names `--out` and `--overwrite`, a missing checkpoint the argument.
pub(crate) fn naming_out_flags(error: anyhow::Error) -> anyhow::Error {
    if let Some(refused) = error.downcast_ref::<checkpoint::OutRefused>() {
        return anyhow::anyhow!(refused.worded("--out", "--overwrite"));
    }
    if let Some(missing) = error.downcast_ref::<checkpoint::NoCheckpoint>() {
        return anyhow::anyhow!("{missing}; name a checkpoint or run directory as CHECKPOINT");
    }
    error
}

/// A refused decoding setting as the command reports it: a usage error (status 2) when a
/// flag asked for it, the file's error (status 1) when the checkpoint's config holds it.
pub(crate) fn refused(refusal: Refused) -> anyhow::Error {
    if refusal.in_config {
        anyhow::Error::msg(refusal.message)
    } else {
        UsageError(refusal.message).into()
    }
}

/// How an MPI rank that gave up waiting for the others says to resume the run.
pub(crate) const MPI_RESUME_ADVICE: &str =
    "resume with `mpirun ... transformer train --resume RUN_DIR`";

/// The first `n` characters of `text`, with an ellipsis when cut.
pub(crate) fn truncate_chars(text: &str, n: usize) -> String {
    match text.char_indices().nth(n) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}
