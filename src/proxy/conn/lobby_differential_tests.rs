//! The lobby's head reader (the codec's `http1::request_head::check`, then `lobby::whole_request`)
//! against hyper's server (`server_builder`, as the listener sets it up), fed the same generated
//! request bytes, valid and hostile, split at random read boundaries: they agree on whether the
//! head is refused and with which status (`400`, `414`, `431`), and, for a head both take, on
//! the method, the target, the version, the `Host` and `Content-Length` lines, the transfer
//! coding, the `x-cache-id` value, the body's framing and whether hyper reads on after it; for
//! a request the lobby admits, on what routing reads (`RequestHead`) and on the route found
//! (the service's own routing, `pipeline::routed`, on hyper's parts). That agreement is what
//! lets the service take the lobby's route and admission instead of routing again.
//!
//! The deliberate differences, with their reason:
//!
//! 1. A head over `headerMaxKB` is refused (`431`) by the lobby however its bytes arrive, and
//!    one still partial when its bytes reach it as soon as it holds that much (DEC-31). hyper's
//!    `max_buf_size` bounds its buffer, not the head: by how the reads fall it refuses such a
//!    head, or takes it (found by the fuzzing), or refuses a head a read short of it. So a head
//!    within a read of the limit is not compared on its status, and one over it that hyper
//!    takes is the lobby's `431`.
//! 2. A `Content-Length` over hyper's largest (2^64 - 3) but not over 2^64 - 1 is the lobby's
//!    `400` ("the Content-Length is malformed", as one that overflows is for both); hyper answers
//!    those few values `431`, as if a header were too large. Both refuse; the status differs.
//! 3. A head malformed before its end is refused by the lobby as soon as the bad byte is read;
//!    hyper, after a read that left a head partial, parses again only once a head's end (an
//!    empty line) has arrived (`is_complete_fast`), so it refuses the same head once it is
//!    whole, and never answers one cut short. Held to it: such a head, completed, is refused by
//!    hyper too.
//!
//! Everything runs on a paused clock over an in-memory duplex: "hyper has read all it was given
//! and waits for more" is told by a timer that fires only when nothing else can run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::header::{CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::hyper_phase::server_builder;
use super::lobby::whole_request;
use crate::proxy::forward::differential_tests::run;
use crate::proxy::forward::{Looked, X_CACHE_ID};
use crate::proxy::http1::request_head::{check, Check, Refused};
use crate::proxy::pipeline::routed;
use crate::proxy::route::{Route, TxDemand};

/// `headerMaxKB`'s default, in bytes.
pub(crate) const MAX_HEAD: usize = 32 * 1024;

/// Generated request bytes and where they are split into reads.
#[derive(Clone, Debug)]
pub(crate) struct Case {
    pub bytes: Vec<u8>,
    pub splits: Vec<usize>,
}

impl Case {
    /// The reads, in order.
    pub(crate) fn pieces(&self) -> Vec<&[u8]> {
        let mut at: Vec<usize> = self
            .splits
            .iter()
            .map(|s| s % (self.bytes.len() + 1))
            .collect();
        at.sort_unstable();
        at.dedup();
        let mut out = Vec::new();
        let mut from = 0;
        for a in at.into_iter().chain([self.bytes.len()]) {
            if a > from {
                out.push(&self.bytes[from..a]);
                from = a;
            }
        }
        out
    }
}

/// A head as hyper's service would see it, and as the lobby reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    method: String,
    target: String,
    http_10: bool,
    hosts: usize,
    lengths: usize,
    transfer_encoding: bool,
    cache_id: Option<Vec<u8>>,
}

/// What became of the bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Not a whole head yet: more is waited for.
    Partial,
    /// Refused with this status.
    Refused(u16),
    Taken(Seen),
}

fn status_of(why: Refused) -> u16 {
    match why {
        Refused::Bad(_) => 400,
        Refused::TooManyHeaders => 431,
        Refused::TargetTooLong => 414,
    }
}

