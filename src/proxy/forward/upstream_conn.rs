//! One HTTP/1.1 connection to a process, driven by the launcher's own client on the codec of
//! `proxy::http1`: the request head and body written straight to the socket (head and a body in
//! hand in one `writev`, framed by the codec's `Encoder`), the response head parsed from the
//! connection's read buffer (`http1::response_head`), and the body read by the request's own
//! task as the client takes it ([`UpstreamBody`]: fill, then the codec's `Decoder` steps),
//! which hands the connection back to its pool (`Home`) when the body has ended and the
//! connection may carry another request. Where the exchange is is named ([`Writing`],
//! [`Reading`], as hyper's `proto::h1::conn::State`), not kept in flags.
//!
//! Why not hyper's client here: it drives each connection in a task of its own, reached through
//! a channel and a oneshot per request, and builds its response in its dispatcher, a large part
//! of what the launcher spent forwarding a request. Here one request has the
//! connection to itself (the pool hands it out whole), so no task, channel or lock is needed
//! between the request and its connection.

use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::{Bytes, BytesMut};
use http::Method;
use http_body::Body;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

use super::outgoing::OutgoingBody;
pub use super::upstream_body::UpstreamBody;
use super::upstream_error::UpstreamError;
use crate::proxy::http1::decode::Decoder;
use crate::proxy::http1::encode::{encode, frame_request, BodyFraming, Encoder};
use crate::proxy::http1::response_head::{parse, Head, HeadError};

/// The first read buffer of a connection, and the size of its first read (hyper's).
const FIRST_READ: usize = 8 * 1024;

/// The largest read from a process's connection (hyper's default is about 400 KB). Each frame of
/// a response is a slice of one read, and a slice waiting for a client that doesn't read keeps
/// that whole read alive: a streamed response held one to three of them, so with hyper's reads
/// clients that never read held many megabytes more, outside `bufferMaxMB`. Smaller reads cost
/// a large response no measurable speed; the cap is also
/// the largest response head a process may send (the codec's limit).
pub use crate::proxy::http1::limits::UPSTREAM_READ_AT_MOST;

/// Where a connection goes when its response has ended and it may carry another request.
pub trait Home<IO>: Send + Sync {
    fn take_back(&self, conn: Box<UpstreamConn<IO>>);

    /// The process wrote bytes past the end of a response on one of its connections (a second
    /// response, more than its `Content-Length`, a body after a `204` or a `HEAD`): the pool no
    /// longer trusts its connections with a second request (`idle_check`).
    fn stray(&self) {}
}

/// A connection to a process, between requests or carrying one.
pub struct UpstreamConn<IO> {
    io: IO,
    /// Bytes read and not yet used; empty between requests.
    pub(super) read: BytesMut,
    /// How much the next read asks for: doubled while reads fill it, up to the cap.
    next_read: usize,
    /// The request head being written (kept: no allocation per request).
    head: Vec<u8>,
    pub(super) writing: Writing,
    pub(super) reading: Reading,
    /// The last response's head framed its body in a way hyper accepts for reuse but the pool
    /// does not (`usual_framing`).
    pub odd_framing: bool,
    /// Bytes read since the request began to be written: 0 when the process closed without a
    /// byte of an answer (DEC-33).
    heard: u64,
    /// It has carried a request before (a stale connection, closed by the process while idle,
    /// is only possible then).
    pub reused: bool,
    /// The pool's generation when it was made.
    pub generation: u64,
    pub idle_since: Instant,
    /// Counted among its process's open connections while it lives (`live.rs`).
    pub live: Option<super::live::Live>,
    /// Told of every read that brings bytes: the hang watchdog's sign of life (DEC-82).
    pub(super) hearing: Option<Arc<super::liveness::Liveness>>,
}

