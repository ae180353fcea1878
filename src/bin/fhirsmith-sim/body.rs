//! The sim's one response body type: whole bytes, or chunks from a channel (a long stream that
//! begins at once, a large response produced only as fast as it is read).

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

pub enum SimBody {
    Full(Option<Bytes>),
    Chunks(mpsc::Receiver<Bytes>),
}

impl SimBody {
    pub fn full(b: impl Into<Bytes>) -> SimBody {
        SimBody::Full(Some(b.into()))
    }
}

impl Body for SimBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            SimBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            SimBody::Chunks(rx) => rx.poll_recv(cx).map(|c| c.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, SimBody::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            SimBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            SimBody::Full(None) => SizeHint::with_exact(0),
            SimBody::Chunks(_) => SizeHint::default(),
        }
    }
}

/// `mb` MiB of a JSON-ish filler, produced 64 KiB at a time as the reader takes it.
pub fn large(mb: u64) -> SimBody {
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        let chunk = Bytes::from(vec![b' '; 64 * 1024]);
        for _ in 0..mb * 16 {
            if tx.send(chunk.clone()).await.is_err() {
                return;
            }
        }
    });
    SimBody::Chunks(rx)
}

/// A line every 100 ms for `seconds`, the first at once.
pub fn stream(seconds: f64) -> SimBody {
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        let ticks = (seconds.max(0.0) * 10.0).ceil() as u64;
        for i in 0..=ticks {
            if tx.send(Bytes::from(format!("tick {i}\n"))).await.is_err() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    });
    SimBody::Chunks(rx)
}
