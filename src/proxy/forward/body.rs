//! Response bodies: one type for proxied and own answers, and the two ways a process's response
//! is passed on.
//!
//! * [`buffered`] (tx responses): the body is read from the process as fast as it comes and held
//!   here, so the process's slot frees when its response has ended, not when the client has read
//!   it (STREAM-1, STREAM-2). What is held counts against the budget (`proxy::budget`) until
//!   hyper has written it; one the budget has no room for is streamed instead, after whatever
//!   was read ([`Buffered::Streaming`]).
//! * [`streamed`] (anything else, e.g. a package download): frames go on only as fast as the
//!   client takes them (STREAM-3), and a callback says when the body ended, failed or was dropped
//!   (the client went away, or its connection was closed by the write timeout), so the caller can
//!   free the slot and log exactly once.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Response;
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;

use super::error::ForwardError;
use super::headers::prepare_response;
use super::upstream_conn::UpstreamBody;
use super::BoxError;
use crate::proxy::budget::{Budget, Lease};

/// The body of every response the listener gives: a process's (held or streamed) or its own.
/// Boxed so both kinds are one type; size hints pass through, so hyper still sends a
/// `Content-Length` when the length is known.
pub type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;

/// A whole body of bytes (the launcher's own answers).
pub fn full(bytes: impl Into<Bytes>) -> ProxyBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// An empty body (the tests' stand-in for a response body).
#[cfg(test)]
pub fn empty() -> ProxyBody {
    http_body_util::Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A process's response read ahead of the client, or as much of it as the budget had room for.
pub enum Buffered {
    /// Read whole: the process is done with the request (STREAM-1).
    Whole(Response<ProxyBody>),
    /// The budget was full: what was read, then the rest as the client takes it (pass it to
    /// [`streamed`]; the process is done only when the body ends).
    Streaming(Response<Prefixed<UpstreamBody>>),
}

/// Bytes held for a client, counted against the budget until the last reference to them is
/// dropped (hyper may keep them queued after the body itself is gone).
struct HeldBytes {
    data: Vec<u8>,
    _lease: Lease,
}

impl AsRef<[u8]> for HeldBytes {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

fn held(data: Vec<u8>, lease: Lease) -> Bytes {
    Bytes::from_owner(HeldBytes {
        data,
        _lease: lease,
    })
}

/// A process may announce any length: the first allocation is no larger than this.
const FIRST_ALLOCATION_AT_MOST: u64 = 1 << 20;

/// Reads a process's response body as fast as it arrives while the budget has room, strips the
/// hop-by-hop headers, and returns it ready to hand to the client. Whole, the process is done
/// with the request: the caller frees its slot then (STREAM-1). Trailers are dropped.
pub async fn buffered(
    resp: Response<UpstreamBody>,
    budget: &Arc<Budget>,
) -> Result<Buffered, ForwardError> {
    let (mut parts, mut body) = resp.into_parts();
    prepare_response(&mut parts);
    let exact = body.size_hint().exact();
    let mut lease = Lease::none(budget);
    let streaming = |parts: http::response::Parts, ahead: Option<Bytes>, rest: UpstreamBody| {
        budget.responses_streamed.fetch_add(1, Ordering::Relaxed);
        Ok(Buffered::Streaming(Response::from_parts(
            parts,
            Prefixed { ahead, rest },
        )))
    };
    if exact.is_some_and(|n| !lease.try_grow(n)) {
        return streaming(parts, None, body);
    }
    let mut data = Vec::with_capacity(exact.unwrap_or(0).min(FIRST_ALLOCATION_AT_MOST) as usize);
    while let Some(frame) = body.frame().await {
        let Ok(chunk) = frame.map_err(ForwardError::Body)?.into_data() else {
            continue;
        };
        let room = exact.is_some() || lease.try_grow(chunk.len() as u64);
        data.extend_from_slice(&chunk);
        if !room {
            return streaming(parts, Some(held(data, lease)), body);
        }
        // The last of a `Content-Length` body: done (its connection already back in the pool),
        // without one more poll to hear that nothing follows.
        if body.is_end_stream() {
            break;
        }
    }
    Ok(Buffered::Whole(Response::from_parts(
        parts,
        full(held(data, lease)),
    )))
}

pin_project_lite::pin_project! {
    /// Bytes already read, then the rest of the body.
    pub struct Prefixed<B> {
        ahead: Option<Bytes>,
        #[pin]
        rest: B,
    }
}

impl<B: Body<Data = Bytes>> Body for Prefixed<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        if let Some(bytes) = this.ahead.take() {
            return Poll::Ready(Some(Ok(Frame::data(bytes))));
        }
        this.rest.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.ahead.is_none() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let ahead = self.ahead.as_ref().map_or(0, |b| b.len() as u64);
        let rest = self.rest.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower() + ahead);
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + ahead);
        }
        hint
    }
}

/// Passes a process's response on frame by frame, only as fast as the client takes it (STREAM-3),
/// with hop-by-hop headers stripped. `on_end` runs exactly once, when the body ends, fails, or is
/// dropped unfinished; dropping it closes the upstream connection, which ends the request on the
/// process (STREAM-6).
pub fn streamed<B, F>(resp: Response<B>, on_end: F) -> Response<ProxyBody>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
    F: FnOnce(BodyEnd) + Send + 'static,
{
    let (mut parts, body) = resp.into_parts();
    prepare_response(&mut parts);
    Response::from_parts(parts, NotifyOnEnd::new(body, on_end).boxed_unsync())
}

