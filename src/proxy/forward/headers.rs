//! Header rewriting on both legs of the proxy.
//!
//! hyper passes every header through, so the hop-by-hop ones (RFC 9110 §7.6.1: `Connection`, the
//! headers it names, `Keep-Alive`, `Proxy-Connection`, `TE`, `Trailer`, `Transfer-Encoding`,
//! `Upgrade`) are removed here on the way in and on the way out; each leg's own framing and
//! keep-alive are hyper's. The request also gets the client's address appended to
//! `X-Forwarded-For` (EDGE-1), and `X-Forwarded-Proto` is believed only from a loopback peer, the
//! nginx on the same host (EDGE-2, EDGE-3).

use std::net::{IpAddr, SocketAddr};

use http::header::{
    HeaderMap, HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, EXPECT, HOST, TE, TRAILER,
    TRANSFER_ENCODING, UPGRADE,
};
use http::uri::{PathAndQuery, Uri};

pub const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
pub const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
const KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");
const PROXY_CONNECTION: HeaderName = HeaderName::from_static("proxy-connection");

/// Rewrites a client's request head for the process: hop-by-hop headers removed, `Expect`
/// removed (hyper already answered `100-continue` on the client's leg), `X-Forwarded-For`
/// appended, `X-Forwarded-Proto` passed or set, target in origin form. `Host` is kept.
///
/// Bodies are not touched: a body the client sent chunked has no `Content-Length` and no exact
/// size, so hyper sends it on chunked (EDGE-4); a body with a `Content-Length` keeps it.
pub fn prepare_request(parts: &mut http::request::Parts, peer: &Peer) {
    strip_hop_by_hop(&mut parts.headers);
    parts.headers.remove(EXPECT);
    append_forwarded_for(&mut parts.headers, &peer.forwarded_for);
    if !is_loopback(peer.addr.ip()) {
        parts
            .headers
            .insert(X_FORWARDED_PROTO, HeaderValue::from_static("http"));
    }
    to_origin_form(parts);
}

/// A client as the rewriting needs it: its address, and its `X-Forwarded-For` entry, made once
/// per connection (formatting an address cost more than the rest of a request's rewriting).
#[derive(Clone, Debug)]
pub struct Peer {
    pub addr: SocketAddr,
    forwarded_for: HeaderValue,
}

impl Peer {
    pub fn new(addr: SocketAddr) -> Peer {
        let ip = addr.ip().to_canonical().to_string();
        Peer {
            addr,
            // An address is ASCII digits, dots, colons and hex: always a valid value.
            forwarded_for: HeaderValue::from_str(&ip)
                .unwrap_or_else(|_| HeaderValue::from_static("unknown")),
        }
    }
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.addr.fmt(f)
    }
}

/// The hop-by-hop headers (RFC 9110 §7.6.1) and `Transfer-Encoding`.
const HOP_BY_HOP: [HeaderName; 7] = [
    CONNECTION,
    KEEP_ALIVE,
    PROXY_CONNECTION,
    TE,
    TRAILER,
    TRANSFER_ENCODING,
    UPGRADE,
];

/// Rewrites a process's response head for the client: hop-by-hop headers removed.
pub fn prepare_response(parts: &mut http::response::Parts) {
    strip_hop_by_hop(&mut parts.headers);
}

/// Removes the hop-by-hop headers and every header the `Connection` header names. `Host` and
/// `Content-Length` are never removed because `Connection` names them: they say what the request
/// is and how long its body is, which a client's `Connection` header must not change.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Most heads have none: a look at each name costs less than a removal (a hash) of each.
    if !headers.keys().any(|n| HOP_BY_HOP.contains(n)) {
        return;
    }
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|token| HeaderName::from_bytes(token.trim().as_bytes()).ok())
        .filter(|name| *name != HOST && *name != CONTENT_LENGTH)
        .collect();
    for name in named {
        headers.remove(name);
    }
    // RFC 9112 §6.3: with Transfer-Encoding, a Content-Length is wrong and must go, or the next
    // hop would frame the body by it.
    if headers.remove(TRANSFER_ENCODING).is_some() {
        headers.remove(CONTENT_LENGTH);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
}

