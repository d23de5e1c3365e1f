//! SIGINT / SIGTERM during training: the first one asks the loop to stop after the current
//! step (and write a checkpoint); a second one ends the process at once.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use anyhow::Context;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::flag;

/// The signals that have arrived since `install`.
pub struct StopSignals {
    received: Arc<AtomicUsize>,
}

impl StopSignals {
    /// Installs the handlers for the rest of the process.
    pub fn install() -> anyhow::Result<Self> {
        let received = Arc::new(AtomicUsize::new(0));
        let armed = Arc::new(AtomicBool::new(false));
        for signal in [SIGINT, SIGTERM] {
            // Registered first, so it sees `armed` as the previous signal left it: the second
            // signal exits with the shell's code for death by that signal.
            flag::register_conditional_shutdown(signal, 128 + signal, armed.clone())
                .and_then(|_| flag::register(signal, armed.clone()))
                .and_then(|_| flag::register_usize(signal, received.clone(), signal as usize))
                .context("cannot install the SIGINT/SIGTERM handlers")?;
        }
        Ok(Self { received })
    }

    /// The signal that asked to stop, if one did.
    pub fn received(&self) -> Option<i32> {
        match self.received.load(Ordering::SeqCst) {
            0 => None,
            signal => i32::try_from(signal).ok(),
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