/// How a watched body finished, and how many data bytes went through it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyEnd {
    pub how: EndKind,
    pub bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndKind {
    /// Every frame was passed on.
    Complete,
    /// The inner body (the process's response) failed.
    Failed,
    /// Dropped before the end: the client went away or its connection was closed.
    Dropped,
}

type OnEnd = Box<dyn FnOnce(BodyEnd) + Send>;

pin_project_lite::pin_project! {
    /// A body that calls back once when it is finished with, whichever way.
    pub struct NotifyOnEnd<B> {
        #[pin]
        inner: B,
        watch: Watch,
    }
}

/// The callback and what it will be told; fires on drop if nothing fired it before.
struct Watch {
    on_end: Option<OnEnd>,
    bytes: u64,
    /// The body was at its end when handed over, so hyper may never poll it.
    at_end: bool,
}

impl Watch {
    fn fire(&mut self, how: EndKind) {
        if let Some(f) = self.on_end.take() {
            f(BodyEnd {
                how,
                bytes: self.bytes,
            });
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let how = if self.at_end {
            EndKind::Complete
        } else {
            EndKind::Dropped
        };
        self.fire(how);
    }
}

impl<B: Body> NotifyOnEnd<B> {
    pub fn new<F>(inner: B, on_end: F) -> NotifyOnEnd<B>
    where
        F: FnOnce(BodyEnd) + Send + 'static,
    {
        // hyper does not poll a body that says it is at its end (an empty body, a HEAD response).
        let at_end = inner.is_end_stream();
        NotifyOnEnd {
            inner,
            watch: Watch {
                on_end: Some(Box::new(on_end)),
                bytes: 0,
                at_end,
            },
        }
    }
}

impl<B> Body for NotifyOnEnd<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let mut this = self.project();
        match this.inner.as_mut().poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                this.watch.fire(EndKind::Complete);
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                this.watch.fire(EndKind::Failed);
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.watch.bytes += data.len() as u64;
                }
                // hyper stops polling once a body says it is at its end.
                if this.inner.is_end_stream() {
                    this.watch.fire(EndKind::Complete);
                }
                Poll::Ready(Some(Ok(frame)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Empty;
    use std::sync::{Arc, Mutex};

    type Ends = Arc<Mutex<Vec<BodyEnd>>>;

    fn recorder() -> (Ends, impl FnOnce(BodyEnd) + Send + 'static) {
        let ends: Ends = Arc::default();
        let e = Arc::clone(&ends);
        (ends, move |end| e.lock().unwrap().push(end))
    }

    /// `left` frames of 4 bytes, then the end, with no size hint (like a chunked response).
    struct Chunks {
        left: usize,
        fail_at_end: bool,
    }

    impl Body for Chunks {
        type Data = Bytes;
        type Error = BoxError;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            if self.left == 0 {
                if self.fail_at_end {
                    return Poll::Ready(Some(Err("upstream reset".into())));
                }
                return Poll::Ready(None);
            }
            self.left -= 1;
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"abcd")))))
        }
    }

    fn chunks(left: usize) -> Chunks {
        Chunks {
            left,
            fail_at_end: false,
        }
    }

    fn end(how: EndKind, bytes: u64) -> BodyEnd {
        BodyEnd { how, bytes }
    }

    #[tokio::test]
    async fn end_callback_fires_once_on_completion() {
        let (ends, f) = recorder();
        let body = NotifyOnEnd::new(chunks(3), f);
        let got = body.collect().await.unwrap().to_bytes();
        assert_eq!(got.len(), 12);
        assert_eq!(*ends.lock().unwrap(), [end(EndKind::Complete, 12)]);
    }

    #[tokio::test]
    async fn end_callback_fires_once_when_the_body_says_it_is_at_its_end() {
        // hyper stops polling a body whose is_end_stream() is true, then drops it.
        let (ends, f) = recorder();
        let mut body = NotifyOnEnd::new(Full::new(Bytes::from_static(b"hello")), f);
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "hello");
        assert!(body.is_end_stream());
        drop(body);
        assert_eq!(*ends.lock().unwrap(), [end(EndKind::Complete, 5)]);

        // Never polled at all (a HEAD response, an empty body).
        let (ends, f) = recorder();
        drop(NotifyOnEnd::new(Empty::<Bytes>::new(), f));
        assert_eq!(*ends.lock().unwrap(), [end(EndKind::Complete, 0)]);
    }

    #[tokio::test]
    async fn end_callback_fires_once_when_dropped_early() {
        let (ends, f) = recorder();
        let mut body = NotifyOnEnd::new(chunks(5), f);
        let _ = body.frame().await;
        let _ = body.frame().await;
        assert!(ends.lock().unwrap().is_empty(), "fired before the end");
        drop(body);
        assert_eq!(*ends.lock().unwrap(), [end(EndKind::Dropped, 8)]);
    }

    #[tokio::test]
    async fn end_callback_fires_once_on_failure() {
        let (ends, f) = recorder();
        let body = NotifyOnEnd::new(
            Chunks {
                left: 1,
                fail_at_end: true,
            },
            f,
        );
        assert!(body.collect().await.is_err());
        assert_eq!(*ends.lock().unwrap(), [end(EndKind::Failed, 4)]);
    }

    #[tokio::test]
    async fn own_bodies_keep_their_length_for_content_length() {
        assert_eq!(full("abc").size_hint().exact(), Some(3));
        assert_eq!(empty().size_hint().exact(), Some(0));
        assert!(empty().is_end_stream());
    }
}
