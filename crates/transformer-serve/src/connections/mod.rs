//! The server's connections: accepted one at a time, at most `max_connections` open at once
//! and `max_per_client` from one address, each served by hyper's HTTP/1. A request's head
//! must arrive whole within `header_timeout` of the connection's opening (or of its last
//! answer: an idle connection closes as late), however slowly its bytes trickle in, and an
//! answer may wait as long for the client to read it. When the server (or a client's share)
//! is full, a connection waiting for a request's head is shed for the new one, the heaviest
//! client's first (see `OpenConnections::admit`), so that a client holding connections open
//! without requests (a slowloris) cannot lock others out; a connection whose request's body
//! arrives slower than 500 bytes a second may be shed as well. Only when every connection is
//! answering a request is the new one answered 503. A client that shuts its writing side
//! after its request is still answered (see `half_close`).
//! On the stop signal the listener closes, connections with no request being answered close
//! at once, and the requests in flight are answered, for at most `drain` before the rest are
//! dropped.
//!
//! axum's own `serve` sets no header timeout, and hyper's restarts with each read: a client
//! sending its headers one byte at a time would hold a connection forever.

mod half_close;
mod open_connections;
mod received_body;
mod stall_limited;

use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper::service::{service_fn, Service as _};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use half_close::HalfClosable;
use open_connections::{AnsweredBody, Answering, Connection, Grace, OpenConnections};
use received_body::ReceivedBody;
use stall_limited::StallLimited;

/// How long a connection must have waited for a request's head before a newer one may take
/// its place: a head on its way arrives well within it.
const SHED_AFTER: Duration = Duration::from_millis(250);

/// How many connections, and how slow ones may be.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Most connections open at once.
    pub max_connections: usize,
    /// Most connections open at once from one client address.
    pub max_per_client: usize,
    /// Longest a client may take to send a request's head (from the connection's opening,
    /// or from its last answer), and longest an answer may wait for the client to read it.
    pub header_timeout: Duration,
    /// Longest a stop waits for the requests in flight.
    pub drain: Duration,
}

/// File descriptors kept back from connections for everything else the process opens (the
/// listener, stdio, the runtime's): a quarter of the limit, at least 16 and at most 64.
fn reserved_descriptors(limit: u64) -> u64 {
    (limit / 4).clamp(16, 64)
}

impl ConnectionLimits {
    /// `max_connections` lowered, with a warning naming it as `setting`, to what the
    /// process's limit on open files allows: past that, accepting fails for everyone instead
    /// of a 503 for the newest.
    pub fn within_open_file_limit(mut self, setting: &str) -> Self {
        if let Some(limit) = open_file_limit() {
            let room = usize::try_from(limit.saturating_sub(reserved_descriptors(limit)).max(1))
                .unwrap_or(usize::MAX);
            if self.max_connections > room {
                self.max_per_client = self.max_per_client.min(room);
                log::warn!(
                    "{setting} {} lowered to {room}: this process may open {limit} files \
                     (ulimit -n); raise that limit to allow more",
                    self.max_connections
                );
                self.max_connections = room;
            }
        }
        self
    }
}

/// The soft limit on open file descriptors, if there is one.
fn open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given and reads nothing else.
    let status = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    (status == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// Serves `router` on `listener` until `stop` resolves, then drains (see the module docs);
/// a connection past the limit is answered [`too_many_connections`], naming the limit as
/// `setting`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    setting: &str,
    stop: impl Future<Output = ()>,
) {
    let refusal = too_many_connections(setting);
    let open = OpenConnections::new(
        limits.max_connections,
        limits.max_per_client,
        SHED_AFTER.min(limits.header_timeout / 2),
    );
    let (stopping, _) = watch::channel(false);
    let mut stop = std::pin::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => (stream, peer.ip()),
                Err(e) => {
                    pause_after(e).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let Ok(admitted) = open.admit(canonical(peer)) else {
            let _ = stream.try_write(&refusal);
            continue;
        };
        let served = serve_connection(
            stream,
            router.clone(),
            limits,
            admitted.connection.clone(),
            stopping.subscribe(),
        );
        tokio::spawn(async move {
            served.await;
            drop(admitted);
        });
    }
    drop(listener);
    let _ = stopping.send(true);
    if tokio::time::timeout(limits.drain, open.all_closed())
        .await
        .is_err()
    {
        log::warn!(
            "connections still open {} ms after the stop were dropped",
            limits.drain.as_millis()
        );
    }
}

