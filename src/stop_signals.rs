//! SIGINT and SIGTERM, for every command that stops cleanly: the first asks the command to
//! stop (training saves a checkpoint after the step under way; the server answers what is in
//! flight), the second ends the process at once, saying so, with the shell's status for
//! death by that signal (130, 143).

use std::io::Write;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use anyhow::Context;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// The signal that asked to stop, once one has.
pub struct StopSignals {
    received: Arc<AtomicI32>,
}

impl StopSignals {
    /// Listens, on a thread of its own, for the rest of the process: the first signal is
    /// recorded and `on_first` told of it; the second prints `on_second` (what is lost) and
    /// exits.
    pub fn install(
        on_first: impl FnOnce(i32) + Send + 'static,
        on_second: &'static str,
    ) -> anyhow::Result<Self> {
        let mut signals =
            Signals::new([SIGINT, SIGTERM]).context("cannot listen for SIGINT and SIGTERM")?;
        let received = Arc::new(AtomicI32::new(0));
        let recorded = received.clone();
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                let mut arriving = signals.forever();
                if let Some(first) = arriving.next() {
                    recorded.store(first, Ordering::SeqCst);
                    on_first(first);
                }
                if let Some(second) = arriving.next() {
                    // Written, not `eprintln!`ed: a closed stderr must not stop the exit.
                    let _ = writeln!(
                        std::io::stderr(),
                        "stopped at once: a second signal ({}); {on_second}",
                        signal_name(second)
                    );
                    std::process::exit(128 + second);
                }
            })
            .context("cannot start the signal thread")?;
        Ok(Self { received })
    }

    /// The signal that asked to stop, if one did.
    pub fn received(&self) -> Option<i32> {
        match self.received.load(Ordering::SeqCst) {
            0 => None,
            signal => Some(signal),
        }
    }
}

/// `SIGINT` for 2, and so on, for messages.
pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}
