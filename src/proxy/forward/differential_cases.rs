//! The cases of the differential test (`differential_tests.rs`): what a process writes, valid
//! and hostile, and what is asked of it. One or two requests on one connection (a second only
//! when the first left it reusable: keep-alive), each a `GET`, a `HEAD`, or a `POST` whose body
//! has a length or is streamed chunked; each answered by a generated response: status lines
//! with and without a reason phrase, with obs-text in it, interim `1xx` heads before the final
//! one, `101`, `Content-Length` lists and repeats, chunked bodies (some malformed), bodies over
//! the 64 KB read cap, heads over it, stray bytes after the last response; written split at
//! random points, or the heads a byte or three at a time (a slow process). Also here: the two
//! rewritings of hyper's outcome that the test's deliberate differences 4 and 7 need.

use http::header::CONTENT_LENGTH;
use http::{HeaderMap, HeaderValue, Method, Request};
use proptest::prelude::*;

use super::super::test_support::Repeat;

/// Final status lines, some after interim heads (`\r\n` is the line end, replaced by `\n` in a
/// bare-LF case).
pub const STATUS_LINES: &[&[u8]] = &[
    b"HTTP/1.1 200 OK",
    b"HTTP/1.0 200 OK",
    b"HTTP/1.1 204 No Content",
    b"HTTP/1.1 304 Not Modified",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK",
    b"HTTP/1.1 404 Not Found",
    b"HTTP/1.1 200 Fine Thanks",
    b"HTTP/1.1 101 Switching Protocols",
    b"HTTP/1.1 20 OK",
    b"HTTP/2.0 200 OK",
    b"HTTP/1.1 200OK",
    b"http/1.1 200 OK",
    // No reason phrase (RFC 9112 §4 makes it optional), with and without its space.
    b"HTTP/1.1 200",
    b"HTTP/1.1 200 ",
    b"HTTP/1.1 299",
    b"HTTP/1.0 404",
    // obs-text: UTF-8 as Node writes a statusMessage, and bytes that are no UTF-8.
    b"HTTP/1.1 404 N\xc3\xa3o encontrado",
    b"HTTP/1.1 200 \xff\xfeOK",
    b"HTTP/1.1 200 OK\tfine",
    b"HTTP/1.1 200 O\x01K",
    // Interim heads, with headers and without reasons, before the final one.
    b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK",
    b"HTTP/1.1 100\r\n\r\nHTTP/1.1 102\r\n\r\nHTTP/1.1 201",
    b"HTTP/1.1 101",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c",
];

/// Whether a `STATUS_LINES` entry's final head is a `101`.
pub fn switches(status: usize) -> bool {
    final_line(STATUS_LINES[status]).starts_with(b"HTTP/1.1 101")
}

/// The last line of a `STATUS_LINES` entry: the final head's status line.
pub fn final_line(s: &[u8]) -> &[u8] {
    let mut at = 0;
    while let Some(i) = s[at..].windows(4).position(|w| w == b"\r\n\r\n") {
        at += i + 4;
    }
    let line = &s[at..];
    let end = line.windows(2).position(|w| w == b"\r\n");
    &line[..end.unwrap_or(line.len())]
}

/// Header lines; `{n}` is the body's length, `{big}` 70,000 bytes (a head over the read cap).
pub const HEADERS: &[&str] = &[
    "Content-Length: {n}",
    "Content-Length: {n}",
    "Content-Length: {n}",
    "Content-Length: 3",
    "Content-Length: {n}, {n}",
    "Content-Length: 1, 2",
    "Content-Length: abc",
    "Content-Length: 99999999999999999999",
    "Transfer-Encoding: chunked",
    "Transfer-Encoding: chunked",
    "Transfer-Encoding: gzip",
    "Connection: close",
    "Connection: keep-alive",
    "X-Cache-Id: abc",
    "Content-Type: application/fhir+json",
    "Bad Name: v",
    " folded continuation",
    "X-Ctl: a\u{1}b",
    "Keep-Alive: timeout=5",
    "Content-Length: {n},{n},{n}",
    "X-Name: N\u{e3}o",
    "X-Big: {big}",
    // Hop-by-hop lines (RFC 9110 §7.6.1), which ours leaves out as it reads the head, and lines
    // that go on as they came however many.
    "Connection: keep-alive, X-Hop",
    "X-Hop: 1",
    "Close: x",
    "connection: Transfer-Encoding",
    "Upgrade: h2c",
    "TE: trailers",
    "Set-Cookie: a=1",
    "Vary: Accept, Origin",
    "x-powered-by: Express",
    "Proxy-Connection: keep-alive",
];

