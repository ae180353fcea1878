//! The client's stream as hyper sees it: first the bytes read before a park (or by the lobby)
//! and not parsed yet, then the socket; each write's outcome told to `Activity`; and each
//! request's head checked before hyper reads it (`framing`), so that a head hyper would refuse
//! with a bare `400` of its own is kept back, and the connection goes to the lobby once hyper is
//! idle (its earlier answers written), where the launcher answers it itself.
//!
//! Bytes are passed on as read, straight into hyper's buffer, except a head not yet whole (kept
//! here until it is, up to `max_head`: hyper would hold it as long) and what follows a head that
//! is refused.
//!
//! The client's end of sending after whole requests, while one is in progress, is a half-close
//! (`shutdown(SHUT_WR)`, as `nc -N` and some health checkers send a request): hyper is told of
//! the end only once the answers are written (then it closes), or after [`HALF_CLOSE_GRACE`].
//! hyper, told at once, takes it for a hang-up and drops the request unanswered; its own
//! `half_close` would never notice a client that has gone, whose request then holds its slot
//! at a process until it ends. A half-close and a close look the same until something is
//! written, so the grace bounds what a client that has gone can hold.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::framing::{Framer, Step};
use super::park::Activity;

/// Bytes read at a time while a head is not whole.
const CHUNK: usize = 8192;

