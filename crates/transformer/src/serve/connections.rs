//! The server's connections: accepted one at a time, at most `max_connections` open at once
//! (one more is answered 503 and closed), each served by hyper's HTTP/1 with a bound on how
//! long its request headers may take to arrive, which also closes a connection left idle
//! between requests, and as long for a client to take in (read) what is written to it. On the stop signal the listener closes, connections with no request
//! being answered close at once (idle ones, and ones still sending headers), and the
//! requests in flight are answered, for at most `drain` before the rest are dropped.
//!
//! axum's own `serve` sets no header timeout: a client sending its headers one byte a second
//! would hold a connection (and a file descriptor, and a graceful stop) forever.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper::service::{service_fn, Service as _};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

/// How many connections, and how slow ones may be.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Most connections open at once.
    pub max_connections: usize,
    /// Longest a client may take to send a request's headers (or stay idle between
    /// requests), and longest an answer may wait for the client to read it.
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
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let (stopping, _) = watch::channel(false);
    let mut stop = std::pin::pin!(stop);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    pause_after(e).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            let _ = stream.try_write(&refusal);
            continue;
        };
        let connection = serve_connection(stream, router.clone(), limits, stopping.subscribe());
        tokio::spawn(async move {
            connection.await;
            drop(slot);
        });
    }
    drop(listener);
    let _ = stopping.send(true);
    // Every connection holds a slot until it ends: all the slots back means all are done.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(limits.drain, slots.acquire_many(all))
        .await
        .is_err()
    {
        log::warn!(
            "connections still open {} ms after the stop were dropped",
            limits.drain.as_millis()
        );
    }
}

/// One connection until it ends; once `stopping` turns true, at once if no request of its
/// own is being answered (an idle keep-alive connection, or one still sending its headers),
/// else after that answer.
async fn serve_connection(
    stream: TcpStream,
    router: Router,
    limits: ConnectionLimits,
    mut stopping: watch::Receiver<bool>,
) {
    let answering = Arc::new(AtomicUsize::new(0));
    let inner = TowerToHyperService::new(router);
    let counter = answering.clone();
    let service = service_fn(move |request| {
        let answer = inner.call(request);
        let guard = Answering::new(counter.clone());
        async move {
            let response = answer.await;
            drop(guard);
            response
        }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let io = StallLimited::new(stream, limits.header_timeout);
    let connection = builder.serve_connection(TokioIo::new(io), service);
    let mut connection = std::pin::pin!(connection);
    tokio::select! {
        // A client that goes away mid-request is its own business, not the server's.
        _ = connection.as_mut() => return,
        _ = stopping.wait_for(|stop| *stop) => {}
    }
    if answering.load(Ordering::Acquire) > 0 {
        connection.as_mut().graceful_shutdown();
        let _ = connection.await;
    }
}

/// A stream whose writes fail once they have waited `limit` without progress: a client that
/// stops reading its answers (its receive window full) would otherwise hold the connection,
/// and one of `max_connections`, forever.
struct StallLimited {
    stream: TcpStream,
    limit: Duration,
    /// Set while a write waits on the client, from the moment it began waiting.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl StallLimited {
    fn new(stream: TcpStream, limit: Duration) -> Self {
        Self {
            stream,
            limit,
            stalled: None,
        }
    }

    /// Passes a write's outcome on: progress clears the stall; waiting starts (or keeps) the
    /// clock, and past `limit` the write fails.
    fn watch<T>(
        &mut self,
        cx: &mut Context<'_>,
        outcome: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if outcome.is_ready() {
            self.stalled = None;
            return outcome;
        }
        let limit = self.limit;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading its answer",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for StallLimited {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for StallLimited {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let outcome = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.watch(cx, outcome)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let outcome = Pin::new(&mut self.stream).poll_flush(cx);
        self.watch(cx, outcome)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let outcome = Pin::new(&mut self.stream).poll_shutdown(cx);
        self.watch(cx, outcome)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let outcome = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.watch(cx, outcome)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// Counts a request being answered on its connection while it lives.
struct Answering(Arc<AtomicUsize>);

impl Answering {
    fn new(counter: Arc<AtomicUsize>) -> Self {
        counter.fetch_add(1, Ordering::AcqRel);
        Self(counter)
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
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