/// Where the request being carried is in its sending (hyper's `Writing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Writing {
    /// No request yet: between requests.
    Init,
    /// Its head or body going out.
    Body,
    /// All of it went.
    Done,
    /// The process answered (or closed) while the body was still going out: the sending ended
    /// there, the process is left mid-message, so the connection is never reused.
    CutShort,
}

/// Where the response is in its reading (hyper's `Reading`).
#[derive(Debug)]
pub(super) enum Reading {
    /// Nothing of it taken yet.
    Init,
    /// Its final head, whole (or refused) while the request was still going out: the next
    /// `read_head` gives it.
    Early(Result<Head, HeadError>),
    /// Its body, through the codec's decoder; `keep_alive`: the connection may carry another
    /// request once it has ended.
    Body { decoder: Decoder, keep_alive: bool },
}

/// How a write ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wrote {
    All,
    /// Not all of it: the process answered first (`poll_answered`).
    Answered,
}

/// Why a request could not be written.
#[derive(Debug)]
pub enum WriteError {
    /// Nothing of it reached the connection (a closed connection): the request is intact.
    Unsent(io::Error),
    /// Some of it went, or the client's body failed: it is spent.
    Sent(UpstreamError),
}

impl<IO: AsyncRead + AsyncWrite + Unpin> UpstreamConn<IO> {
    pub fn new(io: IO, generation: u64) -> UpstreamConn<IO> {
        UpstreamConn {
            io,
            read: BytesMut::new(),
            next_read: FIRST_READ,
            head: Vec::new(),
            writing: Writing::Init,
            reading: Reading::Init,
            odd_framing: false,
            heard: 0,
            reused: false,
            generation,
            idle_since: Instant::now(),
            live: None,
            hearing: None,
        }
    }

    /// The socket, for a real look at it between requests (`idle_check::look`).
    pub fn io(&self) -> &IO {
        &self.io
    }

    /// The process sent no byte of an answer to the request being carried (it closed, or the
    /// connection failed, before any).
    pub fn heard_nothing(&self) -> bool {
        self.heard == 0
    }

    /// An idle connection the process has closed (or sent something unasked on), as far as the
    /// reactor knows: a poll with a no-op waker, which sees nothing the reactor has not marked
    /// yet. The pool makes a real check (`idle_check::look`); this is the tests' for any `IO`.
    #[cfg(test)]
    pub fn observed_closed(&mut self) -> bool {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut probe = [0u8; 1];
        let mut buf = tokio::io::ReadBuf::new(&mut probe);
        !matches!(
            Pin::new(&mut self.io).poll_read(&mut cx, &mut buf),
            Poll::Pending
        )
    }

    /// Writes the request: its head and body framed as hyper's client framed them. The body is
    /// not touched unless the head went out whole (so an unsent request can be handed back).
    pub async fn write_request<B: OutgoingBody>(
        &mut self,
        parts: &mut http::request::Parts,
        body: &mut B,
    ) -> Result<(), WriteError> {
        let framing = frame_request(
            &parts.method,
            &mut parts.headers,
            body.is_end_stream(),
            &body.size_hint(),
        );
        self.heard = 0;
        self.writing = Writing::Body;
        self.reading = Reading::Init;
        self.head.clear();
        encode(parts, &mut self.head);
        let mut encoder = Encoder::new(framing);
        let whole = match framing {
            BodyFraming::None => Some(Bytes::new()),
            _ => body.whole(),
        };
        let Some(data) = whole else {
            self.write_all([&[], &[]], true, None).await?;
            return self.stream_body(encoder, body, &parts.method).await;
        };
        let tail = encoder
            .whole(data.len(), &mut self.head)
            .map_err(|_| WriteError::Sent(UpstreamError::BodyLength))?;
        self.write_all([&data, tail], true, None).await?;
        self.writing = Writing::Done;
        Ok(())
    }

