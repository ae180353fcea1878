//! DEC-33's rule, as a decision of its inputs: what becomes of a request whose process closed
//! the connection (or reset it) after the request went out and before any byte of an answer.
//!
//! Such a request may or may not have reached the process's code; only a request that is safe
//! to make twice, an idempotent method without a body (GET, HEAD, OPTIONS), is sent again, and
//! once. On a connection that had carried requests before, the likeliest cause is the process's
//! keep-alive close crossing the request, and the process is alive: the request goes again on a
//! fresh connection to the same process (Go's `net/http` transport does the same; a cache-id
//! request so stays with its issuer). On a fresh connection the process most likely died: the
//! request is handed back, for another process its route allows.

use http::Method;

/// What to do with a request that got no byte of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// LAUNCH-9's `502`: it may have been acted on, or it was sent again already.
    Fail,
    /// Once more, on a fresh connection to the same process.
    Reconnect,
    /// Handed back for another process.
    HandBack,
}

/// GET, HEAD and OPTIONS: what a second copy of cannot change (RFC 9110 §9.2.2 lists PUT and
/// DELETE too; a FHIR server's PUT or DELETE is never sent twice here).
pub fn replayable(method: &Method, bodiless: bool) -> bool {
    bodiless && (method == Method::GET || method == Method::HEAD || method == Method::OPTIONS)
}

/// The request is `replayable`; `heard_nothing`: no byte of an answer came; `reused`: the
/// connection had carried a request before; `reconnected`: this is already the fresh
/// connection's try.
pub fn after_silence(
    replayable: bool,
    heard_nothing: bool,
    reused: bool,
    reconnected: bool,
) -> Next {
    if !replayable || !heard_nothing {
        Next::Fail
    } else if reused && !reconnected {
        Next::Reconnect
    } else {
        Next::HandBack
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_idempotent_bodiless_requests_are_sent_again() {
        // spec: DEC-33
        for m in [Method::GET, Method::HEAD, Method::OPTIONS] {
            assert!(replayable(&m, true), "{m}");
            assert!(!replayable(&m, false), "{m} with a body");
        }
        for m in [Method::POST, Method::PUT, Method::DELETE, Method::PATCH] {
            assert!(!replayable(&m, true), "{m}");
        }
    }

    #[test]
    fn a_silent_close_is_retried_once_on_a_fresh_connection_then_elsewhere() {
        // spec: DEC-33
        assert_eq!(after_silence(true, true, true, false), Next::Reconnect);
        assert_eq!(after_silence(true, true, true, true), Next::HandBack);
        assert_eq!(after_silence(true, true, false, false), Next::HandBack);
        // A byte of an answer, or a request that is not safe twice: LAUNCH-9's 502.
        assert_eq!(after_silence(true, false, true, false), Next::Fail);
        assert_eq!(after_silence(false, true, true, false), Next::Fail);
        assert_eq!(after_silence(false, true, false, false), Next::Fail);
    }
}