/// RFC 9112 §3.2: a request with more than one `Host` line, an HTTP/1.1 request with none, or a
/// `Host` that is no `host[:port]` gets `400`; the reason, if so. An HTTP/1.0 request may come
/// without one (it goes on with the process's address, as the upstream leg is HTTP/1.1). With an
/// absolute-form target the `Host` value is ignored (the target's authority replaces it, §3.2.2),
/// but still counted.
pub fn check_host(parts: &http::request::Parts) -> Result<(), &'static str> {
    let mut hosts = parts.headers.get_all(HOST).iter();
    let Some(host) = hosts.next() else {
        return if parts.version == http::Version::HTTP_10 {
            Ok(())
        } else {
            Err("no Host header (required since HTTP/1.1)")
        };
    };
    if hosts.next().is_some() {
        return Err("more than one Host header");
    }
    if parts.uri.authority().is_some() || host.is_empty() {
        return Ok(());
    }
    match http::uri::Authority::try_from(host.as_bytes()) {
        Ok(a) if !a.as_str().contains('@') => Ok(()),
        _ => Err("the Host header is not a host[:port]"),
    }
}

/// Loopback, including an IPv4 loopback address seen through an IPv6 socket (`::ffff:127.0.0.1`).
pub fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// Joins every existing `X-Forwarded-For` value and appends `ip`, as nginx's
/// `$proxy_add_x_forwarded_for` does: the chain is kept, never replaced.
fn append_forwarded_for(headers: &mut HeaderMap, client: &HeaderValue) {
    if !headers.contains_key(&X_FORWARDED_FOR) {
        headers.insert(X_FORWARDED_FOR, client.clone());
        return;
    }
    let mut chain: Vec<u8> = Vec::new();
    for v in headers.get_all(&X_FORWARDED_FOR) {
        let v = trim_ascii(v.as_bytes());
        if v.is_empty() {
            continue;
        }
        chain.extend_from_slice(v);
        chain.extend_from_slice(b", ");
    }
    chain.extend_from_slice(client.as_bytes());
    // Existing values were valid header bytes and so is the address, so this always parses.
    if let Ok(v) = HeaderValue::from_bytes(&chain) {
        headers.insert(X_FORWARDED_FOR, v);
    }
}

