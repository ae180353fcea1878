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
    Entry, HeaderMap, HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, EXPECT, HOST, TE,
    TRAILER, TRANSFER_ENCODING, UPGRADE,
};
use http::uri::{PathAndQuery, Uri};

pub const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
pub const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
/// The session header the router reads (a name made once: one parsed from a string costs a
/// parse per request); the codec's, which the lobby reads it by.
pub use crate::proxy::http1::X_CACHE_ID;
const KEEP_ALIVE: HeaderName = HeaderName::from_static("keep-alive");
const PROXY_CONNECTION: HeaderName = HeaderName::from_static("proxy-connection");

/// Rewrites a client's request head for the process: hop-by-hop headers removed, `Expect`
/// removed (hyper already answered `100-continue` on the client's leg), `X-Forwarded-For`
/// appended, `X-Forwarded-Proto` passed or set, target in origin form. `Host` is kept.
///
/// Bodies are not touched: a body the client sent chunked has no `Content-Length` and no exact
/// size, so hyper sends it on chunked (EDGE-4); a body with a `Content-Length` keeps it.
pub fn prepare_request(parts: &mut http::request::Parts, peer: &Peer) {
    let found = Found::look(&parts.headers);
    strip_found(&mut parts.headers, &found);
    if found.expect {
        parts.headers.remove(EXPECT);
    }
    append_forwarded_for(&mut parts.headers, &peer.forwarded_for);
    if !peer.loopback {
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
    /// `is_loopback(addr.ip())`, asked once per connection, not per request.
    loopback: bool,
}

impl Peer {
    pub fn new(addr: SocketAddr) -> Peer {
        let ip = addr.ip().to_canonical().to_string();
        Peer {
            addr,
            // An address is ASCII digits, dots, colons and hex: always a valid value.
            forwarded_for: HeaderValue::from_str(&ip)
                .unwrap_or_else(|_| HeaderValue::from_static("unknown")),
            loopback: is_loopback(addr.ip()),
        }
    }

    /// A client at `addr`: this one's entry shared when the address is the same (a crowd from
    /// one address, or behind one proxy, keeps one, not one per connection).
    pub fn next(&self, addr: SocketAddr) -> Peer {
        if addr.ip() != self.addr.ip() {
            return Peer::new(addr);
        }
        Peer {
            addr,
            forwarded_for: self.forwarded_for.clone(),
            loopback: self.loopback,
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

/// Where `Connection` and `Transfer-Encoding` are in `HOP_BY_HOP`.
const CONNECTION_AT: usize = 0;
const TRANSFER_ENCODING_AT: usize = 5;

/// `HOP_BY_HOP[i]`, made alone.
fn hop_by_hop(i: usize) -> HeaderName {
    match i {
        CONNECTION_AT => CONNECTION,
        1 => KEEP_ALIVE,
        2 => PROXY_CONNECTION,
        3 => TE,
        4 => TRAILER,
        TRANSFER_ENCODING_AT => TRANSFER_ENCODING,
        _ => UPGRADE,
    }
}

/// Rewrites a process's response head for the client: hop-by-hop headers removed.
pub fn prepare_response(parts: &mut http::response::Parts) {
    strip_hop_by_hop(&mut parts.headers);
}

/// Removes the hop-by-hop headers and every header the `Connection` header names. `Host` and
/// `Content-Length` are never removed because `Connection` names them: they say what the request
/// is and how long its body is, which a client's `Connection` header must not change.
///
/// One look at each name says which are there, and only those are removed (a removal hashes its
/// name). Almost every head has none, or only `Connection: keep-alive` (nginx's on every
/// response, an HTTP/1.0 client's on every request): that costs the look and one removal, where
/// removing all seven and collecting the named ones hashed every name on every response.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    strip_found(headers, &Found::look(headers));
}

fn strip_found(headers: &mut HeaderMap, found: &Found) {
    if found.none() {
        return;
    }
    // Almost no `Connection` value names a header (nginx's `keep-alive`, a client's `close`):
    // one look at the values says so, where reading them for names is work on every response.
    let names_some = |headers: &HeaderMap| {
        found.named_close
            || !headers
                .get_all(CONNECTION)
                .iter()
                .all(only_keep_alive_or_close)
    };
    if found.has(CONNECTION_AT) && names_some(headers) {
        remove_connection_options(headers, found.named_close);
    }
    // RFC 9112 §6.3: with Transfer-Encoding, a Content-Length is wrong and must go, or the next
    // hop would frame the body by it. (Asked of the map, not of `found`: `Connection` may have
    // named it, and then it went as an option, leaving the Content-Length.)
    if found.has(TRANSFER_ENCODING_AT) && headers.remove(TRANSFER_ENCODING).is_some() {
        headers.remove(CONTENT_LENGTH);
    }
    // Only the names that are there, each made by `hop_by_hop` (a loop over the const array
    // would make and drop all seven names, and `has` the array again).
    let mut hop = found.hop & !(1 << TRANSFER_ENCODING_AT);
    while hop != 0 {
        let i = hop.trailing_zeros() as usize;
        hop &= hop - 1;
        headers.remove(hop_by_hop(i));
    }
}

/// Which hop-by-hop headers a head has, from one pass over its names.
struct Found {
    /// Bit `i`: `HOP_BY_HOP[i]` is there.
    hop: u8,
    /// A header named `close` is there (`Connection: close` names it; there almost never is one).
    named_close: bool,
    /// `Expect` is there (a request's, removed too).
    expect: bool,
}

impl Found {
    fn look(headers: &HeaderMap) -> Found {
        let mut found = Found {
            hop: 0,
            named_close: false,
            expect: false,
        };
        for name in headers.keys() {
            if let Some(i) = HOP_BY_HOP.iter().position(|h| h == name) {
                found.hop |= 1 << i;
            } else if name == EXPECT {
                found.expect = true;
            } else if name.as_str() == "close" {
                found.named_close = true;
            }
        }
        found
    }

    fn none(&self) -> bool {
        self.hop == 0
    }

    /// `HOP_BY_HOP[i]` is there.
    fn has(&self, i: usize) -> bool {
        self.hop & (1 << i) != 0
    }
}

/// A `Connection` value whose every token is `keep-alive` or `close`, as
/// `remove_connection_options` reads it (text, split on commas, trimmed).
fn only_keep_alive_or_close(value: &HeaderValue) -> bool {
    value.to_str().is_ok_and(|v| {
        v.as_bytes().split(|&b| b == b',').all(|t| {
            let t = t.trim_ascii();
            t.eq_ignore_ascii_case(b"keep-alive") || t.eq_ignore_ascii_case(b"close")
        })
    })
}

/// Removes each header a `Connection` value names (RFC 9110 §7.6.1), except `Host` and
/// `Content-Length`. `keep-alive` names a hop-by-hop header, removed with the others; `close`
/// names one only if the head has a header of that name. Each value is cloned before its names
/// are removed (a reference count, not a copy), so nothing is collected.
fn remove_connection_options(headers: &mut HeaderMap, named_close: bool) {
    let mut i = 0;
    while let Some(value) = headers.get_all(CONNECTION).iter().nth(i).cloned() {
        i += 1;
        let Ok(value) = value.to_str() else {
            continue;
        };
        for token in value.split(',').map(str::trim) {
            if token.eq_ignore_ascii_case("keep-alive")
                || (token.eq_ignore_ascii_case("close") && !named_close)
            {
                continue;
            }
            let Ok(name) = HeaderName::from_bytes(token.as_bytes()) else {
                continue;
            };
            // `Connection` itself goes last, with the other hop-by-hop headers: removed now, the
            // values still to read would be gone.
            if name != HOST && name != CONTENT_LENGTH && name != CONNECTION {
                headers.remove(name);
            }
        }
    }
}

/// RFC 9112 §3.2: a request with more than one `Host` line, an HTTP/1.1 request with none, or a
/// `Host` that is no `host[:port]` gets `400`; the reason, if so. An HTTP/1.0 request may come
/// without one (it goes on with the process's address, as the upstream leg is HTTP/1.1). With an
/// absolute-form target the `Host` value is ignored (the target's authority replaces it, §3.2.2),
/// but still counted.
#[cfg(test)]
pub fn check_host(parts: &http::request::Parts) -> Result<(), &'static str> {
    check_looked_host(parts, &Looked::of(&parts.headers))
}

/// As [`check_host`], by what `looked` found of the head's `Host` lines.
pub fn check_looked_host(
    parts: &http::request::Parts,
    looked: &Looked<'_>,
) -> Result<(), &'static str> {
    let Some(host) = looked.host else {
        return if parts.version == http::Version::HTTP_10 {
            Ok(())
        } else {
            Err("no Host header (required since HTTP/1.1)")
        };
    };
    if looked.more_hosts {
        return Err("more than one Host header");
    }
    if parts.uri.authority().is_some() || host.is_empty() || is_plain_host(host.as_bytes()) {
        return Ok(());
    }
    // Anything else is judged by `http`'s parser, which copies the value (an allocation).
    match http::uri::Authority::try_from(host.as_bytes()) {
        Ok(a) if !a.as_str().contains('@') => Ok(()),
        _ => Err("the Host header is not a host[:port]"),
    }
}

/// What routing reads of a request's head, from one pass over its headers: a lookup each
/// (`Host`, `Content-Length`, `Transfer-Encoding`, `x-cache-id`) would hash its name, four
/// hashes a request. The first value of a name is the one `HeaderMap::get` gives.
pub struct Looked<'a> {
    host: Option<&'a HeaderValue>,
    more_hosts: bool,
    pub content_length: Option<&'a HeaderValue>,
    pub transfer_encoding: bool,
    pub cache_id: Option<&'a HeaderValue>,
}