/// How a chunked body is written (some malformed).
pub const CHUNK_STYLES: usize = 7;

fn chunked(body: &[u8], cuts: &[usize], style: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut sizes: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
    sizes.push(body.len());
    sizes.sort_unstable();
    for end in sizes {
        if end <= at {
            continue;
        }
        let ext = if style == 1 { ";name=val" } else { "" };
        out.extend_from_slice(format!("{:x}{ext}\r\n", end - at).as_bytes());
        out.extend_from_slice(&body[at..end]);
        out.extend_from_slice(if style == 2 { b"\n" } else { b"\r\n" });
        at = end;
    }
    match style {
        3 => out.extend_from_slice(b"0\r\nx-trailer: 1\r\n\r\n"),
        4 => out.extend_from_slice(b"ffffffffffffffffff\r\n"),
        5 => out.extend_from_slice(b"zz\r\n"),
        6 => out.extend_from_slice(b"FFFFFFFF\r\nabc"),
        _ => out.extend_from_slice(b"0\r\n\r\n"),
    }
    out
}

/// One generated response.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: usize,
    pub headers: Vec<usize>,
    pub lf_only: bool,
    pub body: Vec<u8>,
    pub chunk_style: usize,
    pub chunk_cuts: Vec<usize>,
}

/// One request, its body made of `x` (so a chunked one's end is plain to see).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Req {
    Get,
    Head,
    /// A body of this many bytes with a `Content-Length`.
    Post(usize),
    /// This many chunks of 700 bytes, chunked (no size known).
    PostStreamed(usize),
}

impl Req {
    pub fn method(self) -> Method {
        match self {
            Req::Get => Method::GET,
            Req::Head => Method::HEAD,
            Req::Post(_) | Req::PostStreamed(_) => Method::POST,
        }
    }

    pub fn request(self) -> Request<Repeat> {
        let body = match self {
            Req::Get | Req::Head => Repeat::new(0, 0),
            Req::Post(n) => Repeat::new(n, 1),
            Req::PostStreamed(count) => Repeat {
                chunked: true,
                ..Repeat::new(700, count)
            },
        };
        let mut req = Request::new(body);
        *req.method_mut() = self.method();
        *req.uri_mut() = http::Uri::from_static("/r4/metadata");
        req
    }
}

/// What a process writes and is asked, on one connection.
#[derive(Debug, Clone)]
pub struct Case {
    pub resps: Vec<Resp>,
    /// One per response: the `i`th request is answered by the `i`th response.
    pub reqs: Vec<Req>,
    /// A stray response after the last one.
    pub junk_after: bool,
    pub splits: Vec<usize>,
    /// The heads written a byte or three at a time.
    pub trickle: bool,
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => prop::collection::vec(any::<u8>(), 0..300),
        // Over the 64 KB read cap (each read's slice is at most that).
        1 => (65_000usize..140_000, any::<u8>())
            .prop_map(|(n, seed)| (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()),
    ]
}

/// Status lines a connection may be kept after (valid, HTTP/1.1), with and without reasons.
const KEEPABLE_STATUS: &[usize] = &[0, 4, 5, 6, 12, 13, 14, 16, 17, 18, 20, 21];

/// Header lines that keep a framing by length (plain or a list) valid.
const KEEPABLE_HEADERS: &[usize] = &[4, 12, 13, 14, 18, 19, 20, 22, 23, 28, 29, 30];

