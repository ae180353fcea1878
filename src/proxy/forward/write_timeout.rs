//! The client connection's write timeout (STREAM-4, STREAM-5): a client that takes none of the
//! response waiting for it for `writeTimeoutSeconds` has its connection closed.
//!
//! It is a wrapper on the accepted stream, below hyper, because only there is "no progress" seen:
//! a write that returns `Pending` (the socket buffer is full, the client is not reading) starts a
//! clock; any byte written stops it, so a slow reader that keeps taking some is never cut. When
//! the clock runs out the write fails with `TimedOut`, hyper gives up on the connection and drops
//! the response body, which closes the upstream connection of a streamed response and so ends
//! the request on the process too (STREAM-6).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::deadline::Later;

/// An accepted client stream with a write timeout. Use it as `TokioIo::new(WriteTimeoutIo::new(..))`.
pub struct WriteTimeoutIo<T> {
    inner: T,
    timeout: Duration,
    /// Allocated on the first stall only; most connections never stall.
    sleep: Option<Pin<Box<Sleep>>>,
    /// The clock is running: a write stalled and nothing was written since.
    armed: bool,
    timed_out: bool,
    closes: Arc<AtomicU64>,
}

impl<T> WriteTimeoutIo<T> {
    /// `timeout` zero: no write timeout. `closes` is incremented once for each connection cut, for
    /// the listener's once-a-minute log line (STREAM-7).
    pub fn new(inner: T, timeout: Duration, closes: Arc<AtomicU64>) -> WriteTimeoutIo<T> {
        WriteTimeoutIo {
            inner,
            timeout,
            sleep: None,
            armed: false,
            timed_out: false,
            closes,
        }
    }

    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The stream, for a connection handed over through an upgrade (nothing is buffered here).
    pub fn into_inner(self) -> T {
        self.inner
    }

    /// A write made progress (or failed for its own reasons): the clock stops.
    fn progressed(&mut self) {
        self.armed = false;
    }

    /// A write could not proceed: start the clock if it is not running, and fail once it has run
    /// out.
    fn stalled(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        if self.timeout.is_zero() {
            return Poll::Pending;
        }
        if !self.armed {
            self.armed = true;
            let deadline = Instant::now().later(self.timeout);
            match self.sleep.as_mut() {
                Some(sleep) => sleep.as_mut().reset(deadline),
                None => self.sleep = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
        }
        let Some(sleep) = self.sleep.as_mut() else {
            return Poll::Pending;
        };
        match sleep.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => {
                self.timed_out = true;
                self.closes.fetch_add(1, Ordering::Relaxed);
                Poll::Ready(timed_out_error(self.timeout))
            }
        }
    }

    /// `wrote`: a ready result means bytes left (a write), not merely that nothing is buffered
    /// (a flush or shutdown of a socket is always ready, whether or not the client reads).
    fn after<R>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<R>>,
        wrote: bool,
    ) -> Poll<io::Result<R>> {
        match polled {
            Poll::Ready(r) => {
                if wrote {
                    self.progressed();
                }
                Poll::Ready(r)
            }
            Poll::Pending => self.stalled(cx).map(Err),
        }
    }
}

fn timed_out_error(timeout: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!(
            "the client took none of the response for {} ms",
            timeout.as_millis()
        ),
    )
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteTimeoutIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteTimeoutIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.timed_out {
            return Poll::Ready(Err(timed_out_error(this.timeout)));
        }
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.after(cx, polled, true)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.timed_out {
            return Poll::Ready(Err(timed_out_error(this.timeout)));
        }
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.after(cx, polled, true)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.timed_out {
            return Poll::Ready(Err(timed_out_error(this.timeout)));
        }
        let polled = Pin::new(&mut this.inner).poll_flush(cx);
        this.after(cx, polled, false)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Closing must not wait on the client either.
        let this = self.get_mut();
        if this.timed_out {
            return Pin::new(&mut this.inner).poll_shutdown(cx);
        }
        let polled = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.after(cx, polled, false)
    }
}

#[cfg(test)]
#[path = "write_timeout_tests.rs"]
mod tests;