impl<'a> Looked<'a> {
    pub fn of(headers: &'a HeaderMap) -> Looked<'a> {
        let mut looked = Looked {
            host: None,
            more_hosts: false,
            content_length: None,
            transfer_encoding: false,
            cache_id: None,
        };
        for (name, value) in headers {
            if name == HOST {
                looked.more_hosts |= looked.host.is_some();
                looked.host.get_or_insert(value);
            } else if name == CONTENT_LENGTH {
                looked.content_length.get_or_insert(value);
            } else if name == TRANSFER_ENCODING {
                looked.transfer_encoding = true;
            } else if name == X_CACHE_ID {
                looked.cache_id.get_or_insert(value);
            }
        }
        looked
    }
}

/// A `Host` of letters, digits, dots and hyphens, then at most one `:` and digits: the usual
/// name or IPv4 address, seen without a copy. Every such value is one `Authority::try_from`
/// accepts (held by `plain_hosts_are_authorities`); the rest go to it.
fn is_plain_host(host: &[u8]) -> bool {
    let (name, port) = match host.iter().position(|&b| b == b':') {
        Some(i) => (&host[..i], &host[i + 1..]),
        None => (host, &b""[..]),
    };
    !name.is_empty()
        && name.iter().all(|&b| HOST_NAME_BYTE[b as usize])
        && port.iter().all(u8::is_ascii_digit)
}

/// The bytes of a plain host name: letters, digits, dots and hyphens. (A table: one look a
/// byte, where three tests on every byte, or a table of byte classes, took more.)
const HOST_NAME_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'.' || c == b'-';
        b += 1;
    }
    t
};

