//! The open connections as the server watches them: whether each is waiting for a request's
//! head (since when), receiving a body (how fast) or answering, so that a slow client's
//! connections are the ones shed when the server is full, and a head that takes too long in
//! total closes its connection.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::{watch, Notify};

/// One connection's state.
pub(super) struct Connection {
    /// When it began waiting for a request's head (its opening, or the end of its last
    /// answer); `None` while a request is answered.
    waiting_since: Mutex<Option<Instant>>,
    /// Told of each change of state.
    pub(super) changed: Notify,
    /// Told that the server took its slot for a newer connection.
    pub(super) shed: Notify,
    /// How the request's body is arriving, while it is.
    body: Mutex<Option<BodyProgress>>,
    /// The client has shut its writing side (see `half_close`).
    stopped_sending: AtomicBool,
    /// Woken when the client stops sending: a body waiting for more bytes gets none.
    body_waker: Mutex<Option<Waker>>,
    /// hyper has the answer to the request being answered.
    answer_begun: AtomicBool,
}

/// How a request's body has been arriving: a leaky bucket of standing, filled by its bytes
/// and drained at [`MIN_BODY_BYTES_PER_SECOND`]; a body whose standing runs out is slow.
#[derive(Clone, Copy)]
struct BodyProgress {
    began: Instant,
    /// Bytes of standing at `at`, at most [`MOST_BODY_STANDING`].
    standing: f64,
    at: Instant,
}

impl BodyProgress {
    fn standing_now(&self) -> f64 {
        self.standing - MIN_BODY_BYTES_PER_SECOND * self.at.elapsed().as_secs_f64()
    }
}

/// A body arriving slower than this, once it has had [`SLOW_BODY_GRACE`], may be shed for a
/// new connection when the server is full (Apache's `mod_reqtimeout` asks as much).
const MIN_BODY_BYTES_PER_SECOND: f64 = 500.0;
const SLOW_BODY_GRACE: Duration = Duration::from_millis(100);

/// The most standing a body's bytes buy: a second at the floor rate, so that a burst
/// followed by a trickle is slow within a second (as an average since the start would
/// not be for a second per 500 bytes of the burst).
const MOST_BODY_STANDING: f64 = MIN_BODY_BYTES_PER_SECOND;

/// How long a connection must have been waiting, for its head or in a slow body, to be shed.
#[derive(Clone, Copy)]
pub(super) struct Grace {
    pub(super) head: Duration,
    pub(super) body: Duration,
}

impl Grace {
    pub(super) const NONE: Grace = Grace {
        head: Duration::ZERO,
        body: Duration::ZERO,
    };
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Connection {
    fn new() -> Self {
        Self {
            waiting_since: Mutex::new(Some(Instant::now())),
            changed: Notify::new(),
            shed: Notify::new(),
            body: Mutex::new(None),
            stopped_sending: AtomicBool::new(false),
            body_waker: Mutex::new(None),
            answer_begun: AtomicBool::new(false),
        }
    }

    /// Since when it has waited for a request's head; `None` while it answers one.
    pub(super) fn waiting_since(&self) -> Option<Instant> {
        *locked(&self.waiting_since)
    }

    fn set_waiting(&self, since: Option<Instant>) {
        *locked(&self.waiting_since) = since;
        self.changed.notify_one();
    }

    /// Since when it may be shed: it has waited that long, at least `grace.head`, for a
    /// request's head, or it has been receiving a body slower than
    /// [`MIN_BODY_BYTES_PER_SECOND`] since then, for at least `grace.body`.
    pub(super) fn sheddable_since(&self, grace: Grace) -> Option<Instant> {
        if let Some(since) = self.waiting_since() {
            return (since.elapsed() >= grace.head).then_some(since);
        }
        self.slow_body_since(grace.body)
    }

    /// Since when it has been receiving a body slower than [`MIN_BODY_BYTES_PER_SECOND`] (its
    /// standing run out), for at least `grace` (its first [`SLOW_BODY_GRACE`] aside).
    fn slow_body_since(&self, grace: Duration) -> Option<Instant> {
        let body = (*locked(&self.body))?;
        if body.began.elapsed() < SLOW_BODY_GRACE || body.standing_now() >= 0.0 {
            return None;
        }
        let left = Duration::from_secs_f64(body.standing.abs() / MIN_BODY_BYTES_PER_SECOND);
        let since = if body.standing >= 0.0 {
            body.at + left
        } else {
            body.at.checked_sub(left).unwrap_or(body.began)
        };
        let since = since.max(body.began);
        (since.elapsed() >= grace).then_some(since)
    }

    /// Counts `bytes` more of the request's body (the first call starts its clock).
    pub(super) fn body_received(&self, bytes: usize) {
        let mut body = locked(&self.body);
        let now = Instant::now();
        let progress = body.get_or_insert(BodyProgress {
            began: now,
            standing: 0.0,
            at: now,
        });
        if bytes > 0 {
            progress.standing = (progress.standing_now() + bytes as f64).min(MOST_BODY_STANDING);
            progress.at = now;
        }
    }

    /// The request's body is whole (or no longer read).
    pub(super) fn body_ended(&self) {
        *locked(&self.body) = None;
    }

    /// The client shut its writing side while a request was answered.
    pub(super) fn stopped_sending(&self) {
        self.stopped_sending.store(true, Ordering::SeqCst);
        if let Some(waker) = locked(&self.body_waker).take() {
            waker.wake();
        }
    }

    /// Whether the client has stopped sending; if not, `waker` is woken when it does.
    pub(super) fn has_stopped_sending(&self, waker: &Waker) -> bool {
        *locked(&self.body_waker) = Some(waker.clone());
        self.stopped_sending.load(Ordering::SeqCst)
    }

    pub(super) fn answer_begun(&self) -> bool {
        self.answer_begun.load(Ordering::SeqCst)
    }
}

/// Marks a connection as answering while it lives: from the request's head until its
/// answer's body is written (or dropped, when the client went away).
pub(super) struct Answering(Arc<Connection>);

impl Answering {
    pub(super) fn new(connection: Arc<Connection>) -> Self {
        connection.answer_begun.store(false, Ordering::SeqCst);
        connection.set_waiting(None);
        Self(connection)
    }

