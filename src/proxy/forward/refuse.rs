//! Requests the launcher will not proxy: `CONNECT`.
//!
//! `CONNECT` asks for a tunnel, which a FHIR server's front door never gives; RFC 9110 §9.1 says
//! a server that does not implement a method answers `501`. `Upgrade` (WebSocket, `h2c`) is not
//! refused: it is a hop-by-hop header, removed on the way in, and RFC 9110 §7.8 lets a server
//! ignore it, so the request is answered as plain HTTP/1.1. Refusing it would break clients that
//! offer `h2c` on every request (`curl --http2`); FHIRsmith has no WebSocket endpoint to lose.

use http::Method;

/// Whether this request is one the launcher refuses (`proxy::answer::Answer::Unsupported`)
/// instead of forwarding.
pub fn is_unsupported(parts: &http::request::Parts) -> bool {
    parts.method == Method::CONNECT
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    #[test]
    fn connect_is_unsupported() {
        let (parts, ()) = Request::connect("example.org:443")
            .body(())
            .unwrap_or_default()
            .into_parts();
        assert!(is_unsupported(&parts));
    }

    #[test]
    fn upgrade_requests_are_not_refused() {
        let (parts, ()) = Request::get("/r4/metadata")
            .header("connection", "upgrade")
            .header("upgrade", "websocket")
            .body(())
            .unwrap_or_default()
            .into_parts();
        assert!(!is_unsupported(&parts));
    }
}