/// Loopback, including an IPv4 loopback address seen through an IPv6 socket (`::ffff:127.0.0.1`).
pub fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// Joins every existing `X-Forwarded-For` value and appends `ip`, as nginx's
/// `$proxy_add_x_forwarded_for` does: the chain is kept, never replaced.
fn append_forwarded_for(headers: &mut HeaderMap, client: &HeaderValue) {
    // One hash: a client with none (the usual case) gets its entry where the look found room.
    let mut chained = match headers.entry(X_FORWARDED_FOR) {
        Entry::Vacant(v) => {
            v.insert(client.clone());
            return;
        }
        Entry::Occupied(o) => o,
    };
    let mut chain: Vec<u8> = Vec::new();
    for v in chained.iter() {
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
        chained.insert(v);
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

    /// A response head with `headers`, in order.
    fn response_head(headers: &[(&str, &str)]) -> http::response::Parts {
        let mut parts = http::Response::new(()).into_parts().0;
        for (name, value) in headers {
            let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) else {
                panic!("a bad test header {name}: {value}");
            };
            parts.headers.append(name, value);
        }
        parts
    }

    #[test]
    fn hop_by_hop_and_connection_named_headers_are_stripped_from_responses() {
        let mut resp = response_head(&[
            ("connection", "keep-alive, x-internal"),
            ("keep-alive", "timeout=5"),
            ("x-internal", "1"),
            ("transfer-encoding", "chunked"),
            ("content-type", "application/fhir+json"),
        ]);
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
    fn connection_close_strips_a_header_named_close_and_a_named_transfer_encoding_keeps_its_length()
    {
        let mut resp = response_head(&[
            ("connection", "Keep-Alive"),
            ("connection", "close, transfer-encoding"),
            ("close", "x"),
            ("transfer-encoding", "chunked"),
            ("content-length", "5"),
            ("server", "nginx"),
        ]);
        prepare_response(&mut resp);
        // Named by `Connection`, `Transfer-Encoding` went as an option: its Content-Length stays,
        // as it did when every named header was collected first.
        let left: Vec<&str> = resp.headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(left, ["content-length", "server"]);
    }

    /// The removal as it was before it looked at each name once: every header `Connection`
    /// names, then `Transfer-Encoding` (with `Content-Length`), then all seven.
    fn strip_by_removing_all(headers: &mut HeaderMap) {
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
        if headers.remove(TRANSFER_ENCODING).is_some() {
            headers.remove(CONTENT_LENGTH);
        }
        for name in HOP_BY_HOP {
            headers.remove(name);
        }
    }

    proptest::proptest! {
        #[test]
        fn stripping_removes_exactly_what_removing_every_hop_by_hop_header_did(
            lines in proptest::collection::vec((0usize..12, 0usize..12, 0usize..12), 0..10)
        ) {
            const NAMES: [&str; 12] = [
                "connection", "keep-alive", "proxy-connection", "te", "trailer",
                "transfer-encoding", "upgrade", "host", "content-length", "close", "x-internal",
                "content-type",
            ];
            const TOKENS: [&str; 12] = [
                "keep-alive", "Keep-Alive", "close", "CLOSE", "x-internal", "transfer-encoding",
                "host", "content-length", "te", "connection", " upgrade ", "bad token",
            ];
            let mut headers = HeaderMap::new();
            for (n, a, b) in lines {
                let value = if NAMES[n] == "connection" {
                    format!("{}, {}", TOKENS[a], TOKENS[b])
                } else {
                    format!("v{a}")
                };
                headers.append(NAMES[n], HeaderValue::from_str(&value).unwrap_or(HeaderValue::from_static("v")));
            }
            let mut expected = headers.clone();
            strip_by_removing_all(&mut expected);
            strip_hop_by_hop(&mut headers);
            proptest::prop_assert_eq!(headers, expected);
        }
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
    fn the_next_client_shares_the_entry_only_from_the_same_address() {
        // spec: EDGE-1
        let first = addr("203.0.113.7:40000");
        for (next, entry) in [
            ("203.0.113.7:40001", "203.0.113.7"),
            ("198.51.100.2:40000", "198.51.100.2"),
        ] {
            let mut p = parts(Request::get("/"));
            let peer = first.next(next.parse().unwrap_or_else(|_| panic!("{next}")));
            prepare_request(&mut p, &peer);
            assert_eq!(values(&p.headers, &X_FORWARDED_FOR), [entry]);
            assert_eq!(peer.addr.to_string(), next);
        }
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

    proptest::proptest! {
        /// The shortcut is only a shortcut: whatever it passes, `http`'s parser passes.
        #[test]
        fn plain_hosts_are_authorities(host in proptest::prop_oneof![
            "[a-zA-Z0-9.:@\\[\\]%/?#_~ -]{0,12}",
            // Mostly plain: the near misses (`@`, a second `:`) come often.
            "[a-z0-9.@:-]{1,10}",
        ]) {
            if is_plain_host(host.as_bytes()) {
                let parsed = http::uri::Authority::try_from(host.as_bytes());
                proptest::prop_assert!(parsed.is_ok_and(|a| !a.as_str().contains('@')), "{host}");
            }
        }

        /// The table takes exactly what the tests on each byte took.
        #[test]
        fn the_host_table_takes_what_the_tests_took(host in "[a-zA-Z0-9.:@_\\[\\]-]{0,10}") {
            let split = |host: &[u8]| {
                let (name, port) = match host.iter().position(|&b| b == b':') {
                    Some(i) => (&host[..i], &host[i + 1..]),
                    None => (host, &b""[..]),
                };
                !name.is_empty()
                    && name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
                    && port.iter().all(u8::is_ascii_digit)
            };
            proptest::prop_assert_eq!(is_plain_host(host.as_bytes()), split(host.as_bytes()), "{}", host);
        }

        #[test]
        fn plain_host_shapes_pass_the_shortcut(
            name in "[a-z0-9.-]{1,20}",
            port in proptest::option::of("[0-9]{0,6}"),
        ) {
            let host = match port {
                Some(p) => format!("{name}:{p}"),
                None => name,
            };
            proptest::prop_assert!(is_plain_host(host.as_bytes()));
            proptest::prop_assert!(http::uri::Authority::try_from(host.as_bytes()).is_ok());
        }
    }

    proptest::proptest! {
        /// The one pass finds what a lookup of each name finds.
        #[test]
        fn the_look_finds_what_the_lookups_find(
            lines in proptest::collection::vec((0usize..6, 0u8..3), 0..8)
        ) {
            const NAMES: [&str; 6] =
                ["host", "content-length", "transfer-encoding", "x-cache-id", "accept", "te"];
            let mut headers = HeaderMap::new();
            for (n, v) in lines {
                headers.append(NAMES[n], HeaderValue::from(u16::from(v)));
            }
            let looked = Looked::of(&headers);
            proptest::prop_assert_eq!(looked.host, headers.get(HOST));
            proptest::prop_assert_eq!(looked.more_hosts, headers.get_all(HOST).iter().count() > 1);
            proptest::prop_assert_eq!(looked.content_length, headers.get(CONTENT_LENGTH));
            proptest::prop_assert_eq!(
                looked.transfer_encoding,
                headers.contains_key(TRANSFER_ENCODING)
            );
            proptest::prop_assert_eq!(looked.cache_id, headers.get(X_CACHE_ID));
        }
    }

    #[test]
    fn hop_by_hop_names_by_their_place() {
        for (i, name) in HOP_BY_HOP.into_iter().enumerate() {
            assert_eq!(hop_by_hop(i), name);
        }
        assert_eq!(HOP_BY_HOP[CONNECTION_AT], CONNECTION);
        assert_eq!(HOP_BY_HOP[TRANSFER_ENCODING_AT], TRANSFER_ENCODING);
    }

    #[test]
    fn expect_is_not_passed_on() {
        let mut p = parts(Request::post("/").header("expect", "100-continue"));
        prepare_request(&mut p, &addr("127.0.0.1:1"));
        assert!(!p.headers.contains_key(EXPECT));
    }
}
