//! Why a request could not be forwarded, as a decision the listener acts on: retry elsewhere
//! (nothing reached the process, or it closed without a byte of an answer to an idempotent
//! request: DEC-33), `502` (the process took the request and did not answer), or `504` (no
//! response head in time). Classified by where the failure happened, never by message text.

use std::fmt;
use std::io;
use std::time::Duration;

use super::upstream_error::UpstreamError;

/// A failed forward. [`ForwardError::nothing_sent`] tells the listener whether the request may be
/// tried on another process.
#[derive(Debug)]
pub enum ForwardError {
    /// The TCP connect to the process failed (refused, unreachable): nothing was sent.
    Connect(io::Error),
    /// A connection was made but nothing of the request was written to it (it was closed, and
    /// so was a fresh one): nothing was sent.
    NotSent(UpstreamError),
    /// The request was (at least partly) written and the process gave no complete response head:
    /// it may have acted on it, so it is never retried (LAUNCH-9: `502`).
    Sent(UpstreamError),
    /// The request was written and the process closed the connection (or it failed) before any
    /// byte of an answer, on a fresh connection: it most likely died. Only an idempotent
    /// request without a body ends so, and it is handed back for another process (DEC-33).
    Unanswered(UpstreamError),
    /// The response head did not begin within the upstream timeout after the request was sent
    /// (TIMEOUT-1: `504`). The upstream connection has been closed, which aborts the request on
    /// the process (TIMEOUT-3).
    Timeout(Duration),
    /// The response head arrived but its body failed before it was read whole (buffered
    /// responses only; a streamed body's failure reaches the client as a cut-short response).
    Body(UpstreamError),
}

impl ForwardError {
    /// Nothing of the request reached the process, so another process may take it.
    #[cfg(test)]
    pub fn nothing_sent(&self) -> bool {
        matches!(self, ForwardError::Connect(_) | ForwardError::NotSent(_))
    }

    /// The client's own request body failed while it was being passed on (bad chunk framing, or
    /// the client went away mid-body): the client's fault, not the process's.
    pub fn client_body_failed(&self) -> bool {
        matches!(self, ForwardError::Sent(UpstreamError::ClientBody(_)))
    }

    /// The process closed without answering a request that came back for another (DEC-33).
    pub fn unanswered(&self) -> bool {
        matches!(self, ForwardError::Unanswered(_))
    }

    /// The upstream timeout ran out (TIMEOUT-1).
    pub fn is_timeout(&self) -> bool {
        matches!(self, ForwardError::Timeout(_))
    }
}

impl fmt::Display for ForwardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ForwardError::Connect(e) => write!(f, "could not connect: {e}"),
            ForwardError::NotSent(e) => write!(f, "request not sent: {e}"),
            ForwardError::Sent(e) => write!(f, "no response after the request was sent: {e}"),
            ForwardError::Unanswered(e) => {
                write!(f, "closed without a byte of an answer to the request: {e}")
            }
            ForwardError::Timeout(d) => {
                write!(f, "no response began within {} ms", d.as_millis())
            }
            ForwardError::Body(e) => write!(f, "response body failed: {e}"),
        }
    }
}

impl std::error::Error for ForwardError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ForwardError::Connect(e) => Some(e),
            ForwardError::NotSent(e)
            | ForwardError::Sent(e)
            | ForwardError::Unanswered(e)
            | ForwardError::Body(e) => Some(e),
            ForwardError::Timeout(_) => None,
        }
    }
}

/// A failed forward that hands the request back when nothing of it was sent, so the listener can
/// offer it to another process without having read its body.
#[derive(Debug)]
pub struct SendFailure<B> {
    pub error: ForwardError,
    /// `Some` only when nothing of the request was written to the process. A timeout never
    /// hands it back: it was inside the send that was given up.
    pub request: Option<http::Request<B>>,
}

impl<B> From<SendFailure<B>> for ForwardError {
    fn from(f: SendFailure<B>) -> ForwardError {
        f.error
    }
}
