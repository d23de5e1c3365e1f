//! A request's body as the server receives it: counted, so that a client sending it slowly
//! can be shed when the server is full, and ended when the client stops sending before the
//! whole body has come (see `half_close`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};

use super::open_connections::Connection;

/// The error a body whose client stopped sending ends with.
#[derive(Debug)]
struct StoppedSending;

impl std::fmt::Display for StoppedSending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the client shut its side of the connection before sending the whole body")
    }
}

impl std::error::Error for StoppedSending {}

/// An incoming body that tells its connection how it arrives.
pub(super) struct ReceivedBody {
    body: Incoming,
    connection: Arc<Connection>,
    ended: bool,
}

impl ReceivedBody {
    pub(super) fn new(body: Incoming, connection: Arc<Connection>) -> Self {
        Self {
            body,
            connection,
            ended: false,
        }
    }

    fn end(&mut self) {
        if !self.ended {
            self.ended = true;
            self.connection.body_ended();
        }
    }
}

impl Body for ReceivedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.ended {
            return Pin::new(&mut this.body).poll_frame(cx).map_err(Into::into);
        }
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.connection
                    .body_received(frame.data_ref().map_or(0, Bytes::len));
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(other) => {
                this.end();
                Poll::Ready(other.map(|frame| frame.map_err(Into::into)))
            }
            Poll::Pending => {
                // Its clock starts when it is first waited for, not while its handler queues.
                this.connection.body_received(0);
                if this.connection.has_stopped_sending(cx.waker()) {
                    this.end();
                    return Poll::Ready(Some(Err(Box::new(StoppedSending))));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for ReceivedBody {
    fn drop(&mut self) {
        self.end();
    }
}