    /// The body as it comes, after the head. While waiting for the client's next bytes or for
    /// the process to take them, the connection is watched: a process that answers first (a
    /// `413`, a `401`) or closes ends the sending there, as hyper's client did, so its answer
    /// is passed on at once instead of after a body it may never read (then the upstream
    /// timeout's `504`).
    async fn stream_body<B: OutgoingBody>(
        &mut self,
        mut encoder: Encoder,
        body: &mut B,
        method: &Method,
    ) -> Result<(), WriteError> {
        let length = |_| WriteError::Sent(UpstreamError::BodyLength);
        loop {
            let next = poll_fn(|cx| {
                if self.poll_answered(cx, method).is_ready() {
                    return Poll::Ready(None);
                }
                Pin::new(&mut *body).poll_frame(cx).map(Some)
            })
            .await;
            let Some(frame) = next else {
                self.writing = Writing::CutShort;
                return Ok(());
            };
            let Some(frame) = frame else {
                break;
            };
            let frame = frame.map_err(|e| WriteError::Sent(UpstreamError::ClientBody(e.into())))?;
            let Ok(data) = frame.into_data() else {
                continue; // trailers are not passed on
            };
            self.head.clear();
            let tail = encoder.data(data.len(), &mut self.head).map_err(length)?;
            if self.write_all([&data, tail], false, Some(method)).await? == Wrote::Answered {
                self.writing = Writing::CutShort;
                return Ok(());
            }
        }
        self.head.clear();
        encoder.end(&mut self.head).map_err(length)?;
        if self.write_all([&[], &[]], false, Some(method)).await? == Wrote::Answered {
            self.writing = Writing::CutShort;
            return Ok(());
        }
        self.writing = Writing::Done;
        Ok(())
    }

    /// Whether the process has answered (a final head whole, or one that cannot be), closed,
    /// or failed, while the request is still being sent. Interim `1xx` heads are skipped, and a
    /// head still arriving is kept for `read_head`.
    fn poll_answered(&mut self, cx: &mut Context<'_>, method: &Method) -> Poll<()> {
        loop {
            if matches!(self.reading, Reading::Early(_)) || self.read.len() >= UPSTREAM_READ_AT_MOST
            {
                return Poll::Ready(());
            }
            match ready!(self.poll_fill(cx)) {
                Ok(0) | Err(_) => return Poll::Ready(()),
                Ok(_) => match parse(&mut self.read, method) {
                    Ok(None) => {}
                    Ok(Some(head)) => self.reading = Reading::Early(Ok(head)),
                    Err(e) => self.reading = Reading::Early(Err(e)),
                },
            }
        }
    }

