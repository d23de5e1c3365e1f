//! A client that shuts its writing side once its request is sent (`shutdown(SHUT_WR)`, as
//! `nc -N` and some batch clients do) still gets its answer, while the work of a client that
//! went away is still dropped.
//!
//! Both look the same to the server: the end of the stream, read while the answer is being
//! worked out. hyper either ends the request there (the work of a client gone is dropped, but
//! a half-closed client is never answered) or, with `half_close(true)`, never looks again
//! (the answer is written, but a client gone keeps the server computing for no one). So the
//! end of the stream is not passed on while a request is answered: the first bytes every
//! answer begins with (`HTTP/1.`) are written at once instead. A half-closed client reads
//! them as the start of its answer; the kernel of a client that closed its socket answers
//! them with a reset, which fails this stream's next read, and hyper drops the request.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::open_connections::Connection;
use super::stall_limited::StallLimited;

/// What every HTTP/1 answer hyper writes begins with (`HTTP/1.1 ` or `HTTP/1.0 `).
const PROBE: &[u8] = b"HTTP/1.";

/// How often a half-closed connection is looked at: for the reset of a client gone, for the
/// end of its answer.
const CHECK_EVERY: Duration = Duration::from_millis(50);

/// A connection's stream as hyper reads and writes it (see the module docs).
pub(super) struct HalfClosable {
    io: StallLimited,
    connection: Arc<Connection>,
    /// The client has shut its writing side while a request was answered.
    half_closed: bool,
    /// How much of [`PROBE`] has been written.
    probe_written: usize,
    /// How much of [`PROBE`] is still to be cut from the start of hyper's answer.
    probe_to_cut: usize,
    /// hyper has written since it last flushed: the probe must not land inside its bytes.
    unflushed: bool,
    check: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl HalfClosable {
    pub(super) fn new(io: StallLimited, connection: Arc<Connection>) -> Self {
        Self {
            io,
            connection,
            half_closed: false,
            probe_written: 0,
            probe_to_cut: 0,
            unflushed: false,
            check: None,
        }
    }

    /// A half-closed connection's read: the end of the stream once its answer is given, an
    /// error once the client is found gone, else waiting (and writing the probe when hyper
    /// has nothing of its own on the way).
    fn poll_half_closed(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            // Answered: hyper flushes the answer before it closes on this end.
            if self.connection.waiting_since().is_some() {
                return Poll::Ready(Ok(()));
            }
            // Once hyper has the answer, its writing finds a client gone by itself.
            if !self.unflushed && !self.connection.answer_begun() {
                if let Poll::Ready(Err(e)) = self.poll_write_probe(cx) {
                    return Poll::Ready(Err(e));
                }
            }
            if let Some(error) = self.io.stream().take_error()? {
                return Poll::Ready(Err(error));
            }
            let timer = self
                .check
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(CHECK_EVERY)));
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            timer
                .as_mut()
                .reset(tokio::time::Instant::now() + CHECK_EVERY);
        }
    }

    /// Writes what is left of the probe.
    fn poll_write_probe(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.probe_written < PROBE.len() {
            let probe = &PROBE[self.probe_written..];
            let n = std::task::ready!(Pin::new(&mut self.io).poll_write(cx, probe))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.probe_written += n;
            self.probe_to_cut += n;
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for HalfClosable {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.half_closed {
            let before = buf.filled().len();
            std::task::ready!(Pin::new(&mut this.io).poll_read(cx, buf))?;
            let ended = buf.filled().len() == before && buf.remaining() > 0;
            // The end of the stream between requests (or inside a head) is passed on.
            if !ended || this.connection.waiting_since().is_some() {
                return Poll::Ready(Ok(()));
            }
            this.half_closed = true;
            this.connection.stopped_sending();
        }
        this.poll_half_closed(cx)
    }
}

impl AsyncWrite for HalfClosable {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        this.unflushed = true;
        if this.probe_written > 0 {
            // A probe begun is finished before anything else is written.
            std::task::ready!(this.poll_write_probe(cx))?;
        }
        if this.probe_to_cut == 0 {
            return Pin::new(&mut this.io).poll_write(cx, buf);
        }
        // The answer's first bytes went out as the probe: they are cut here.
        let cut = this.probe_to_cut.min(buf.len());
        let sent = &PROBE[PROBE.len() - this.probe_to_cut..][..cut];
        if &buf[..cut] != sent {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "an answer that does not begin as HTTP/1 after a half-close",
            )));
        }
        let rest = if cut < buf.len() {
            std::task::ready!(Pin::new(&mut this.io).poll_write(cx, &buf[cut..]))?
        } else {
            0
        };
        this.probe_to_cut -= cut;
        Poll::Ready(Ok(cut + rest))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        std::task::ready!(Pin::new(&mut this.io).poll_flush(cx))?;
        this.unflushed = false;
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    // Not vectored, so that hyper's answer comes through `poll_write`, where the probe is cut.
    fn is_write_vectored(&self) -> bool {
        false
    }
}
