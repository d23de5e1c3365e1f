//! The open connections as the server watches them: whether each is waiting for a request's
//! head (since when) or answering one, so that a slow client's connections are the ones shed
//! when the server is full, and a head that takes too long in total closes its connection.

use std::collections::HashMap;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
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
}

impl Connection {
    fn new() -> Self {
        Self {
            waiting_since: Mutex::new(Some(Instant::now())),
            changed: Notify::new(),
            shed: Notify::new(),
        }
    }

    /// Since when it has waited for a request's head; `None` while it answers one.
    pub(super) fn waiting_since(&self) -> Option<Instant> {
        *self.waiting_since.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_waiting(&self, since: Option<Instant>) {
        *self.waiting_since.lock().unwrap_or_else(|e| e.into_inner()) = since;
        self.changed.notify_one();
    }
}

/// Marks a connection as answering while it lives: from the request's head until its
/// answer's body is written (or dropped, when the client went away).
pub(super) struct Answering(Arc<Connection>);

impl Answering {
    pub(super) fn new(connection: Arc<Connection>) -> Self {
        connection.set_waiting(None);
        Self(connection)
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
}

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
        })
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (IpAddr, Arc<Connection>)>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Lets a connection from `peer` in, shedding one that waits for a request's head when
    /// there is no room (see [`Self::to_shed`]); when none may be shed, it is refused.
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
            if let Some((_, shed)) = entries.remove(&id) {
                shed.shed.notify_one();
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

    /// The connection to shed for a new one from `peer`. At its own share (`peer_full`):
    /// its own connection that has waited longest for a request's head, at least
    /// `shed_after`. On a full server: the longest-waiting of the client that holds the most
    /// connections, when it holds more than `peer` (one client cannot keep the others out),
    /// else the longest-waiting of all, at least `shed_after` (a head on its way is left to
    /// arrive).
    fn to_shed(
        &self,
        entries: &HashMap<u64, (IpAddr, Arc<Connection>)>,
        held: &HashMap<IpAddr, usize>,
        peer: IpAddr,
        peer_full: bool,
    ) -> Option<u64> {
        let longest_waiting = |of: &dyn Fn(IpAddr) -> bool, at_least: Duration| {
            entries
                .iter()
                .filter(|(_, (p, _))| of(*p))
                .filter_map(|(id, (_, c))| c.waiting_since().map(|since| (since, *id)))
                .filter(|(since, _)| since.elapsed() >= at_least)
                .min()
                .map(|(_, id)| id)
        };
        if peer_full {
            return longest_waiting(&|p| p == peer, self.shed_after);
        }
        let own = held.get(&peer).copied().unwrap_or(0);
        let heaviest = held
            .iter()
            .filter(|(p, n)| **p != peer && **n > own)
            .max_by_key(|(_, n)| **n)
            .map(|(p, _)| *p);
        heaviest
            .and_then(|heavy| longest_waiting(&|p| p == heavy, Duration::ZERO))
            .or_else(|| longest_waiting(&|_| true, self.shed_after))
    }

    /// Waits until every connection task has ended.
    pub(super) async fn all_closed(&self) {
        let mut running = self.running.subscribe();
        let _ = running.wait_for(|n| *n == 0).await;
    }
}
