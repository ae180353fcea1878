//! What went wrong on a connection to a process, as the launcher's own client sees it. Where it
//! happened (before anything was sent, after, or in the body) is `ForwardError`'s business; this
//! says what.

use std::fmt;
use std::io;

use super::BoxError;
use crate::proxy::http1::chunked::ChunkError;
use crate::proxy::http1::response_head::HeadError;

#[derive(Debug)]
pub enum UpstreamError {
    /// Reading from or writing to the connection failed (reset, broken pipe).
    Io(io::Error),
    /// The process closed the connection before the response head, or before the body's end.
    Closed,
    /// The response head was malformed or too large.
    Head(HeadError),
    /// The chunked body was malformed.
    Chunk(ChunkError),
    /// The client's own request body failed while it was being passed on.
    ClientBody(BoxError),
    /// The request body did not match the length its head announced.
    BodyLength,
}

impl fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpstreamError::Io(e) => write!(f, "connection error: {e}"),
            UpstreamError::Closed => f.write_str("connection closed before the message completed"),
            UpstreamError::Head(e) => write!(f, "{e}"),
            UpstreamError::Chunk(e) => write!(f, "{e}"),
            UpstreamError::ClientBody(e) => write!(f, "the client's request body failed: {e}"),
            UpstreamError::BodyLength => {
                f.write_str("the request body did not match its announced length")
            }
        }
    }
}

impl std::error::Error for UpstreamError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            UpstreamError::Io(e) => Some(e),
            UpstreamError::ClientBody(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}