fn resp() -> impl Strategy<Value = Resp> {
    // Half hostile (anything), half a response a connection may be kept after, so that a second
    // request is often written on the connection.
    let status = prop_oneof![0..STATUS_LINES.len(), prop::sample::select(KEEPABLE_STATUS),];
    let headers = prop_oneof![
        prop::collection::vec(0..HEADERS.len(), 0..4),
        (
            prop::sample::select(&[0, 8][..]),
            prop::collection::vec(prop::sample::select(KEEPABLE_HEADERS), 0..3)
        )
            .prop_map(|(framing, mut h)| {
                // Chunked alone, or a length then the others.
                if framing == 8 {
                    h.retain(|&l| !HEADERS[l].starts_with("Content-Length"));
                }
                h.insert(0, framing);
                h
            }),
    ];
    (
        status,
        headers,
        prop::bool::weighted(0.1),
        body(),
        0..CHUNK_STYLES * 2,
        prop::collection::vec(any::<usize>(), 0..4),
    )
        .prop_map(
            |(status, headers, lf_only, body, chunk_style, chunk_cuts)| Resp {
                status,
                headers,
                lf_only,
                body,
                // Half the chunked bodies well formed.
                chunk_style: chunk_style.saturating_sub(CHUNK_STYLES),
                chunk_cuts,
            },
        )
}

fn req() -> impl Strategy<Value = Req> {
    prop_oneof![
        6 => Just(Req::Get),
        1 => Just(Req::Head),
        2 => (1usize..3000).prop_map(Req::Post),
        1 => Just(Req::Post(70_000)),
        1 => (1usize..4).prop_map(Req::PostStreamed),
    ]
}

pub fn case() -> impl Strategy<Value = Case> {
    (
        prop_oneof![
            1 => prop::collection::vec((resp(), req()), 1),
            3 => prop::collection::vec((resp(), req()), 2),
        ],
        prop::bool::weighted(0.1),
        prop::collection::vec(any::<usize>(), 0..6),
        prop::bool::weighted(0.15),
    )
        .prop_map(|(pairs, junk_after, splits, trickle)| {
            let (resps, reqs) = pairs.into_iter().unzip();
            Case {
                resps,
                reqs,
                junk_after,
                splits,
                trickle,
            }
        })
}

fn replace(s: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut at = 0;
    while at < s.len() {
        if s[at..].starts_with(from) {
            out.extend_from_slice(to);
            at += from.len();
        } else {
            out.push(s[at]);
            at += 1;
        }
    }
    out
}

impl Resp {
    /// The head's bytes, and the body's as written.
    fn bytes(&self) -> (Vec<u8>, Vec<u8>) {
        let eol: &[u8] = if self.lf_only { b"\n" } else { b"\r\n" };
        let n = self.body.len().to_string();
        let mut head = replace(STATUS_LINES[self.status], b"\r\n", eol);
        head.extend_from_slice(eol);
        let mut is_chunked = false;
        for &h in &self.headers {
            let line = HEADERS[h]
                .replace("{n}", &n)
                .replace("{big}", &"b".repeat(70_000));
            is_chunked |= line == "Transfer-Encoding: chunked";
            head.extend_from_slice(line.as_bytes());
            head.extend_from_slice(eol);
        }
        head.extend_from_slice(eol);
        let body = if is_chunked {
            chunked(&self.body, &self.chunk_cuts, self.chunk_style)
        } else {
            self.body.clone()
        };
        (head, body)
    }

    /// Both `Transfer-Encoding: chunked` and a `Content-Length` (a deliberate difference).
    pub fn te_and_cl(&self) -> bool {
        let has = |p: &str| self.headers.iter().any(|&h| HEADERS[h].starts_with(p));
        has("Transfer-Encoding: chunked") && has("Content-Length")
    }

    /// Bytes written after the response's framed end, by RFC 9112 §6.3: a body on a `204`,
    /// `304` or a `HEAD`'s answer, or more than its `Content-Length`. (Approximate where the
    /// head is refused anyway.)
    fn overruns(&self, req: Req) -> bool {
        let line = final_line(STATUS_LINES[self.status]);
        let bodiless = matches!(line.get(9..12), Some(b"204" | b"304")) || req == Req::Head;
        let written = self.bytes().1.len();
        if bodiless {
            return written > 0;
        }
        let lines = || self.headers.iter().map(|&h| HEADERS[h]);
        if lines().any(|l| l.starts_with("Transfer-Encoding")) {
            return false;
        }
        let n = self.body.len().to_string();
        let length = lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .map(|v| v.replace("{n}", &n))
            .and_then(|v| {
                v.split(',')
                    .next()
                    .and_then(|f| f.trim().parse::<usize>().ok())
            });
        length.is_some_and(|l| written > l)
    }