/// An IPv4 client reaching an IPv6 listener as `::ffff:a.b.c.d` is the client `a.b.c.d`.
fn canonical(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(peer, IpAddr::V4),
        v4 => v4,
    }
}

/// One connection until it ends: closed when its request's head has not arrived whole
/// within `header_timeout`, or when the server sheds it for a newer one while it waits for
/// one; once `stopping` turns true, at once if no request of its own is being answered,
/// else after that answer.
async fn serve_connection(
    stream: TcpStream,
    router: Router,
    limits: ConnectionLimits,
    state: Arc<Connection>,
    mut stopping: watch::Receiver<bool>,
) {
    let inner = TowerToHyperService::new(router);
    let answered = state.clone();
    let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        let answering = Answering::new(answered.clone());
        let request = request.map(|body| ReceivedBody::new(body, answered.clone()));
        let answer = inner.call(request);
        async move {
            let response = answer.await?;
            answering.begun();
            Ok::<_, std::convert::Infallible>(response.map(|body| {
                axum::body::Body::new(AnsweredBody {
                    body,
                    _answering: answering,
                })
            }))
        }
    });
    let mut builder = http1::Builder::new();
    // hyper's own half-closes stay off: `HalfClosable` tells a client that shut its writing
    // side from one that went away.
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let io = HalfClosable::new(
        StallLimited::new(stream, limits.header_timeout),
        state.clone(),
    );
    let connection = builder.serve_connection(TokioIo::new(io), service);
    let mut connection = std::pin::pin!(connection);
    loop {
        let deadline = state
            .waiting_since()
            .map(|since| tokio::time::Instant::from_std(since + limits.header_timeout));
        tokio::select! {
            // A client that goes away mid-request is its own business, not the server's.
            _ = connection.as_mut() => return,
            _ = stopping.wait_for(|stop| *stop) => break,
            () = state.shed.notified() => {
                // Shed while waiting for a head or sending a body slowly: closed. (It may
                // have moved on since it was chosen; then it is left alone.)
                if state.sheddable_since(Grace::NONE).is_some() {
                    return;
                }
            }
            () = sleep_until(deadline) => {
                if state.waiting_since().is_some_and(|since| since.elapsed() >= limits.header_timeout) {
                    return;
                }
            }
            () = state.changed.notified() => {}
        }
    }
    if state.waiting_since().is_none() {
        connection.as_mut().graceful_shutdown();
        let _ = connection.await;
    }
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// The answer to a connection past `max_connections` (named as `setting`), written without
/// waiting (the socket's buffer takes it whole) before the connection is closed.
fn too_many_connections(setting: &str) -> Vec<u8> {
    let body = serde_json::json!({
        "error": format!("too many connections to this server ({setting}); retry later")
    });
    let body = format!("{body}\n");
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: \
         1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// After a failed accept: a client that reset its connection is nothing; running out of file
/// descriptors is waited out, as hyper's own server did, so that the loop does not spin.
async fn pause_after(error: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if !matches!(
        error.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        log::warn!("cannot accept a connection: {error}; retrying in a second");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_whole_http_response_of_its_stated_length() {
        let refusal = too_many_connections("serve --max-connections \"x\"");
        let text = std::str::from_utf8(&refusal).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert!(json["error"]
            .as_str()
            .unwrap()
            .contains("--max-connections"));
    }
}