/// The lobby's reading: each read appended, the head checked after each (as `lobby::enter`),
/// until it is whole, refused, or at `MAX_HEAD` bytes. With what the lobby would admit.
pub(crate) fn lobby(c: &Case) -> (Outcome, Option<Admitted>) {
    let mut buf = Vec::new();
    for piece in c.pieces() {
        buf.extend_from_slice(piece);
        let parsed = check(&buf);
        if parsed == Check::Partial && buf.len() < MAX_HEAD {
            continue;
        }
        let t = match parsed {
            Check::Partial => return (Outcome::Refused(431), None),
            Check::Taken(t) if t.len > MAX_HEAD => return (Outcome::Refused(431), None),
            Check::Refused(why) => return (Outcome::Refused(status_of(why)), None),
            Check::Taken(t) => t,
        };
        let r = t.route;
        let text = |(a, b): (usize, usize)| String::from_utf8_lossy(&buf[a..b]).into_owned();
        let seen = Seen {
            method: text(r.method),
            // As hyper shows its `Uri` of the same bytes (`http://a:8080` is `http://a:8080/`).
            target: http::Uri::try_from(text(r.target)).map_or(text(r.target), |u| u.to_string()),
            http_10: r.http_10,
            hosts: usize::from(r.hosts),
            lengths: usize::from(r.lengths),
            transfer_encoding: r.transfer_encoding,
            cache_id: r.cache_id.map(|(a, b)| buf[a..b].to_vec()),
        };
        let admitted = whole_request(&buf, &t).map(|h| Admitted {
            method: h.method.to_string(),
            target: h.target.to_string(),
            cache_id: h.cache_id.map(<[u8]>::to_vec),
            content_length: h.content_length,
            // As `lobby::enter` routes it.
            route: match front().route(&h.as_route()) {
                Ok(Route::Tx(demand)) => Some(Some(demand)),
                Ok(Route::Master) => Some(None),
                Err(_) => None,
            },
        });
        return (Outcome::Taken(seen), admitted);
    }
    (Outcome::Partial, None)
}

/// What routing reads of a request (`RequestHead`), as the lobby found it or as the service
/// finds it in hyper's parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Admitted {
    method: String,
    target: String,
    cache_id: Option<Vec<u8>>,
    content_length: Option<u64>,
    /// The route found: a tx request's demand (its target, lane, whether it counts), `None` for
    /// the master's paths; `None` outside for a target refused. The service takes the lobby's
    /// (`pipeline::route`), so it must be the one its own routing would find.
    route: Option<Option<TxDemand>>,
}

/// A front to route by: a master and two tx-workers (`tx1`, `tx2`, the cache-ids' prefixes).
fn front() -> Arc<crate::proxy::front::Front> {
    crate::proxy::front::test_front(2)
}

/// What hyper's service was given.
#[derive(Clone, Debug)]
struct Called {
    seen: Seen,
    /// As `pipeline::route` reads it, for an origin-form target.
    routed: Admitted,
}

fn called(parts: &http::request::Parts) -> Called {
    let h = &parts.headers;
    let target = parts
        .uri
        .path_and_query()
        .map_or(String::new(), |p| p.as_str().to_string());
    let content_length = if h.contains_key(TRANSFER_ENCODING) {
        None
    } else {
        h.get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
    };
    let cache_id = h.get(X_CACHE_ID).map(|v| v.as_bytes().to_vec());
    Called {
        seen: Seen {
            method: parts.method.to_string(),
            target: parts.uri.to_string(),
            http_10: parts.version == http::Version::HTTP_10,
            hosts: h.get_all(HOST).iter().count(),
            lengths: h.get_all(CONTENT_LENGTH).iter().count(),
            transfer_encoding: h.contains_key(TRANSFER_ENCODING),
            cache_id: cache_id.clone(),
        },
        routed: Admitted {
            method: parts.method.to_string(),
            target,
            route: routed(&front(), parts, &Looked::of(h)).ok(),
            cache_id,
            content_length,
        },
    }
}

/// Long enough that hyper has done all it can with what it was given.
const IDLE: Duration = Duration::from_secs(5);

