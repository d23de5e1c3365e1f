//! A deadline on every collective call. MPI's calls block until every rank has made them, and
//! over TCP a host or link that silently disappears leaves the others blocked for as long as
//! the kernel keeps retransmitting (a quarter of an hour on Linux's defaults). A thread
//! watches the call in progress and, once it has waited longer than the timeout, hands it to
//! a callback (the job's: one line on stderr, then the process ends).

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::COLLECTIVE_TIMEOUT_VARIABLE;

/// The timeout `TRANSFORMER_COLLECTIVE_TIMEOUT_S` sets, if it is set.
pub fn timeout_from_env() -> anyhow::Result<Option<Duration>> {
    match std::env::var(COLLECTIVE_TIMEOUT_VARIABLE) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => {
            anyhow::bail!("{COLLECTIVE_TIMEOUT_VARIABLE} is not UTF-8; set it to seconds")
        }
        Ok(text) => parse_timeout(&text).map(Some),
    }
}

fn parse_timeout(text: &str) -> anyhow::Result<Duration> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|seconds| *seconds > 0.0)
        .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{COLLECTIVE_TIMEOUT_VARIABLE}={text:?} is not a number of seconds above 0; \
                 set it to e.g. 600, or unset it"
            )
        })
}

/// A collective call that has waited past the timeout.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Overdue {
    /// What the call was, e.g. "a gradient sum".
    pub what: &'static str,
    /// How long it had waited when the watchdog saw it.
    pub waited: Duration,
}

/// The thread that watches the collective call in progress (one at a time: MPI's calls are
/// made by one thread).
pub struct Watchdog {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

struct State {
    timeout: Duration,
    call: Option<Call>,
    stopped: bool,
}

#[derive(Clone, Copy)]
struct Call {
    what: &'static str,
    since: Instant,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent whoever panicked holding it: every update is one store.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Watchdog {
    /// Starts the thread; it calls `on_overdue` (once) with the first call that waits longer
    /// than `timeout`, and stops watching.
    pub fn start(
        timeout: Duration,
        on_overdue: impl FnOnce(Overdue) + Send + 'static,
    ) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                timeout,
                call: None,
                stopped: false,
            }),
            changed: Condvar::new(),
        });
        let watched = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("collective-watchdog".into())
            .spawn(move || {
                if let Some(overdue) = watch(&watched) {
                    on_overdue(overdue);
                }
            })?;
        Ok(Self { shared })
    }

    /// Replaces the timeout; the call in progress, if any, is held to the new one.
    pub fn set_timeout(&self, timeout: Duration) {
        self.shared.lock().timeout = timeout;
        self.shared.changed.notify_one();
    }

    /// Watches the call `what` until the returned guard is dropped.
    pub fn watch(&self, what: &'static str) -> Watched<'_> {
        self.shared.lock().call = Some(Call {
            what,
            since: Instant::now(),
        });
        self.shared.changed.notify_one();
        Watched { watchdog: self }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.shared.lock().stopped = true;
        self.shared.changed.notify_one();
    }
}

/// A collective call in progress, watched until this is dropped.
pub struct Watched<'a> {
    watchdog: &'a Watchdog,
}

impl Drop for Watched<'_> {
    fn drop(&mut self) {
        // No wake-up needed: the thread finds the call gone when its deadline comes.
        self.watchdog.shared.lock().call = None;
    }
}

/// The watchdog thread's loop: sleeps until the deadline of the call in progress, or until a
/// call starts, and returns the first call found past its deadline.
fn watch(shared: &Shared) -> Option<Overdue> {
    let mut state = shared.lock();
    loop {
        if state.stopped {
            return None;
        }
        state = match state.call {
            None => shared
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner),
            Some(call) => {
                let waited = call.since.elapsed();
                if waited > state.timeout {
                    return Some(Overdue {
                        what: call.what,
                        waited,
                    });
                }
                let left = state.timeout - waited;
                shared
                    .changed
                    .wait_timeout(state, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    fn watchdog(timeout: Duration) -> (Watchdog, mpsc::Receiver<Overdue>) {
        let (send, receive) = mpsc::channel();
        let watchdog = Watchdog::start(timeout, move |overdue| {
            send.send(overdue).unwrap();
        })
        .unwrap();
        (watchdog, receive)
    }

    #[test]
    fn a_call_that_waits_past_the_timeout_is_reported_once_with_its_name() {
        let (watchdog, overdue) = watchdog(Duration::from_millis(100));
        let call = watchdog.watch("a gradient sum");
        let reported = overdue.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(reported.what, "a gradient sum");
        assert!(reported.waited > Duration::from_millis(100));
        drop(call);
        let _again = watchdog.watch("a vote");
        assert!(overdue.recv_timeout(Duration::from_millis(500)).is_err());
    }

    #[test]
    fn calls_that_end_in_time_are_not_reported() {
        let (watchdog, overdue) = watchdog(Duration::from_secs(2));
        for _ in 0..20 {
            let _call = watchdog.watch("a gradient sum");
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(overdue.try_recv().is_err());
    }

    #[test]
    fn a_shorter_timeout_applies_to_the_call_in_progress() {
        let (watchdog, overdue) = watchdog(Duration::from_secs(3600));
        let _call = watchdog.watch("a gradient sum");
        watchdog.set_timeout(Duration::from_millis(50));
        let reported = overdue.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(reported.what, "a gradient sum");
    }

    #[test]
    fn the_variable_takes_positive_seconds_only() {
        assert_eq!(parse_timeout("20").unwrap(), Duration::from_secs(20));
        assert_eq!(parse_timeout(" 0.5 ").unwrap(), Duration::from_millis(500));
        for bad in ["0", "-3", "soon", "", "NaN", "inf", "1e300"] {
            let error = parse_timeout(bad).unwrap_err().to_string();
            assert!(error.contains(COLLECTIVE_TIMEOUT_VARIABLE), "{error}");
        }
    }
}
