//! The library's errors as Python exceptions, carrying the line the command line prints
//! (without its `error: `): a usage error or a config the reader refuses is a `ValueError`,
//! a missing file or checkpoint a `FileNotFoundError`, a run stopped by Ctrl-C a `KeyboardInterrupt`, anything else a
//! `RuntimeError`. A panic is caught before it reaches Python and becomes a `RuntimeError`.

use std::panic::AssertUnwindSafe;

use pyo3::exceptions::{
    PyFileNotFoundError, PyKeyboardInterrupt, PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::PyErr;
use transformer::checkpoint::NoCheckpoint;
use transformer::config::ConfigError;
use transformer_cli::{error_line, failure, Failure};

/// `error` as the exception Python code expects for it.
pub fn to_python(error: anyhow::Error) -> PyErr {
    let line = error_line(&error);
    match failure(&error) {
        Failure::Interrupted(_) => PyKeyboardInterrupt::new_err(line),
        Failure::Usage => PyValueError::new_err(line),
        Failure::Other if error.chain().any(|c| c.is::<ConfigError>()) => {
            PyValueError::new_err(line)
        }
        Failure::Other if is_missing(&error) => PyFileNotFoundError::new_err(line),
        Failure::Other => PyRuntimeError::new_err(line),
    }
}

/// A file or checkpoint that is not there, anywhere in the error's chain.
fn is_missing(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause.is::<NoCheckpoint>()
            || cause
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound)
    })
}

/// A usage error in the command line's words, raised before any work.
pub fn usage(message: impl Into<String>) -> PyErr {
    PyValueError::new_err(message.into())
}

/// An argument of the wrong type, named.
pub fn wrong_type(message: impl Into<String>) -> PyErr {
    PyTypeError::new_err(message.into())
}

/// Runs `work`, its error or panic turned into the exception for it: a panic is a bug, and
/// says so rather than taking the interpreter down.
pub fn guarded<T>(work: impl FnOnce() -> anyhow::Result<T>) -> Result<T, PyErr> {
    match std::panic::catch_unwind(AssertUnwindSafe(work)) {
        Ok(result) => result.map_err(to_python),
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("no message");
            Err(PyRuntimeError::new_err(format!(
                "internal error (a bug in transformer, please report it): {what}"
            )))
        }
    }
}
