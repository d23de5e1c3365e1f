//! Shows the library's `log` records on stderr: a warning as `warning: MESSAGE`, a note
//! (info) as it is. Other crates' records are not shown: their chatter is not ours to print.

use std::io::Write;

use log::{Level, LevelFilter, Log, Metadata, Record};

/// The crates whose records are shown: the core (`transformer`) and every crate of the
/// workspace (`transformer_serve`, `transformer_cli`, the Python package's, ...).
fn is_ours(krate: &str) -> bool {
    krate == "transformer" || krate.starts_with("transformer_")
}

struct Stderr;

impl Log for Stderr {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() <= Level::Info && metadata.target().split("::").next().is_some_and(is_ours)
    }

    fn log(&self, record: &Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let prefix = if record.level() <= Level::Warn {
            "warning: "
        } else {
            ""
        };
        // Written, not `eprintln!`ed: a closed stderr must not turn a warning into a panic.
        let _ = writeln!(std::io::stderr().lock(), "{prefix}{}", record.args());
    }

    fn flush(&self) {}
}

/// Installs the logger for the life of the process.
pub fn install() {
    static LOGGER: Stderr = Stderr;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(LevelFilter::Info);
    }
}

#[cfg(test)]
mod tests {
    use super::is_ours;

    #[test]
    fn every_workspace_crates_records_are_shown_and_no_other_crates() {
        for ours in [
            "transformer",
            "transformer_serve",
            "transformer_cli",
            "transformer_documents",
        ] {
            assert!(is_ours(ours), "{ours}");
        }
        for theirs in ["tokenizers", "hyper", "transformers", "candle_core"] {
            assert!(!is_ours(theirs), "{theirs}");
        }
    }
}