    /// The answer is in hyper's hands from now on.
    pub(super) fn begun(&self) {
        self.0.answer_begun.store(true, Ordering::SeqCst);
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.set_waiting(Some(Instant::now()));
    }
}

/// An answer's body that holds its connection's [`Answering`] until it is written.
pub(super) struct AnsweredBody<B> {
    pub(super) body: B,
    pub(super) _answering: Answering,
}

impl<B: Body + Unpin> Body for AnsweredBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Why a connection was not let in.
pub(super) struct Refused;

/// The connections open, by id, with their clients' addresses.
pub(super) struct OpenConnections {
    entries: Mutex<HashMap<u64, (IpAddr, Arc<Connection>)>>,
    next_id: AtomicU64,
    /// How many connection tasks are still running (shed ones included, until they end).
    running: watch::Sender<usize>,
    max_connections: usize,
    max_per_client: usize,
    /// How long a connection must have waited for a request's head before it may be shed:
    /// an honest client's head arrives within it, a slow client's keeps it waiting longer.
    shed_after: Duration,
    /// The addresses whose connections were shed lately, and when (see [`Self::to_shed`]).
    shed_lately: Mutex<HashMap<IpAddr, Instant>>,
}

/// How long an address whose connection was shed is remembered as a slow client's.
const SHED_MEMORY: Duration = Duration::from_secs(10);

/// How long a connection must have waited before a client shed lately may take its place.
const SHED_CLIENT_GRACE: Duration = Duration::from_secs(2);

/// A connection let in: it leaves the open connections when this is dropped.
pub(super) struct Admitted {
    open: Arc<OpenConnections>,
    id: u64,
    pub(super) connection: Arc<Connection>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.open.entries().remove(&self.id);
        self.open.running.send_modify(|n| *n -= 1);
    }
}