/// How long a client's half-close keeps its requests in progress before it is taken for a
/// hang-up (which ends them): longer than a health checker waits for a quick answer (a second,
/// Kubernetes' default), short enough that a client that has gone frees its slot soon.
pub const HALF_CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Writes of several slices (an answer's head and its body, answers one after another) up to
/// this many bytes in all are copied into one and go out with one `send`: a small `writev`
/// costs the kernel more than copying its slices does (DEC-66). Larger writes stay vectored
/// (the copy would grow with them, the saving not).
const GATHER_AT_MOST: usize = 4096;

thread_local! {
    /// The copy's room: one per thread, not per connection (an idle connection holds none).
    static GATHER: std::cell::RefCell<Vec<u8>> =
        std::cell::RefCell::new(Vec::with_capacity(GATHER_AT_MOST));
}

/// Writes `bufs` copied into one slice (at most [`GATHER_AT_MOST`] bytes in all).
fn poll_gathered<W: AsyncWrite>(
    inner: Pin<&mut W>,
    cx: &mut Context<'_>,
    bufs: &[io::IoSlice<'_>],
) -> Poll<io::Result<usize>> {
    GATHER.with(|room| match room.try_borrow_mut() {
        Ok(mut flat) => {
            flat.clear();
            for b in bufs {
                flat.extend_from_slice(b);
            }
            inner.poll_write(cx, &flat)
        }
        // Not expected (nothing writes from inside a write): the slices as they are.
        Err(_) => inner.poll_write_vectored(cx, bufs),
    })
}

pub struct ParkIo<T> {
    inner: T,
    /// Read and not yet given to hyper: the first `cleared` bytes may be; the rest, from a head
    /// boundary, wait for `framer`.
    held: BytesMut,
    cleared: usize,
    framer: Framer,
    /// A head was refused: nothing more is given to hyper.
    refused: bool,
    /// What is held was read with bytes given to hyper before it (the client sent it without
    /// waiting for an answer).
    leftover: bool,
    /// The client half-closed after whole requests, one in progress: its end is told to hyper
    /// once none is, or when this fires. Boxed: only a half-closed connection has one.
    half_closed: Option<Pin<Box<tokio::time::Sleep>>>,
    activity: Arc<Activity>,
}

impl<T> ParkIo<T> {
    /// `prefix` begins at a request's head; heads over `max_head` are refused.
    pub fn new(inner: T, prefix: Bytes, activity: Arc<Activity>, max_head: usize) -> ParkIo<T> {
        ParkIo {
            inner,
            held: BytesMut::from(&prefix[..]),
            cleared: 0,
            framer: Framer::new(max_head),
            refused: false,
            leftover: false,
            half_closed: None,
            activity,
        }
    }

    /// The stream and the bytes hyper was not given (empty unless hyper stopped before reading
    /// them, or a head was kept back).
    pub fn into_inner(self) -> (T, Bytes) {
        (self.inner, self.held.freeze())
    }

    fn wrote<R>(&self, polled: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        self.activity.wrote(polled.is_pending());
        polled
    }

    /// As `wrote`, for a write that reports its bytes.
    fn wrote_bytes(&self, polled: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        if let Poll::Ready(Ok(n)) = polled {
            self.activity.wrote_bytes(n);
        }
        self.wrote(polled)
    }

    fn refuse(&mut self) -> Poll<io::Result<()>> {
        self.refused = true;
        self.activity.refuse();
        // No waker is kept: hyper goes on writing its earlier answers, and the connection's loop
        // looks at `Activity` each time hyper is done for now.
        Poll::Pending
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for ParkIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if let Some(grace) = &mut this.half_closed {
                // The end, once the answers are written or the grace is over (hyper then ends
                // what is still in progress, as for a hang-up).
                if !this.activity.in_progress() || grace.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Ok(()));
                }
                this.activity.half_closed(cx.waker());
                // Ended meanwhile: its wake may have come before the waker was left.
                if !this.activity.in_progress() {
                    return Poll::Ready(Ok(()));
                }
                return Poll::Pending;
            }
            if this.cleared > 0 {
                let n = this.cleared.min(buf.remaining());
                buf.put_slice(&this.held[..n]);
                this.held.advance(n);
                this.cleared -= n;
                return Poll::Ready(Ok(()));
            }
            if this.refused {
                return Poll::Pending;
            }
            if !this.held.is_empty() {
                let head = this.framer.at_head();
                match this.framer.step(&this.held) {
                    Step::Pass(n) => {
                        if head {
                            // Read with the bytes before it, or with more than its body behind
                            // it: sent without waiting for an answer.
                            let behind = (this.held.len() - n) as u64;
                            let pipelined = this.leftover || behind > this.framer.body_left();
                            this.activity.head_passed(pipelined);
                        }
                        this.leftover = this.held.len() > n;
                        this.cleared = n;
                        continue;
                    }
                    Step::Refuse => return this.refuse(),
                    Step::Wait => {}
                }
                // A head not whole: more of it, kept here.
                let mut chunk = [0u8; CHUNK];
                let mut more = ReadBuf::new(&mut chunk);
                ready!(Pin::new(&mut this.inner).poll_read(cx, &mut more))?;
                if more.filled().is_empty() {
                    // The client closed mid-head: hyper gets it as sent, then the end.
                    this.cleared = this.held.len();
                    if this.cleared == 0 {
                        return Poll::Ready(Ok(()));
                    }
                    this.framer = Framer::done();
                    continue;
                }
                this.held.extend_from_slice(more.filled());
                continue;
            }
            // Nothing held: straight into hyper's buffer, and what may not go taken back out.
            let before = buf.filled().len();
            ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
            let got = &buf.filled()[before..];
            if got.is_empty() {
                let whole = this.framer.at_head() || this.framer.is_done();
                if whole && this.activity.in_progress() {
                    // Whole requests (or the last one hyper reads, `Connection: close`), then
                    // the end of sending: a half-close (see the notes).
                    let grace = tokio::time::sleep(HALF_CLOSE_GRACE);
                    this.half_closed = Some(Box::pin(grace));
                    continue;
                }
                return Poll::Ready(Ok(()));
            }
            let head = this.framer.at_head();
            let step = this.framer.step(got);
            if let (true, Step::Pass(n)) = (head, step) {
                let behind = (got.len() - n) as u64;
                this.activity.head_passed(behind > this.framer.body_left());
            }
            let keep = match step {
                Step::Pass(n) => n,
                Step::Wait | Step::Refuse => 0,
            };
            if keep < got.len() {
                this.held.extend_from_slice(&got[keep..]);
                buf.set_filled(before + keep);
                this.leftover = keep > 0;
            }
            match step {
                Step::Pass(_) => return Poll::Ready(Ok(())),
                Step::Refuse => return this.refuse(),
                Step::Wait => {}
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ParkIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.wrote_bytes(polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let inner = Pin::new(&mut this.inner);
        let polled = match bufs {
            // A head alone (no body) is one slice: `send`, which costs the kernel less than a
            // `writev` of one (no vector to copy in, no file-layer checks).
            [one] => inner.poll_write(cx, one),
            _ if bufs.iter().map(|b| b.len()).sum::<usize>() <= GATHER_AT_MOST => {
                poll_gathered(inner, cx, bufs)
            }
            _ => inner.poll_write_vectored(cx, bufs),
        };
        this.wrote_bytes(polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_flush(cx);
        this.wrote(polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::time::Instant;

    /// A writer taking at most `take` bytes a call, recording each call's kind and bytes.
    struct Taker {
        take: usize,
        calls: Vec<(&'static str, Vec<u8>)>,
    }

    impl AsyncWrite for Taker {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let n = buf.len().min(self.take);
            self.get_mut().calls.push(("write", buf[..n].to_vec()));
            Poll::Ready(Ok(n))
        }

        fn poll_write_vectored(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[io::IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let mut all: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            all.truncate(self.take);
            let n = all.len();
            self.get_mut().calls.push(("writev", all));
            Poll::Ready(Ok(n))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn small_writes_of_several_slices_go_out_as_one_and_large_ones_stay_vectored() {
        // spec: DEC-66
        let a = Arc::new(Activity::new(Instant::now()));
        let taker = Taker {
            take: 100,
            calls: Vec::new(),
        };
        let mut io = ParkIo::new(taker, Bytes::new(), a, 8192);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let head = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n";
        let bufs = [io::IoSlice::new(head), io::IoSlice::new(b"hello")];
        // The writer takes 100 bytes at most: all of these, in one plain write.
        let wrote = Pin::new(&mut io).poll_write_vectored(&mut cx, &bufs);
        assert!(matches!(wrote, Poll::Ready(Ok(n)) if n == head.len() + 5));
        let big = vec![b'x'; GATHER_AT_MOST];
        let bufs = [io::IoSlice::new(head), io::IoSlice::new(&big)];
        // Over the bound: vectored, and a partial write counts what was taken.
        let wrote = Pin::new(&mut io).poll_write_vectored(&mut cx, &bufs);
        assert!(matches!(wrote, Poll::Ready(Ok(100))));
        let (taker, _) = io.into_inner();
        let mut whole = head.to_vec();
        whole.extend_from_slice(b"hello");
        assert_eq!(taker.calls[0], ("write", whole));
        assert_eq!(taker.calls[1].0, "writev");
        assert_eq!(&taker.calls[1].1[..head.len()], &head[..]);
        assert_eq!(taker.calls.len(), 2);
    }

    #[tokio::test]
    async fn the_prefix_is_read_before_the_stream() -> io::Result<()> {
        let (mut client, server) = tokio::io::duplex(64);
        client.write_all(b"Host: a\r\n\r\n").await?;
        drop(client);
        let a = Arc::new(Activity::new(Instant::now()));
        let mut io = ParkIo::new(server, Bytes::from_static(b"GET / HTTP/1.1\r\n"), a, 8192);
        let mut small = [0u8; 3];
        io.read_exact(&mut small).await?;
        assert_eq!(&small, b"GET");
        let mut rest = Vec::new();
        io.read_to_end(&mut rest).await?;
        assert_eq!(rest, b" / HTTP/1.1\r\nHost: a\r\n\r\n");
        Ok(())
    }

    #[tokio::test]
    async fn a_head_hyper_would_refuse_is_kept_back_and_given_back() -> io::Result<()> {
        // spec: DEC-38
        let (mut client, server) = tokio::io::duplex(4096);
        let good = b"GET /a HTTP/1.1\r\nHost: a\r\n\r\n";
        let bad = b"GET /a?q=\"x\" HTTP/1.1\r\nHost: a\r\n\r\n";
        client.write_all(good).await?;
        client.write_all(bad).await?;
        let a = Arc::new(Activity::new(Instant::now()));
        let mut io = ParkIo::new(server, Bytes::new(), a.clone(), 8192);
        let mut got = vec![0u8; good.len()];
        io.read_exact(&mut got).await?;
        assert_eq!(got, good);
        let mut more = [0u8; 16];
        let next = tokio::time::timeout(std::time::Duration::from_millis(50), io.read(&mut more));
        assert!(next.await.is_err(), "hyper is given nothing more");
        assert!(a.refused());
        let (_, rest) = io.into_inner();
        assert_eq!(&rest[..], &bad[..]);
        Ok(())
    }
}
