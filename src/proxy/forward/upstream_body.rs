//! A process's response body (`UpstreamBody`), read from its connection by the request's own
//! task as the client takes it: fill the connection's read buffer, then step the codec's
//! `Decoder`, whatever the framing. When the body ends, the connection goes home (`Home`) if it
//! may carry another request, and is closed otherwise.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite};

use super::upstream_conn::{Home, Reading, UpstreamConn, Writing};
use super::upstream_error::UpstreamError;
use crate::proxy::http1::decode::{DecodeError, Decoder, Step};

/// A process's response body, read from its connection as it is polled. Dropped before its end,
/// it closes the connection, which ends the request on the process (STREAM-6).
pub struct UpstreamBody<IO = tokio::net::TcpStream> {
    /// `None` once the body has ended. Boxed (from its making): the body stays small, and the
    /// connection moves between pool and body as a pointer. Its `reading` is `Body`.
    conn: Option<Box<UpstreamConn<IO>>>,
    home: Option<Arc<dyn Home<IO>>>,
}

impl<IO> UpstreamBody<IO> {
    /// The body of the response just read on `conn` (`at_end`: it has none, and the connection
    /// is free at once: hyper never polls a body at its end).
    pub(super) fn new(
        conn: Box<UpstreamConn<IO>>,
        home: Option<Arc<dyn Home<IO>>>,
        at_end: bool,
    ) -> UpstreamBody<IO> {
        let mut body = UpstreamBody {
            conn: Some(conn),
            home,
        };
        if at_end {
            body.finish(true);
        }
        body
    }

    /// The body has ended: the connection goes home if the response allowed it, was read to its
    /// end and nothing followed it; otherwise it is closed. Bytes past the end of a body read
    /// whole are the process's stray writes: its pool is told.
    fn finish(&mut self, complete: bool) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let keep_alive = matches!(
            conn.reading,
            Reading::Body {
                keep_alive: true,
                ..
            }
        );
        if complete && !conn.read.is_empty() {
            if let Some(home) = &self.home {
                home.stray();
            }
            return;
        }
        if complete && keep_alive {
            if let Some(home) = &self.home {
                (conn.writing, conn.reading) = (Writing::Init, Reading::Init);
                conn.reused = true;
                home.take_back(conn);
            }
        }
    }

    /// The connection may carry another request once the body has ended.
    #[cfg(test)]
    pub fn keeps_alive(&self) -> bool {
        self.conn.as_ref().is_some_and(|c| {
            matches!(
                c.reading,
                Reading::Body {
                    keep_alive: true,
                    ..
                }
            )
        })
    }

    fn decoder(&self) -> Option<&Decoder> {
        match &self.conn.as_ref()?.reading {
            Reading::Body { decoder, .. } => Some(decoder),
            _ => None,
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
        // The process has closed: what is buffered is the last of it.
        let mut eof = false;
        loop {
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            let Reading::Body { decoder, .. } = &mut conn.reading else {
                this.finish(false);
                return Poll::Ready(None);
            };
            let step = decoder.step(&mut conn.read, eof);
            let (at_end, at_close) = (decoder.is_end(), decoder.ends_at_close());
            match step {
                Ok(Step::Data(data)) => {
                    if at_end {
                        this.finish(true);
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Ok(Step::End) => {
                    // A body to the close ends with the connection, which can carry no more.
                    this.finish(!at_close);
                    return Poll::Ready(None);
                }
                Ok(Step::NeedMore) => {}
                Err(e) => {
                    this.finish(false);
                    return Poll::Ready(Some(Err(match e {
                        DecodeError::Chunk(e) => UpstreamError::Chunk(e),
                        DecodeError::Closed => UpstreamError::Closed,
                    })));
                }
            }
            match ready!(conn.poll_fill(cx)) {
                Ok(0) => eof = true,
                Ok(_) => {}
                Err(e) => {
                    this.finish(false);
                    return Poll::Ready(Some(Err(UpstreamError::Io(e))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.conn.is_none() || self.decoder().is_some_and(Decoder::is_end)
    }

    fn size_hint(&self) -> SizeHint {
        if self.conn.is_none() {
            return SizeHint::with_exact(0);
        }
        match self.decoder().and_then(Decoder::remaining) {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}

impl<IO> std::fmt::Debug for UpstreamBody<IO> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamBody")
            .field("decoder", &self.decoder())
            .field("open", &self.conn.is_some())
            .finish()
    }
}
