//! A client's request body on its way to a process: read ahead before admission when it is small
//! (so a slow client holds no process's slot while it sends), passed on as it arrives otherwise,
//! and in both cases telling the listener whether the client has sent all of it.
//!
//! Why the telling: a body the client is still sending when the request ends is the client's
//! business twice over. The launcher's answer must then say `Connection: close` (hyper stops
//! reading a body nobody reads and closes the connection; unannounced, the client's next request
//! on it fails), and a process that could not answer in time because the body never came is not
//! to blame for it (`408`, not a `504` against the process).
//!
//! Read ahead: a body of up to `AHEAD_AT_MOST` bytes is read whole, within the header timeout,
//! if the budget (`proxy::budget`) has room; a chunked one up to that many bytes, the rest passed
//! on after them. A chunked body stays chunked on the way to the process (EDGE-4).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::time::Instant;

use crate::proxy::budget::{Budget, Lease};

/// Bytes of a request body read before admission at most (as the lobby reads a whole request).
pub const AHEAD_AT_MOST: usize = 64 * 1024;

/// Whether the client has sent all of its body, shared by the body and the listener.
#[derive(Clone, Debug, Default)]
pub struct Arrival(Arc<AtomicBool>);

impl Arrival {
    pub fn is_complete(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn complete(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The request body as the process is given it.
#[derive(Debug)]
pub struct ClientBody {
    /// Read ahead: the whole body, or its first part.
    ahead: Option<Bytes>,
    /// The rest, still to come from the client (None: read whole).
    rest: Option<Incoming>,
    arrival: Option<Arrival>,
    /// The client sent it without a length: it goes on chunked.
    chunked: bool,
    /// The read-ahead bytes, counted against the budget while held.
    _held: Option<Lease>,
}

/// Why a body could not be read ahead.
#[derive(Debug)]
pub enum AheadError {
    /// The client had not sent it all when the header timeout ran out.
    TimedOut,
    /// The client's body was malformed or cut short.
    Failed(hyper::Error),
}

impl ClientBody {
    /// The client's body as it comes, and whether it has all arrived (None: it had, at once; an
    /// empty body).
    pub fn arriving(body: Incoming) -> (ClientBody, Option<Arrival>) {
        if body.is_end_stream() {
            return (ClientBody::whole(Bytes::new(), false, None), None);
        }
        let arrival = Arrival::default();
        let chunked = body.size_hint().exact().is_none();
        let b = ClientBody {
            ahead: None,
            rest: Some(body),
            arrival: Some(arrival.clone()),
            chunked,
            _held: None,
        };
        (b, Some(arrival))
    }

    fn whole(bytes: Bytes, chunked: bool, held: Option<Lease>) -> ClientBody {
        ClientBody {
            ahead: (!bytes.is_empty()).then_some(bytes),
            rest: None,
            arrival: None,
            chunked,
            _held: held,
        }
    }

    /// Reads the body ahead (see the module's notes) until `deadline`, counting what it holds
    /// against `budget`. A body too large, or one the budget has no room for, is left to come
    /// as it arrives (after whatever was read).
    pub async fn read_ahead(
        mut self,
        budget: &Arc<Budget>,
        deadline: Option<Instant>,
    ) -> Result<ClientBody, AheadError> {
        let Some(mut rest) = self.rest.take() else {
            return Ok(self);
        };
        let exact = rest.size_hint().exact();
        if exact.is_some_and(|n| n > AHEAD_AT_MOST as u64) {
            self.rest = Some(rest);
            return Ok(self);
        }
        let mut held = Lease::none(budget);
        if let Some(n) = exact {
            if !held.try_grow(n) {
                budget.requests_streamed.fetch_add(1, Ordering::Relaxed);
                self.rest = Some(rest);
                return Ok(self);
            }
        }
        let mut data = Vec::with_capacity(exact.unwrap_or(0) as usize);
        while !rest.is_end_stream() {
            let frame = match deadline {
                Some(at) => tokio::time::timeout_at(at, rest.frame())
                    .await
                    .map_err(|_| AheadError::TimedOut)?,
                None => rest.frame().await,
            };
            let Some(frame) = frame else { break };
            let Ok(chunk) = frame.map_err(AheadError::Failed)?.into_data() else {
                continue; // trailers: not passed on
            };
            let room = exact.is_some() || held.try_grow(chunk.len() as u64);
            if !room {
                budget.requests_streamed.fetch_add(1, Ordering::Relaxed);
            }
            data.extend_from_slice(&chunk);
            if !room || data.len() >= AHEAD_AT_MOST {
                // The rest comes as it arrives, after what was read.
                self.ahead = Some(Bytes::from(data));
                self._held = Some(held);
                self.rest = (!rest.is_end_stream()).then_some(rest);
                if self.rest.is_none() {
                    self.arrived();
                }
                return Ok(self);
            }
        }
        self.arrived();
        Ok(ClientBody {
            arrival: self.arrival,
            ..ClientBody::whole(Bytes::from(data), self.chunked, Some(held))
        })
    }

    /// The whole body, if it was read ahead whole (a clone: the body is left as it was).
    pub fn whole_ahead(&self) -> Option<Bytes> {
        if self.rest.is_some() {
            return None;
        }
        Some(self.ahead.clone().unwrap_or_default())
    }

    fn arrived(&self) {
        if let Some(a) = &self.arrival {
            a.complete();
        }
    }
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        if let Some(bytes) = this.ahead.take() {
            return Poll::Ready(Some(Ok(Frame::data(bytes))));
        }
        let Some(rest) = this.rest.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(&mut *rest).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => {
                this.rest = None;
                this.arrived();
            }
            Poll::Ready(Some(Ok(_))) if rest.is_end_stream() => this.arrived(),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.ahead.is_none() && self.rest.as_ref().is_none_or(Incoming::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        let ahead = self.ahead.as_ref().map_or(0, |b| b.len() as u64);
        let rest = self
            .rest
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Incoming::size_hint);
        let mut hint = SizeHint::new();
        hint.set_lower(ahead + rest.lower());
        // A body the client sent chunked has no exact size, so it goes on chunked (EDGE-4).
        if !self.chunked {
            if let Some(upper) = rest.upper() {
                hint.set_upper(ahead + upper);
            }
        }
        hint
    }
}

#[cfg(test)]
#[path = "client_body_tests.rs"]
mod tests;
