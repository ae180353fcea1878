//! One HTTP/1.1 connection to a process, driven by the launcher's own client: the request head
//! and body written straight to the socket (head and a body in hand in one `writev`), the
//! response head parsed from the connection's read buffer (`response_head`), and the body read
//! by the request's own task as the client takes it ([`UpstreamBody`]), which hands the
//! connection back to its pool (`Home`) when the body has ended and the connection may carry
//! another request.
//!
//! Why not hyper's client here: it drives each connection in a task of its own, reached through
//! a channel and a oneshot per request, and builds its response in its dispatcher; that was
//! about a third of the launcher's instructions per forwarded request. Here one request has the
//! connection to itself (the pool hands it out whole), so no task, channel or lock is needed
//! between the request and its connection.

use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::{Bytes, BytesMut};
use http::Method;
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use super::chunked::{Chunked, Step};
use super::outgoing::OutgoingBody;
use super::request_head::{chunk_line, encode, frame_request, BodyFraming};
use super::response_head::{parse, Framing, Head, HeadError};
use super::upstream_error::UpstreamError;

/// The first read buffer of a connection, and the size of its first read (hyper's).
const FIRST_READ: usize = 8 * 1024;

/// The largest read from a process's connection (hyper's default is about 400 KB). Each frame of
/// a response is a slice of one read, and a slice waiting for a client that doesn't read keeps
/// that whole read alive: a streamed response held one to three of them. 24 clients that never
/// read cost 14 MB more on an idle machine with hyper's reads and up to 48 MB more on a busy one,
/// outside `bufferMaxMB`. 64 KB reads cost a large response no measurable speed; the cap is also
/// the largest response head a process may send.
pub const UPSTREAM_READ_AT_MOST: usize = 64 << 10;

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
    read: BytesMut,
    /// How much the next read asks for: doubled while reads fill it, up to the cap.
    next_read: usize,
    /// The request head being written (kept: no allocation per request).
    head: Vec<u8>,
    /// The process answered (or closed) while the request body was still going out: the final
    /// head if it was whole by then (the next `read_head` gives it), and the request is cut
    /// short there, so the connection is never reused.
    early: Option<Result<Head, HeadError>>,
    cut_short: bool,
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
            early: None,
            cut_short: false,
            odd_framing: false,
            heard: 0,
            reused: false,
            generation,
            idle_since: Instant::now(),
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
        let mut buf = ReadBuf::new(&mut probe);
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
        self.head.clear();
        encode(parts, &mut self.head);
        let whole = match framing {
            BodyFraming::None => Some(Bytes::new()),
            _ => body.whole(),
        };
        let Some(data) = whole else {
            self.write_all([&[], &[]], true, None).await?;
            return self.stream_body(framing, body, &parts.method).await;
        };
        let tail: &[u8] = match framing {
            BodyFraming::Length(n) if n != data.len() as u64 => {
                return Err(WriteError::Sent(UpstreamError::BodyLength))
            }
            BodyFraming::Chunked if data.is_empty() => b"0\r\n\r\n",
            BodyFraming::Chunked => {
                chunk_line(data.len(), &mut self.head);
                b"\r\n0\r\n\r\n"
            }
            _ => b"",
        };
        self.write_all([&data, tail], true, None).await.map(drop)
    }

    /// The body as it comes, after the head. While waiting for the client's next bytes or for
    /// the process to take them, the connection is watched: a process that answers first (a
    /// `413`, a `401`) or closes ends the sending there, as hyper's client did, so its answer
    /// is passed on at once instead of after a body it may never read (then the upstream
    /// timeout's `504`).
    async fn stream_body<B: OutgoingBody>(
        &mut self,
        framing: BodyFraming,
        body: &mut B,
        method: &Method,
    ) -> Result<(), WriteError> {
        let mut sent = 0u64;
        loop {
            let next = poll_fn(|cx| {
                if self.poll_answered(cx, method).is_ready() {
                    return Poll::Ready(None);
                }
                Pin::new(&mut *body).poll_frame(cx).map(Some)
            })
            .await;
            let Some(frame) = next else {
                self.cut_short = true;
                return Ok(());
            };
            let Some(frame) = frame else {
                break;
            };
            let frame = frame.map_err(|e| WriteError::Sent(UpstreamError::ClientBody(e.into())))?;
            let Ok(data) = frame.into_data() else {
                continue; // trailers are not passed on
            };
            sent += data.len() as u64;
            self.head.clear();
            let tail: &[u8] = match framing {
                BodyFraming::Length(n) if sent > n => {
                    return Err(WriteError::Sent(UpstreamError::BodyLength))
                }
                BodyFraming::Chunked if !data.is_empty() => {
                    chunk_line(data.len(), &mut self.head);
                    b"\r\n"
                }
                _ => b"",
            };
            if self.write_all([&data, tail], false, Some(method)).await? == Wrote::Answered {
                self.cut_short = true;
                return Ok(());
            }
        }
        match framing {
            BodyFraming::Length(n) if sent != n => Err(WriteError::Sent(UpstreamError::BodyLength)),
            BodyFraming::Chunked => {
                self.head.clear();
                self.head.extend_from_slice(b"0\r\n\r\n");
                if self.write_all([&[], &[]], false, Some(method)).await? == Wrote::Answered {
                    self.cut_short = true;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Whether the process has answered (a final head whole, or one that cannot be), closed,
    /// or failed, while the request is still being sent. Interim `1xx` heads are skipped, and a
    /// head still arriving is kept for `read_head`.
    fn poll_answered(&mut self, cx: &mut Context<'_>, method: &Method) -> Poll<()> {
        loop {
            if self.early.is_some() || self.read.len() >= UPSTREAM_READ_AT_MOST {
                return Poll::Ready(());
            }
            match ready!(self.poll_fill(cx)) {
                Ok(0) | Err(_) => return Poll::Ready(()),
                Ok(_) => match parse(&mut self.read, method) {
                    Ok(None) => {}
                    Ok(Some(head)) => self.early = Some(Ok(head)),
                    Err(e) => self.early = Some(Err(e)),
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
        let mut all = [
            IoSlice::new(&head),
            IoSlice::new(rest[0]),
            IoSlice::new(rest[1]),
        ];
        let mut left = head.len() + rest[0].len() + rest[1].len();
        let mut bufs: &mut [IoSlice<'_>] = &mut all;
        let mut wrote_any = false;
        let result = loop {
            if left == 0 {
                break Ok(Wrote::All);
            }
            let wrote = poll_fn(|cx| {
                if let Poll::Ready(r) = Pin::new(&mut self.io).poll_write_vectored(cx, bufs) {
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
        if let Some(early) = self.early.take() {
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
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let want = self.next_read;
        self.read.reserve(want);
        let spare = &mut self.read.spare_capacity_mut()[..want];
        let mut buf = ReadBuf::uninit(spare);
        ready!(Pin::new(&mut self.io).poll_read(cx, &mut buf))?;
        let n = buf.filled().len();
        self.heard += n as u64;
        // SAFETY: `ReadBuf` guarantees its first `n` bytes, the spare capacity's, were written.
        unsafe { self.read.set_len(self.read.len() + n) };
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
        let state = match head.framing {
            Framing::Empty => State::Length(0),
            Framing::Length(n) => State::Length(n),
            Framing::Chunked => State::Chunked(Chunked::default()),
            Framing::ToClose => State::ToClose,
        };
        let mut body = UpstreamBody {
            // A request cut short left the process mid-message: never reused.
            keep_alive: head.keep_alive && !self.cut_short,
            conn: Some(self),
            state,
            home,
        };
        if head.framing == Framing::Empty {
            // hyper never polls a body at its end: the connection is free now.
            body.finish(true);
        }
        http::Response::from_parts(head.parts, body)
    }
}

#[derive(Debug)]
enum State {
    /// Bytes of the body still to come.
    Length(u64),
    Chunked(Chunked),
    ToClose,
}

/// A process's response body, read from its connection as it is polled. Dropped before its end,
/// it closes the connection, which ends the request on the process (STREAM-6).
pub struct UpstreamBody<IO = tokio::net::TcpStream> {
    /// `None` once the body has ended. Boxed (from its making): the body stays small, and the
    /// connection moves between pool and body as a pointer.
    conn: Option<Box<UpstreamConn<IO>>>,
    state: State,
    keep_alive: bool,
    home: Option<Arc<dyn Home<IO>>>,
}

impl<IO> UpstreamBody<IO> {
    /// The body has ended: the connection goes home if the response allowed it, was read to its
    /// end and nothing followed it; otherwise it is closed. Bytes past the end of a body read
    /// whole are the process's stray writes: its pool is told.
    fn finish(&mut self, complete: bool) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        if complete && !conn.read.is_empty() {
            if let Some(home) = &self.home {
                home.stray();
            }
            return;
        }
        if complete && self.keep_alive {
            if let Some(home) = &self.home {
                conn.reused = true;
                home.take_back(conn);
            }
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> Body for UpstreamBody<IO> {
    type Data = Bytes;
    type Error = UpstreamError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, UpstreamError>>> {
        let this = self.get_mut();
        loop {
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            if !conn.read.is_empty() {
                let data = match &mut this.state {
                    State::Length(left) => {
                        let n = conn
                            .read
                            .len()
                            .min(usize::try_from(*left).unwrap_or(usize::MAX));
                        *left -= n as u64;
                        let data = conn.read.split_to(n).freeze();
                        if *left == 0 {
                            this.finish(true);
                        }
                        Some(data)
                    }
                    State::Chunked(dec) => match dec.step(&mut conn.read) {
                        Ok(Step::Data(d)) => Some(d),
                        Ok(Step::End) => {
                            this.finish(true);
                            return Poll::Ready(None);
                        }
                        Ok(Step::NeedMore) => None,
                        Err(e) => {
                            this.finish(false);
                            return Poll::Ready(Some(Err(UpstreamError::Chunk(e))));
                        }
                    },
                    State::ToClose => Some(conn.read.split().freeze()),
                };
                if let Some(data) = data {
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
            }
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            match ready!(conn.poll_fill(cx)) {
                Ok(0) if matches!(this.state, State::ToClose) => {
                    this.finish(false);
                    return Poll::Ready(None);
                }
                Ok(0) => {
                    this.finish(false);
                    return Poll::Ready(Some(Err(UpstreamError::Closed)));
                }
                Ok(_) => {}
                Err(e) => {
                    this.finish(false);
                    return Poll::Ready(Some(Err(UpstreamError::Io(e))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.conn.is_none() || matches!(self.state, State::Length(0))
    }

    fn size_hint(&self) -> SizeHint {
        match (&self.conn, &self.state) {
            (None, _) => SizeHint::with_exact(0),
            (_, State::Length(n)) => SizeHint::with_exact(*n),
            _ => SizeHint::default(),
        }
    }
}

impl<IO> std::fmt::Debug for UpstreamBody<IO> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamBody")
            .field("state", &self.state)
            .field("open", &self.conn.is_some())
            .finish()
    }
}

#[cfg(test)]
#[path = "upstream_conn_tests.rs"]
mod tests;