    /// Writes `self.head` then `rest`, in as few system calls as the socket allows. `first`: this
    /// is the request's first write, so a failure before any byte went is `Unsent`. With
    /// `watch`, a write the process does not take gives way to its answer (`poll_answered`).
    async fn write_all(
        &mut self,
        rest: [&[u8]; 2],
        first: bool,
        watch: Option<&Method>,
    ) -> Result<Wrote, WriteError> {
        let head = std::mem::take(&mut self.head);
        // Only the parts with bytes: a request without a body (or a chunk's data alone) is then
        // one slice, written with `send` rather than a `writev` carrying empty entries.
        let mut all = [IoSlice::new(&[]); 3];
        let mut parts = 0;
        for part in [&head[..], rest[0], rest[1]] {
            if !part.is_empty() {
                all[parts] = IoSlice::new(part);
                parts += 1;
            }
        }
        let mut left = head.len() + rest[0].len() + rest[1].len();
        let mut bufs: &mut [IoSlice<'_>] = &mut all[..parts];
        let mut wrote_any = false;
        let result = loop {
            if left == 0 {
                break Ok(Wrote::All);
            }
            let wrote = poll_fn(|cx| {
                if let Poll::Ready(r) = poll_write_slices(Pin::new(&mut self.io), cx, bufs) {
                    return Poll::Ready(Some(r));
                }
                match watch {
                    Some(method) if self.poll_answered(cx, method).is_ready() => Poll::Ready(None),
                    _ => Poll::Pending,
                }
            })
            .await;
            let Some(wrote) = wrote else {
                break Ok(Wrote::Answered);
            };
            match wrote {
                Ok(0) => break Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => {
                    wrote_any = true;
                    left -= n;
                    IoSlice::advance_slices(&mut bufs, n);
                }
                Err(e) => break Err(e),
            }
        };
        self.head = head;
        result.map_err(|e| {
            if first && !wrote_any {
                WriteError::Unsent(e)
            } else {
                WriteError::Sent(UpstreamError::Io(e))
            }
        })
    }

    /// Reads until the final response head to a `method` request is whole (interim `1xx` heads
    /// skipped). `Err` with [`UpstreamError::Closed`] when the process closed the connection
    /// first.
    pub async fn read_head(&mut self, method: &Method) -> Result<Head, UpstreamError> {
        if let Reading::Early(early) = std::mem::replace(&mut self.reading, Reading::Init) {
            return early.map_err(UpstreamError::Head);
        }
        loop {
            if !self.read.is_empty() {
                if let Some(head) = parse(&mut self.read, method).map_err(UpstreamError::Head)? {
                    return Ok(head);
                }
                if self.read.len() >= UPSTREAM_READ_AT_MOST {
                    return Err(UpstreamError::Head(HeadError::TooLarge));
                }
            }
            if poll_fn(|cx| self.poll_fill(cx))
                .await
                .map_err(UpstreamError::Io)?
                == 0
            {
                return Err(UpstreamError::Closed);
            }
        }
    }

    /// Reads what the socket has into the buffer (0: the process closed the connection).
    pub(super) fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let want = self.next_read;
        self.read.reserve(want);
        // Into the spare capacity, at most `want`, without zeroing it (tokio's `read_buf`).
        let mut spare = bytes::BufMut::limit(&mut self.read, want);
        let read = tokio::io::AsyncReadExt::read_buf(&mut self.io, &mut spare);
        let n = ready!(std::future::Future::poll(std::pin::pin!(read), cx))?;
        self.heard += n as u64;
        if n > 0 {
            if let Some(l) = &self.hearing {
                l.heard();
            }
        }
        if n == want {
            self.next_read = (want * 2).min(UPSTREAM_READ_AT_MOST);
        } else if n < want / 4 && want > FIRST_READ {
            self.next_read = want / 2;
        }
        Poll::Ready(Ok(n))
    }

    /// The response to the request just written, its body read from this connection as it is
    /// polled; the connection goes `home` when the body has ended, if it may be reused.
    pub fn respond(
        mut self: Box<Self>,
        head: Head,
        home: Option<Arc<dyn Home<IO>>>,
    ) -> http::Response<UpstreamBody<IO>> {
        self.odd_framing = !super::idle_check::usual_framing(&head);
        let decoder = Decoder::new(head.framing);
        let at_end = decoder.is_end();
        self.reading = Reading::Body {
            decoder,
            // A request cut short left the process mid-message: never reused.
            keep_alive: head.keep_alive && self.writing != Writing::CutShort,
        };
        http::Response::from_parts(head.parts, UpstreamBody::new(self, home, at_end))
    }
}

/// Writes `bufs` (none empty): one slice with `poll_write` (`send`), more with one vectored
/// write. `writev` costs the kernel more than `send` for the same bytes (the vector copied in,
/// the file layer's checks), and a request without a body is most of what goes upstream.
fn poll_write_slices<W: AsyncWrite + ?Sized>(
    io: Pin<&mut W>,
    cx: &mut Context<'_>,
    bufs: &[IoSlice<'_>],
) -> Poll<io::Result<usize>> {
    match bufs {
        [one] => io.poll_write(cx, one),
        _ => io.poll_write_vectored(cx, bufs),
    }
}

#[cfg(test)]
#[path = "upstream_conn_tests.rs"]
mod tests;