    /// A head over the read cap (the 70 KB header).
    pub fn too_large(&self) -> bool {
        self.headers.iter().any(|&h| HEADERS[h].contains("{big}"))
    }

    /// The final status line's reason phrase, as written.
    pub fn reason(&self) -> &[u8] {
        final_line(STATUS_LINES[self.status])
            .get(13..)
            .unwrap_or(&[])
    }
}

impl Case {
    /// The requests and the responses' bytes as written (the first 2,000), for a failure's text.
    pub fn text(&self) -> String {
        let all: Vec<u8> = (0..self.resps.len()).flat_map(|i| self.all(i)).collect();
        let s: String = String::from_utf8_lossy(&all).chars().take(2000).collect();
        format!("{:?} {s:?}", self.reqs)
    }

    /// Whether the process writes anything after response `i`'s framed end: more than its
    /// framing says, or the stray response after the last.
    pub fn stray_after(&self, i: usize) -> bool {
        (self.junk_after && i + 1 == self.resps.len()) || self.resps[i].overruns(self.reqs[i])
    }

    fn all(&self, i: usize) -> Vec<u8> {
        let (mut out, body) = self.resps[i].bytes();
        out.extend(body);
        if self.junk_after && i + 1 == self.resps.len() {
            out.extend_from_slice(b"HTTP/1.1 200 OK\r\n\r\n");
        }
        out
    }

    /// What the process writes in answer to request `i`, piece by piece.
    pub fn pieces(&self, i: usize) -> Vec<Vec<u8>> {
        let all = self.all(i);
        let mut cuts: Vec<usize> = self.splits.iter().map(|s| s % (all.len() + 1)).collect();
        if self.trickle {
            // The head (and a little more) a byte or three at a time.
            let head = self.resps[i].bytes().0.len().min(all.len()).min(400);
            let mut at = 0;
            let mut k = 0;
            while at < head {
                at += 1 + self
                    .splits
                    .get(k % self.splits.len().max(1))
                    .map_or(k, |s| s + k)
                    % 3;
                cuts.push(at.min(all.len()));
                k += 1;
            }
        }
        cuts.sort_unstable();
        let mut out = Vec::new();
        let mut at = 0;
        for c in cuts.into_iter().chain([all.len()]) {
            if c > at {
                out.push(all[at..c].to_vec());
                at = c;
            }
        }
        out
    }
}

/// 7. A request as ours writes it after an HTTP/1.0 answer on its connection: still HTTP/1.1.
pub fn as_our_request(r: &[u8]) -> Vec<u8> {
    const DOWNGRADED: &[u8] = b" HTTP/1.0\r\nconnection: keep-alive\r\n";
    match r.windows(DOWNGRADED.len()).position(|w| w == DOWNGRADED) {
        Some(at) => [&r[..at], b" HTTP/1.1\r\n", &r[at + DOWNGRADED.len()..]].concat(),
        None => r.to_vec(),
    }
}

/// A `Content-Length` list or repeat as one value, or none when the values differ.
pub fn one_length(headers: &mut HeaderMap) {
    let values: Vec<&HeaderValue> = headers.get_all(CONTENT_LENGTH).iter().collect();
    if values.len() < 2 && !values.iter().any(|v| v.as_bytes().contains(&b',')) {
        return;
    }
    let mut lengths = values
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("x").split(','))
        .map(|n| n.trim().parse::<u64>().ok());
    let first = lengths.next().flatten();
    let agree = first.filter(|f| lengths.all(|n| n == Some(*f)));
    headers.remove(CONTENT_LENGTH);
    if let Some(n) = agree {
        headers.insert(CONTENT_LENGTH, HeaderValue::from(n));
    }
}