/// hyper's reading of the same reads.
async fn hyper(c: &Case) -> (Outcome, Option<Called>) {
    let (mut client, server) = tokio::io::duplex(256 * 1024);
    let got: Arc<Mutex<Option<Called>>> = Arc::default();
    let seen = got.clone();
    let svc = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
        let (parts, body) = req.into_parts();
        *seen.lock().unwrap() = Some(called(&parts));
        // As the service answers: `CONNECT` is refused (`501`), so hyper never switches.
        let mut resp = http::Response::new(String::new());
        if crate::proxy::forward::is_unsupported(&parts) {
            *resp.status_mut() = http::StatusCode::NOT_IMPLEMENTED;
        }
        async move {
            // The body read first, as the service reads it (hyper closes a connection whose
            // request body was left unread when its answer ended).
            let _ = http_body_util::BodyExt::collect(body).await;
            Ok::<_, std::convert::Infallible>(resp)
        }
    });
    let conn = server_builder(MAX_HEAD).serve_connection(hyper_util::rt::TokioIo::new(server), svc);
    let task = tokio::spawn(conn);
    for piece in c.pieces() {
        if client.write_all(piece).await.is_err() {
            break;
        }
        // The scenario: each piece arrives as a read of its own (the split under test), not a
        // wait for a state.
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let mut out = Vec::new();
    // Reads what hyper writes until it closes or has nothing more to say for a while.
    loop {
        let mut chunk = [0u8; 4096];
        match tokio::time::timeout(IDLE, client.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => out.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    drop(client);
    let _ = tokio::time::timeout(IDLE, task).await;
    let call = got.lock().unwrap().take();
    let status = std::str::from_utf8(out.get(9..12).unwrap_or_default())
        .ok()
        .and_then(|s| s.parse::<u16>().ok());
    let outcome = match (&call, status) {
        (Some(c), _) => Outcome::Taken(c.seen.clone()),
        (None, Some(s)) => Outcome::Refused(s),
        (None, None) => Outcome::Partial,
    };
    (outcome, call)
}

/// Holds the lobby to hyper on `c`: panics with both readings where they differ.
pub(crate) fn compare(c: &Case) {
    let (mine, admitted) = lobby(c);
    let (theirs, call) = run(hyper(c));
    let text = short(&format!(
        "{:?} split at {:?}",
        String::from_utf8_lossy(&c.bytes),
        c.splits
    ));
    let near_limit = c.bytes.len() + 8192 >= MAX_HEAD;
    match (&mine, &theirs) {
        // Difference 1: both refuse a head at the limit; the status may differ.
        (Outcome::Refused(a), Outcome::Refused(b)) if near_limit => {
            assert!(a / 100 == 4 && b / 100 == 4, "{a} / {b} for {text}");
        }
        (Outcome::Refused(431), Outcome::Partial) if near_limit => {}
        (Outcome::Refused(431), Outcome::Taken(_)) if c.bytes.len() > MAX_HEAD => {}
        // Difference 3: hyper refuses it once it is whole.
        (Outcome::Refused(_), Outcome::Partial) => {
            let mut whole = c.clone();
            whole.bytes.extend_from_slice(b"\r\n\r\n");
            let (completed, _) = run(hyper(&whole));
            assert!(
                matches!(completed, Outcome::Refused(s) if s / 100 == 4),
                "refused by the lobby, and by hyper once whole: {completed:?} for {text}"
            );
        }
        // Difference 2.
        (Outcome::Refused(400), Outcome::Refused(431)) if length_over_hypers(&c.bytes) => {}
        _ => assert_eq!(mine, theirs, "lobby / hyper for {text}"),
    }
    if let (Some(a), Some(call)) = (admitted, call) {
        assert_eq!(
            a, call.routed,
            "what routing reads, lobby / hyper, for {text}"
        );
    }
}

/// A `Content-Length` in (2^64 - 3, 2^64 - 1]: difference 2.
fn length_over_hypers(bytes: &[u8]) -> bool {
    String::from_utf8_lossy(bytes).lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.strip_prefix("content-length:")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|n| n > u64::MAX - 2)
    })
}

fn short(s: &str) -> String {
    s.chars().take(600).collect()
}

fn pick(options: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::sample::select(options).prop_map(str::to_string)
}

fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => pick(&["GET", "POST", "HEAD"]),
        2 => pick(&["OPTIONS", "PUT", "DELETE", "PATCH", "CONNECT", "M-SEARCH", "get"]),
        1 => pick(&["G(T", "", "GET\x00", "G\u{e9}T"]),
    ]
}

fn target() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => pick(&[
            "/r4/metadata",
            "/r4/ValueSet/$expand?url=x",
            "/r4/CodeSystem/$validate-code?code=a%20b",
            "/",
        ]),
        3 => pick(&[
            "*",
            "http://a/r4/metadata",
            "http://a:8080",
            "a.example:443",
            "//x",
            "/?",
            "/r4/x#frag",
            "/{|}^`\\",
            "/%zz",
            "/\u{e9}",
        ]),
        2 => pick(&["/a b", "/q=\"x\"", "/q=<x>", "/a\x7fb", "/a\tb", ""]),
        1 => (65_530usize..65_540).prop_map(|n| format!("/{}", "a".repeat(n))),
    ]
}

