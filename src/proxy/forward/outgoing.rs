//! What a request body must offer the upstream client: the `Body` itself, and, when the whole of
//! it is already in memory, those bytes without consuming it. The whole bytes go out with the
//! head in one `writev`, and the body stays untouched, so a request whose connection turned out
//! closed can still be handed back and sent elsewhere.

use bytes::Bytes;
use http_body::Body;
use http_body_util::{Empty, Full};
use hyper::body::Incoming;

use super::BoxError;

pub trait OutgoingBody: Body<Data = Bytes, Error: Into<BoxError>> + Unpin + Send + 'static {
    /// The whole body, if it is in memory (a clone: the body is left as it was).
    fn whole(&self) -> Option<Bytes> {
        None
    }
}

impl OutgoingBody for super::ClientBody {
    fn whole(&self) -> Option<Bytes> {
        self.whole_ahead()
    }
}

/// A body still arriving from a client: passed on as it comes.
impl OutgoingBody for Incoming {}

impl OutgoingBody for Empty<Bytes> {
    fn whole(&self) -> Option<Bytes> {
        Some(Bytes::new())
    }
}

/// Full gives no look at its bytes without polling: passed on as a stream of one frame.
impl OutgoingBody for Full<Bytes> {}