impl OpenConnections {
    pub(super) fn new(
        max_connections: usize,
        max_per_client: usize,
        shed_after: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            entries: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            running: watch::Sender::new(0),
            max_connections,
            max_per_client,
            shed_after,
            shed_lately: Mutex::new(HashMap::new()),
        })
    }

    /// Remembers that a connection from `peer` was shed, forgetting what is older than
    /// [`SHED_MEMORY`] (and, past a bound of its own, everything: it never grows without one).
    fn remember_shed(&self, peer: IpAddr) {
        let mut lately = locked(&self.shed_lately);
        if lately.len() >= 4 * self.max_connections.max(64) {
            lately.retain(|_, when| when.elapsed() < SHED_MEMORY);
            if lately.len() >= 4 * self.max_connections.max(64) {
                lately.clear();
            }
        }
        lately.insert(peer, Instant::now());
    }

    /// Whether a connection from `peer` was shed within [`SHED_MEMORY`].
    fn was_shed_lately(&self, peer: IpAddr) -> bool {
        locked(&self.shed_lately)
            .get(&peer)
            .is_some_and(|when| when.elapsed() < SHED_MEMORY)
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (IpAddr, Arc<Connection>)>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Lets a connection from `peer` in, shedding one that waits for a request's head (or
    /// sends a body slowly) when there is no room (see [`Self::to_shed`]); when none may be shed, it is refused.
    pub(super) fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Admitted, Refused> {
        let mut entries = self.entries();
        let mut held: HashMap<IpAddr, usize> = HashMap::new();
        for (p, _) in entries.values() {
            *held.entry(*p).or_default() += 1;
        }
        let own = held.get(&peer).copied().unwrap_or(0);
        let peer_full = own >= self.max_per_client;
        if peer_full || entries.len() >= self.max_connections {
            let id = self
                .to_shed(&entries, &held, peer, peer_full)
                .ok_or(Refused)?;
            if let Some((shed_peer, shed)) = entries.remove(&id) {
                shed.shed.notify_one();
                self.remember_shed(shed_peer);
            }
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let connection = Arc::new(Connection::new());
        entries.insert(id, (peer, connection.clone()));
        drop(entries);
        self.running.send_modify(|n| *n += 1);
        Ok(Admitted {
            open: self.clone(),
            id,
            connection,
        })
    }

    /// The connection to shed for a new one from `peer`, among those waiting for a request's
    /// head or sending a body slowly ("waiting" below). At its own share (`peer_full`): its
    /// own connection that has waited longest, at least `shed_after`. On a full server: a
    /// connection of the heaviest client that holds at least two more than `peer` and has
    /// one waiting, its longest-waiting (one client cannot keep the others out; a client
    /// only one ahead is left alone, or a newcomer would take the fresh connection of a
    /// client it merely ties with, its head still on the way); else the longest-waiting of
    /// all, for at least `shed_after` (a head on its way is left to arrive), or
    /// [`SHED_CLIENT_GRACE`] when `peer` is itself a slow client (one of its connections
    /// was shed lately, or one is sending its body slowly): slow clients from many
    /// addresses would otherwise shed each other's connections so fast that every one is
    /// too young to shed for a real client.
    fn to_shed(
        &self,
        entries: &HashMap<u64, (IpAddr, Arc<Connection>)>,
        held: &HashMap<IpAddr, usize>,
        peer: IpAddr,
        peer_full: bool,
    ) -> Option<u64> {
        let waiting = |grace: Grace| {
            entries.iter().filter_map(move |(id, (p, c))| {
                c.sheddable_since(grace).map(|since| (*p, since, *id))
            })
        };
        // A head on its way is left `shed_after` to arrive; a slow body is slow already.
        let head_only = Grace {
            head: self.shed_after,
            body: Duration::ZERO,
        };
        if peer_full {
            let own_grace = Grace {
                head: self.shed_after,
                body: self.shed_after,
            };
            return waiting(own_grace)
                .filter(|(p, _, _)| *p == peer)
                .min_by_key(|(_, since, _)| *since)
                .map(|(_, _, id)| id);
        }
        let own = held.get(&peer).copied().unwrap_or(0);
        let count = |p: &IpAddr| held.get(p).copied().unwrap_or(0);
        waiting(Grace::NONE)
            .filter(|(p, _, _)| *p != peer && count(p) > own + 1)
            .max_by_key(|(p, since, _)| (count(p), std::cmp::Reverse(*since)))
            .or_else(|| {
                let slow_client = self.was_shed_lately(peer)
                    || entries
                        .values()
                        .any(|(p, c)| *p == peer && c.slow_body_since(Duration::ZERO).is_some());
                let grace = if slow_client {
                    let grace = SHED_CLIENT_GRACE.max(self.shed_after);
                    Grace {
                        head: grace,
                        body: grace,
                    }
                } else {
                    head_only
                };
                waiting(grace).min_by_key(|(_, since, _)| *since)
            })
            .map(|(_, _, id)| id)
    }

    /// Waits until every connection task has ended.
    pub(super) async fn all_closed(&self) {
        let mut running = self.running.subscribe();
        let _ = running.wait_for(|n| *n == 0).await;
    }
}
