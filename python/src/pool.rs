//! Where the engine computes: a rayon pool of this process's own, and calls that run on it
//! while the calling thread listens for Ctrl-C.
//!
//! The pool is built per process: a pool's threads do not survive `os.fork()` (the
//! default start method of `multiprocessing` on Linux), so a child that inherited the parent's
//! would wait for them forever; it builds its own on first use instead. Every rayon loop of the
//! engine (candle's products, the fused kernels) runs on the pool of the thread it is called
//! from, which is this one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use rayon::{ThreadPool, ThreadPoolBuilder};
use transformer::decoding::StillWanted;

use crate::errors::guarded;

/// How often a waiting caller looks for Ctrl-C.
pub const POLL: Duration = Duration::from_millis(50);

/// The pool, and the process that built it.
static POOL: Mutex<Option<(u32, Arc<ThreadPool>)>> = Mutex::new(None);

/// This process's pool: as many threads as `RAYON_NUM_THREADS` says, else one per core.
pub fn pool() -> PyResult<Arc<ThreadPool>> {
    let pid = std::process::id();
    let mut held = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((owner, pool)) = &*held {
        if *owner == pid {
            return Ok(pool.clone());
        }
    }
    let pool = ThreadPoolBuilder::new()
        .thread_name(|i| format!("transformer-{i}"))
        .build()
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start the thread pool: {e}")))?;
    let pool = Arc::new(pool);
    *held = Some((pid, pool.clone()));
    Ok(pool)
}

/// Waits up to [`POLL`], with the GIL released, for what `receiver` is sent: all that arrived
/// (nothing when the time ran out), or `None` once its sender is gone and nothing is left.
pub fn arrived<M: Send>(py: Python<'_>, receiver: &Mutex<mpsc::Receiver<M>>) -> Option<Vec<M>> {
    py.detach(|| {
        let receiver = receiver.lock().ok()?;
        match receiver.recv_timeout(POLL) {
            Ok(first) => Some(std::iter::once(first).chain(receiver.try_iter()).collect()),
            Err(mpsc::RecvTimeoutError::Timeout) => Some(Vec::new()),
            Err(mpsc::RecvTimeoutError::Disconnected) => None,
        }
    })
}

/// Runs `work` on the pool with the GIL released, while this thread looks for Ctrl-C: a
/// KeyboardInterrupt tells `work` it is no longer wanted (decoding stops at its next step) and
/// is raised once it has stopped. On another thread than Python's main one, it just waits.
pub fn interruptible<T: Send>(
    py: Python<'_>,
    work: impl FnOnce(StillWanted) -> anyhow::Result<T> + Send,
) -> PyResult<T> {
    let pool = pool()?;
    let cancelled = AtomicBool::new(false);
    let (sender, receiver) = mpsc::channel();
    // Only this thread reads it; the lock lets the wait run with the GIL released.
    let receiver = Mutex::new(receiver);
    let mut interrupt = None;
    let outcome =
        pool.in_place_scope(|scope| {
            let cancelled = &cancelled;
            scope.spawn(move |_| {
                let still_wanted = || !cancelled.load(Ordering::Relaxed);
                // The receiver waits for this; it is gone only if the caller is.
                let _ = sender.send(guarded(|| work(&still_wanted)));
            });
            loop {
                match arrived(py, &receiver) {
                    // One message: the answer.
                    Some(mut answer) if !answer.is_empty() => break answer.swap_remove(0),
                    Some(_) => {
                        if interrupt.is_none() {
                            if let Err(error) = py.check_signals() {
                                interrupt = Some(error);
                                cancelled.store(true, Ordering::Relaxed);
                            }
                        }
                    }
                    None => break Err(PyRuntimeError::new_err(
                        "internal error (a bug in transformer, please report it): the decoding \
                         job ended without an answer",
                    )),
                }
            }
        });
    match interrupt {
        Some(interrupt) => Err(interrupt),
        None => outcome,
    }
}