fn trim_ascii(mut b: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = b {
        if first.is_ascii_whitespace() || *first == b',' {
            b = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = b {
        if last.is_ascii_whitespace() || *last == b',' {
            b = rest;
        } else {
            break;
        }
    }
    b
}

/// The process is an origin server: it gets `/path?query`. An absolute-form target (a client
/// talking to us as to a forward proxy) gives its authority to `Host`, as RFC 9112 §3.2.2 says.
fn to_origin_form(parts: &mut http::request::Parts) {
    if parts.uri.scheme().is_none() && parts.uri.authority().is_none() {
        return;
    }
    if let Some(authority) = parts.uri.authority() {
        if let Ok(v) = HeaderValue::from_str(authority.as_str()) {
            parts.headers.insert(HOST, v);
        }
    }
    let pq = parts
        .uri
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| PathAndQuery::from_static("/"));
    parts.uri = Uri::from(pq);
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    fn parts(req: http::request::Builder) -> http::request::Parts {
        match req.body(()) {
            Ok(r) => r.into_parts().0,
            Err(e) => panic!("test request: {e}"),
        }
    }

    fn addr(s: &str) -> Peer {
        match s.parse() {
            Ok(a) => Peer::new(a),
            Err(e) => panic!("test address {s}: {e}"),
        }
    }

    fn values(h: &HeaderMap, name: &HeaderName) -> Vec<String> {
        h.get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect()
    }

    #[test]
    fn hop_by_hop_and_connection_named_headers_are_stripped_from_requests() {
        let mut p = parts(
            Request::get("/r4/metadata")
                .header("host", "tx.fhir.org")
                .header("connection", "keep-alive, X-Secret")
                .header("connection", "upgrade")
                .header("keep-alive", "timeout=5")
                .header("proxy-connection", "keep-alive")
                .header("te", "trailers")
                .header("trailer", "x-checksum")
                .header("upgrade", "websocket")
                .header("x-secret", "hop")
                .header("proxy-authorization", "Basic eA==")
                .header("accept", "application/fhir+json"),
        );
        prepare_request(&mut p, &addr("127.0.0.1:5000"));
        for gone in [
            "connection",
            "keep-alive",
            "proxy-connection",
            "te",
            "trailer",
            "upgrade",
            "x-secret",
        ] {
            assert!(!p.headers.contains_key(gone), "{gone} was passed on");
        }
        assert_eq!(values(&p.headers, &HOST), ["tx.fhir.org"]);
        assert!(p.headers.contains_key("proxy-authorization"));
        assert!(p.headers.contains_key("accept"));
    }

    #[test]
    fn connection_cannot_strip_host_or_content_length() {
        let mut p = parts(
            Request::post("/r4/$validate-code")
                .header("host", "h")
                .header("content-length", "12")
                .header("connection", "host, content-length"),
        );
        prepare_request(&mut p, &addr("127.0.0.1:5000"));
        assert_eq!(values(&p.headers, &HOST), ["h"]);
        assert_eq!(values(&p.headers, &CONTENT_LENGTH), ["12"]);
    }

    #[test]
    fn transfer_encoding_is_stripped_and_takes_a_conflicting_content_length_with_it() {
        // spec: EDGE-4 (hyper re-frames the body chunked on the next hop)
        let mut p = parts(
            Request::post("/r4/ValueSet/$expand")
                .header("transfer-encoding", "chunked")
                .header("content-length", "5"),
        );
        prepare_request(&mut p, &addr("127.0.0.1:5000"));
        assert!(!p.headers.contains_key(TRANSFER_ENCODING));
        assert!(!p.headers.contains_key(CONTENT_LENGTH));
    }

    #[test]
    fn hop_by_hop_and_connection_named_headers_are_stripped_from_responses() {
        let mut resp = match http::Response::builder()
            .header("connection", "keep-alive, x-internal")
            .header("keep-alive", "timeout=5")
            .header("x-internal", "1")
            .header("transfer-encoding", "chunked")
            .header("content-type", "application/fhir+json")
            .body(())
        {
            Ok(r) => r.into_parts().0,
            Err(e) => panic!("{e}"),
        };
        prepare_response(&mut resp);
        for gone in [
            "connection",
            "keep-alive",
            "x-internal",
            "transfer-encoding",
        ] {
            assert!(!resp.headers.contains_key(gone), "{gone} was passed on");
        }
        assert!(resp.headers.contains_key("content-type"));
    }

    #[test]
    fn forwarded_for_is_appended_to_every_existing_value_never_replaced() {
        // spec: EDGE-1
        let mut p = parts(
            Request::get("/")
                .header("x-forwarded-for", "203.0.113.7")
                .header("x-forwarded-for", "198.51.100.2, 10.0.0.1"),
        );
        prepare_request(&mut p, &addr("127.0.0.1:40000"));
        assert_eq!(
            values(&p.headers, &X_FORWARDED_FOR),
            ["203.0.113.7, 198.51.100.2, 10.0.0.1, 127.0.0.1"]
        );

        let mut p = parts(Request::get("/"));
        prepare_request(&mut p, &addr("[2001:db8::5]:40000"));
        assert_eq!(values(&p.headers, &X_FORWARDED_FOR), ["2001:db8::5"]);

        let mut p = parts(Request::get("/"));
        prepare_request(&mut p, &addr("[::ffff:192.0.2.9]:40000"));
        assert_eq!(values(&p.headers, &X_FORWARDED_FOR), ["192.0.2.9"]);
    }

    #[test]
    fn forwarded_proto_is_believed_only_from_loopback() {
        // spec: EDGE-2
        for peer in [
            "127.0.0.1:1",
            "127.9.8.7:1",
            "[::1]:1",
            "[::ffff:127.0.0.1]:1",
        ] {
            let mut p = parts(Request::get("/").header("x-forwarded-proto", "https"));
            prepare_request(&mut p, &addr(peer));
            assert_eq!(values(&p.headers, &X_FORWARDED_PROTO), ["https"], "{peer}");
        }
        // A loopback peer that sent none: nothing is invented.
        let mut p = parts(Request::get("/"));
        prepare_request(&mut p, &addr("127.0.0.1:1"));
        assert!(!p.headers.contains_key(&X_FORWARDED_PROTO));

        // spec: EDGE-3
        for peer in ["192.0.2.1:1", "[2001:db8::1]:1", "[::ffff:192.0.2.1]:1"] {
            let mut p = parts(
                Request::get("/")
                    .header("x-forwarded-proto", "https")
                    .header("x-forwarded-proto", "https"),
            );
            prepare_request(&mut p, &addr(peer));
            assert_eq!(values(&p.headers, &X_FORWARDED_PROTO), ["http"], "{peer}");
            let mut p = parts(Request::get("/"));
            prepare_request(&mut p, &addr(peer));
            assert_eq!(values(&p.headers, &X_FORWARDED_PROTO), ["http"], "{peer}");
        }
    }

    #[test]
    fn target_goes_upstream_in_origin_form() {
        let mut p = parts(Request::get(
            "http://example.org:8080/r4/CodeSystem?url=x%20y",
        ));
        prepare_request(&mut p, &addr("127.0.0.1:1"));
        assert_eq!(p.uri.to_string(), "/r4/CodeSystem?url=x%20y");
        assert_eq!(values(&p.headers, &HOST), ["example.org:8080"]);

        let mut p = parts(Request::get("/r4/metadata?_format=json").header("host", "h"));
        prepare_request(&mut p, &addr("127.0.0.1:1"));
        assert_eq!(p.uri.to_string(), "/r4/metadata?_format=json");
        assert_eq!(values(&p.headers, &HOST), ["h"]);
    }

    #[test]
    fn host_is_required_once_and_must_be_a_host() {
        let check = |req: http::request::Builder| check_host(&parts(req));
        assert_eq!(
            check(Request::get("/").header("host", "tx.fhir.org")),
            Ok(())
        );
        assert_eq!(
            check(Request::get("/").header("host", "[::1]:3000")),
            Ok(())
        );
        assert_eq!(check(Request::get("/").header("host", "")), Ok(()));
        assert!(check(Request::get("/")).is_err(), "HTTP/1.1 without Host");
        let one_zero = Request::get("/").version(http::Version::HTTP_10);
        assert_eq!(check(one_zero), Ok(()), "HTTP/1.0 may omit it");
        let two = Request::get("/").header("host", "a").header("host", "a");
        assert!(check(two).is_err());
        for bad in ["a b", "user@host", "host/path", "[::1"] {
            assert!(
                check(Request::get("/").header("host", bad)).is_err(),
                "{bad}"
            );
        }
        // Absolute-form: the target's authority is the host; the value is ignored, not the count.
        let abs = Request::get("http://example.org/r4/metadata").header("host", "a b");
        assert_eq!(check(abs), Ok(()));
        let abs_two = Request::get("http://example.org/")
            .header("host", "a")
            .header("host", "b");
        assert!(check(abs_two).is_err());
    }

    #[test]
    fn expect_is_not_passed_on() {
        let mut p = parts(Request::post("/").header("expect", "100-continue"));
        prepare_request(&mut p, &addr("127.0.0.1:1"));
        assert!(!p.headers.contains_key(EXPECT));
    }
}
