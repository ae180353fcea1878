//! The client's stream as hyper sees it: first the bytes read before a park (or by the lobby)
//! and not parsed yet, then the socket, straight into hyper's buffer; each read told to
//! `Activity` (which tells a pipelining client by it) and each write's outcome too.
//!
//! Nothing here reads the bytes: what hyper's parser refuses on a kept-alive connection, hyper
//! answers and closes (`hyper_phase` logs and counts it), and the client's end of sending is
//! told to hyper as it comes, which takes it for a hang-up, as nginx does (DEC-52).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::park::Activity;

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
    /// Read before hyper had the stream and not given to it yet.
    prefix: Bytes,
    activity: Arc<Activity>,
}

impl<T> ParkIo<T> {
    /// `prefix` is read first, then `inner`.
    pub fn new(inner: T, prefix: Bytes, activity: Arc<Activity>) -> ParkIo<T> {
        // Hyper is given the stream once every answer before is written (a new connection, or
        // one that was parked): what was read meanwhile (`prefix`) came after them.
        activity.read();
        ParkIo {
            inner,
            prefix,
            activity,
        }
    }

    /// The stream and the bytes of `prefix` hyper was not given (empty unless hyper stopped
    /// before reading them).
    pub fn into_inner(self) -> (T, Bytes) {
        (self.inner, self.prefix)
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
}

impl<T: AsyncRead + Unpin> AsyncRead for ParkIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.prefix.is_empty() {
            let n = this.prefix.len().min(buf.remaining());
            buf.put_slice(&this.prefix[..n]);
            this.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.activity.read();
        }
        polled
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
        let mut io = ParkIo::new(taker, Bytes::new(), a);
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

    #[test]
    fn a_request_read_by_the_lobby_after_every_answer_is_not_pipelined() {
        // spec: DEC-39
        let a = Arc::new(Activity::new(Instant::now()));
        // An earlier hyper phase: two requests read at once, so the second was pipelined.
        a.read();
        drop(a.begin(false));
        drop(a.begin(false));
        assert!(a.pipelined());
        // Parked; the lobby reads the next request (no read of the stream's) and gives hyper
        // the stream with it.
        let (_client, server) = tokio::io::duplex(64);
        let _io = ParkIo::new(server, Bytes::from_static(b"GET / HTTP/1.1\r\n"), a.clone());
        drop(a.begin(false));
        assert!(!a.pipelined(), "sent after every answer");
    }

    #[tokio::test]
    async fn the_prefix_is_read_before_the_stream() -> io::Result<()> {
        let (mut client, server) = tokio::io::duplex(64);
        client.write_all(b"Host: a\r\n\r\n").await?;
        drop(client);
        let a = Arc::new(Activity::new(Instant::now()));
        let mut io = ParkIo::new(server, Bytes::from_static(b"GET / HTTP/1.1\r\n"), a);
        let mut small = [0u8; 3];
        io.read_exact(&mut small).await?;
        assert_eq!(&small, b"GET");
        let mut rest = Vec::new();
        io.read_to_end(&mut rest).await?;
        assert_eq!(rest, b" / HTTP/1.1\r\nHost: a\r\n\r\n");
        Ok(())
    }
}