fn version() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => pick(&["HTTP/1.1", "HTTP/1.0"]),
        1 => pick(&["HTTP/1.2", "http/1.1", "HTTP/2.0", "HTTP/1.1 ", "HTTP/1", ""]),
    ]
}

fn header() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => pick(&["Host: a", "host:a", "Host: a:8080", "Host: b"]),
        6 => pick(&[
            "X-Cache-Id: tx1-7",
            "x-cache-id:  tx2-3 \t",
            "X-Cache-Id:",
            "X-CACHE-ID: a b",
            "X-Cache-Id: caf\u{e9}",
        ]),
        5 => pick(&[
            "Content-Length: 0",
            "Content-Length: 5",
            "Content-Length: 5, 5",
            "Content-Length: x",
            "Content-Length: +5",
            "Content-Length: 99999999999999999999",
            "Content-Length:  5 ",
            "content-length: 18446744073709551614",
        ]),
        4 => pick(&[
            "Transfer-Encoding: chunked",
            "Transfer-Encoding: gzip",
            "Transfer-Encoding: gzip, chunked",
            "transfer-encoding: CHUNKED",
        ]),
        4 => pick(&[
            "Connection: close",
            "Connection: keep-alive",
            "Connection: Keep-Alive, close",
            "Upgrade: websocket",
        ]),
        3 => pick(&[
            "Accept: application/fhir+json",
            "X-A:v",
            "X-A: v\x00",
            "X-A: v\x7f",
            "X-A: \u{80}\u{ff}",
            "Bad Name: v",
            ":novalue",
            " folded: x",
            "X-A: v\r",
            "Host",
        ]),
        1 => (8_000usize..33_000).prop_map(|n| format!("X-Long: {}", "a".repeat(n))),
    ]
}

/// Request bytes: a request line, headers, the blank line and maybe a body, sometimes with bare
/// LFs, empty lines before, many headers, or cut short.
pub(crate) fn case() -> impl Strategy<Value = Case> {
    let line = (method(), target(), version(), prop::bool::weighted(0.05)).prop_map(
        |(m, t, v, two_spaces)| {
            let sp = if two_spaces { "  " } else { " " };
            format!("{m}{sp}{t}{sp}{v}")
        },
    );
    let many = prop_oneof![
        20 => Just(0usize),
        1 => Just(99usize),
        1 => Just(100usize),
        1 => Just(101usize),
    ];
    let body = pick(&[
        "",
        "",
        "abcde",
        "5\r\nabcde\r\n0\r\n\r\n",
        "0\r\n\r\n",
        "abc",
    ]);
    (
        line,
        prop::collection::vec(header(), 0..7),
        many,
        prop::bool::weighted(0.9),
        prop::bool::weighted(0.05),
        body,
        prop::bool::weighted(0.1),
        prop::collection::vec(any::<usize>(), 0..5),
    )
        .prop_map(|(line, headers, many, crlf, leading, body, cut, splits)| {
            let eol = if crlf { "\r\n" } else { "\n" };
            let mut s = String::new();
            if leading {
                s.push_str(eol);
            }
            s.push_str(&line);
            s.push_str(eol);
            for h in &headers {
                s.push_str(h);
                s.push_str(eol);
            }
            for i in 0..many {
                s.push_str(&format!("X-{i}: v{eol}"));
            }
            s.push_str(eol);
            s.push_str(&body);
            let mut bytes = s.into_bytes();
            if cut {
                let keep = splits.first().map_or(0, |k| k % (bytes.len() + 1));
                bytes.truncate(keep);
            }
            Case { bytes, splits }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_lobby_reads_heads_as_hyper_does(c in case()) {
        // spec: DEC-55: the route the service takes from the lobby is the one it would find.
        compare(&c);
    }
}

#[test]
fn fixed_cases_of_each_kind_agree() {
    // spec: DEC-31, DEC-38
    for raw in [
        "GET /r4/metadata HTTP/1.1\r\nHost: a\r\nX-Cache-Id:  tx1-7 \t\r\n\r\n",
        "POST /r4/x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nabcde",
        "POST /r4/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "GET /r4/metadata?q=\"x\" HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET /r4/metadata HTTP/1.0\r\n\r\n",
        "GET /r4/metadata HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        "GET http://a/r4/metadata HTTP/1.1\r\nHost: a\r\n\r\n",
    ] {
        for split in [0, 1, 5, 17, 40] {
            let c = Case {
                bytes: raw.as_bytes().to_vec(),
                splits: vec![split],
            };
            compare(&c);
        }
    }
}
