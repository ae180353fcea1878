//! Requests the launcher will not proxy: `CONNECT`.
//!
//! `CONNECT` asks for a tunnel, which a FHIR server's front door never gives; RFC 9110 §9.1 says
//! a server that does not implement a method answers `501`. `Upgrade` (WebSocket, `h2c`) is not
//! refused: it is a hop-by-hop header, removed on the way in, and RFC 9110 §7.8 lets a server
//! ignore it, so the request is answered as plain HTTP/1.1. Refusing it would break clients that
//! offer `h2c` on every request (`curl --http2`); FHIRsmith has no WebSocket endpoint to lose.

use http::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use http::{Method, Response, StatusCode};

use super::body::{full, ProxyBody};
use crate::outcome::{Outcome, CONTENT_TYPE as FHIR_JSON};

/// The answer to give instead of forwarding, if this request is one the launcher refuses.
pub fn refuse_unsupported(parts: &http::request::Parts) -> Option<Response<ProxyBody>> {
    if parts.method != Method::CONNECT {
        return None;
    }
    let outcome = Outcome::error(
        "not-supported",
        "CONNECT is not supported: this server is not a forward proxy",
    );
    let mut resp = Response::new(full(outcome.to_bytes()));
    *resp.status_mut() = StatusCode::NOT_IMPLEMENTED;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(FHIR_JSON));
    resp.headers_mut().insert(
        ALLOW,
        HeaderValue::from_static("GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS"),
    );
    Some(resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn connect_is_refused_with_501_and_an_operation_outcome() {
        let (parts, ()) = Request::connect("example.org:443")
            .body(())
            .unwrap()
            .into_parts();
        let resp = refuse_unsupported(&parts).unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_IMPLEMENTED);
        assert_eq!(resp.headers()[CONTENT_TYPE], FHIR_JSON);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["resourceType"], "OperationOutcome");
        assert_eq!(v["issue"][0]["code"], "not-supported");
    }

    #[test]
    fn upgrade_requests_are_not_refused() {
        let (parts, ()) = Request::get("/r4/metadata")
            .header("connection", "upgrade")
            .header("upgrade", "websocket")
            .body(())
            .unwrap()
            .into_parts();
        assert!(refuse_unsupported(&parts).is_none());
    }
}
