//! A client's request head as the lobby reads it (a new or woken connection), by hyper's rules:
//! what hyper's HTTP/1.1 server would refuse, decided before hyper sees it, so that the refusal
//! is the launcher's own (a `400`/`431`/`414` with an OperationOutcome and an access-log line),
//! not hyper's bare one; and, for a head hyper takes, what the lobby routes by (method, target,
//! `x-cache-id`, `Host`), found in the same parse. A kept-alive connection's next head is
//! hyper's alone to read (DEC-38).
//!
//! The rules are hyper 1.x's (`proto/h1/role.rs` `Server::parse`): httparse with hyper's
//! default parser settings and 100 headers (more: hyper's `TooLarge`, `431`); then what hyper
//! refuses through the `http` crate's types, here read by the same byte classes without
//! building the types (no copy, no allocation; `request_head_http_tests.rs` holds the two to the
//! same answers on every byte in each place): the method as `http::Method` (nothing beyond
//! httparse's token), the target as `http::Uri` (stricter than httparse: `"`, `<` and `>` in a
//! query pass httparse, not `Uri`, and `<`, `>` and `` ` `` in a path; `{`, `|`, `\`, `^` and
//! non-ASCII pass both), header names as `http::HeaderName` (nothing beyond
//! httparse's token but a length); a target over 65,534 bytes (`414`); `Content-Length` only
//! digits, and several only if equal; `Transfer-Encoding` only in HTTP/1.1 and only ending in
//! `chunked`; `Transfer-Encoding` read as `HeaderValue::to_str` gives it (obs-text, even
//! UTF-8, is no text: no coding).
//!
//! What hyper takes, this takes: a head passed here is one hyper parses, so the request reaches
//! the service (which answers the rest: a missing `Host`, an absolute-form target, ...).
//!
//! The lobby and hyper agree on the headers by construction: a value is the bytes httparse gives
//! (its surrounding whitespace already gone), which is what hyper makes its `HeaderValue` of.
//! The differential test (`lobby_differential_tests.rs`) holds the two to the same answers.
//!
//! Sans-I/O: a function of the bytes.

use std::mem::MaybeUninit;

pub use super::limits::MAX_HEADERS;
use super::limits::MAX_TARGET;
use super::span_in;

/// Where a part of the head lies in the buffer it was read from.
pub type Span = (usize, usize);

/// How the body of a head hyper takes is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// `Content-Length` bytes (0 without one).
    Length(u64),
    Chunked,
}

/// A head hyper takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Taken {
    /// The head's length (with any empty lines before it).
    pub len: usize,
    pub body: Body,
    /// What routing reads, found in the same parse.
    pub route: RouteParts,
}

/// What the lobby routes a head by: spans of the buffer the head was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteParts {
    pub method: Span,
    pub target: Span,
    /// The first `x-cache-id` value, as hyper gives it (`HeaderMap::get`).
    pub cache_id: Option<Span>,
    /// `Host` lines.
    pub hosts: u16,
    /// `Content-Length` lines hyper keeps in the request's headers: one, of a length given once or
    /// repeated alike; none with a `Transfer-Encoding`, before it or after.
    pub lengths: u16,
    pub http_10: bool,
    pub transfer_encoding: bool,
}

/// Why hyper would refuse a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// `400`: the reason, as the OperationOutcome says it.
    Bad(&'static str),
    /// More headers than hyper reads: its `431`.
    TooManyHeaders,
    /// A target over hyper's limit: its `414`.
    TargetTooLong,
}

/// What the bytes at the start of a buffer are, as hyper would read them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Not a whole head yet, and nothing refused so far.
    Partial,
    Taken(Taken),
    Refused(Refused),
}

/// Checks the head at the start of `buf` by hyper's rules.
pub fn check(buf: &[u8]) -> Check {
    // Left uninitialised, as hyper leaves its own: httparse writes a slot before it reads it,
    // and 100 empty headers written on every call were a quarter of this check's cost.
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(buf, &mut headers) {
        Ok(httparse::Status::Partial) => return Check::Partial,
        Ok(httparse::Status::Complete(n)) => n,
        Err(e) => return Check::Refused(parse_error(e, req.method.is_some())),
    };
    match taken(&req, len, buf) {
        Ok(t) => Check::Taken(t),
        Err(r) => Check::Refused(r),
    }
}

fn parse_error(e: httparse::Error, had_method: bool) -> Refused {
    use httparse::Error as E;
    Refused::Bad(match e {
        E::TooManyHeaders => return Refused::TooManyHeaders,
        E::Token if !had_method => "the request line's method is malformed",
        E::Token => "the request target holds a character not allowed there",
        E::Version => "the request line's HTTP version is malformed or not HTTP/1.0 or 1.1",
        E::HeaderName => "a header name is malformed",
        E::HeaderValue => "a header value holds a character not allowed there",
        E::NewLine | E::Status => "the request head's line endings are malformed",
    })
}

/// The headers hyper's server reads, told by name (ASCII case-insensitive, as a `HeaderName`
/// compares: its table lowercases letters and keeps every other byte httparse lets through).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Named {
    TransferEncoding,
    ContentLength,
    Host,
    CacheId,
    Other,
}

fn named(name: &[u8]) -> Named {
    let is = |lower: &[u8]| name.eq_ignore_ascii_case(lower);
    match name.len() {
        4 if is(b"host") => Named::Host,
        10 if is(super::X_CACHE_ID.as_str().as_bytes()) => Named::CacheId,
        14 if is(b"content-length") => Named::ContentLength,
        17 if is(b"transfer-encoding") => Named::TransferEncoding,
        _ => Named::Other,
    }
}

fn taken(req: &httparse::Request<'_, '_>, len: usize, buf: &[u8]) -> Result<Taken, Refused> {
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return Err(Refused::Bad("the request line is malformed"));
    };
    if target.len() > MAX_TARGET {
        return Err(Refused::TargetTooLong);
    }
    // The method needs no check of its own: httparse takes only a token of `tchar`s, the very
    // bytes `http::Method::from_bytes` takes (held to it by `the_method_as_http_reads_it`).
    if !target_ok(target.as_bytes()) {
        return Err(Refused::Bad(
            "the request target holds a character not allowed there \
             (percent-encode it: RFC 3986)",
        ));
    }
    let head = &buf[..len.min(buf.len())];
    let malformed = Refused::Bad("the request line is malformed");
    let mut route = RouteParts {
        method: span_in(head, method.as_bytes()).ok_or(malformed)?,
        target: span_in(head, target.as_bytes()).ok_or(malformed)?,
        cache_id: None,
        hosts: 0,
        lengths: 0,
        http_10: version == 0,
        transfer_encoding: false,
    };
    let http_11 = version == 1;
    let mut length = None::<u64>;
    let (mut has_te, mut chunked) = (false, false);
    for h in req.headers.iter() {
        // httparse's header-name bytes are `tchar`s, as `http::HeaderName`'s; what it refuses
        // beyond them is a name over its longest (hyper: `TooLarge` at the same length).
        if h.name.len() > MAX_HEADER_NAME {
            return Err(Refused::Bad("a header name is malformed"));
        }
        match named(h.name.as_bytes()) {
            Named::TransferEncoding => {
                if !http_11 {
                    return Err(Refused::Bad(
                        "Transfer-Encoding is not allowed in an HTTP/1.0 request",
                    ));
                }
                has_te = true;
                route.transfer_encoding = true;
                length = None;
                chunked = last_coding_is_chunked(h.value);
            }
            Named::ContentLength => {
                if has_te {
                    continue;
                }
                let n = digits(h.value).ok_or(Refused::Bad("the Content-Length is malformed"))?;
                match length {
                    Some(prev) if prev != n => {
                        return Err(Refused::Bad("the request has differing Content-Lengths"))
                    }
                    _ => length = Some(n),
                }
            }
            Named::Host => route.hosts = route.hosts.saturating_add(1),
            Named::CacheId if route.cache_id.is_none() => {
                route.cache_id = Some(span_in(head, h.value).ok_or(malformed)?);
            }
            Named::CacheId | Named::Other => {}
        }
    }
    route.lengths = u16::from(length.is_some());
    if has_te && !chunked {
        return Err(Refused::Bad(
            "the request's Transfer-Encoding does not end in chunked",
        ));
    }
    let body = if chunked {
        Body::Chunked
    } else {
        Body::Length(length.unwrap_or(0))
    };
    Ok(Taken { len, body, route })
}

/// The longest header name `http::HeaderName` takes (its `MAX_HEADER_NAME_LEN`); hyper refuses
/// a longer one before it tries.
const MAX_HEADER_NAME: usize = (1 << 16) - 1;

/// A `Content-Length` as hyper reads it: digits only (no sign, no list), not overflowing, and
/// below hyper's largest length.
fn digits(v: &[u8]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    let mut n = 0u64;
    for &b in v {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    // hyper's `DecodedLength::MAX_LEN`.
    (n <= u64::MAX - 2).then_some(n)
}

/// A header value as `HeaderValue::to_str` takes it, which hyper reads `Transfer-Encoding`
/// through: tab and visible ASCII only (obs-text is no `str` to hyper, even
/// when it is UTF-8).
fn as_text(v: &[u8]) -> Option<&[u8]> {
    v.iter()
        .all(|&b| b == b'\t' || (0x20..0x7f).contains(&b))
        .then_some(v)
}

/// `str::trim` on ASCII: the bytes `char::is_whitespace` names (tab to CR, space).
fn trim(mut v: &[u8]) -> &[u8] {
    let ws = |b: &u8| matches!(b, b'\t'..=b'\r' | b' ');
    while let [first, rest @ ..] = v {
        if !ws(first) {
            break;
        }
        v = rest;
    }
    while let [rest @ .., last] = v {
        if !ws(last) {
            break;
        }
        v = rest;
    }
    v
}

/// Whether the last coding is `chunked` (as hyper's `is_chunked_`).
fn last_coding_is_chunked(v: &[u8]) -> bool {
    as_text(v)
        .and_then(|v| v.rsplit(|&b| b == b',').next())
        .is_some_and(|c| trim(c).eq_ignore_ascii_case(b"chunked"))
}

/// Whether `http::Uri` takes the target httparse gave (valid UTF-8, no space or control byte):
/// an origin form (`/...`) by `PathAndQuery`'s byte classes, read here without the copy and
/// allocation a `Uri` is; `*`; any other form (absolute, authority) by `http::Uri` itself.
/// Held to `http::Uri` over every byte in each place (`targets_as_http_reads_them`).
fn target_ok(t: &[u8]) -> bool {
    match t {
        [b'/', ..] => origin_ok(t),
        b"*" => true,
        _ => std::str::from_utf8(t).is_ok_and(|s| http::Uri::try_from(s).is_ok()),
    }
}

/// `PathAndQuery`'s scan (http 1.x `scan_path_and_query`) of a target that begins with `/`:
/// path bytes, then after a `?` query bytes, then after a `#` anything (the fragment is cut,
/// unread). Bytes over 0x7f are UTF-8's, which httparse checked.
fn origin_ok(t: &[u8]) -> bool {
    let Some(i) = t.iter().position(|&b| PATH[usize::from(b)] != VALID) else {
        return true;
    };
    match PATH[usize::from(t[i])] {
        QUERY => {}
        FRAGMENT => return true,
        _ => return false,
    }
    t[i..]
        .iter()
        .find(|&&b| QUERY_BYTES[usize::from(b)] != VALID)
        .is_none_or(|&b| QUERY_BYTES[usize::from(b)] == FRAGMENT)
}

const VALID: u8 = 0;
const QUERY: u8 = 1;
const FRAGMENT: u8 = 2;
const INVALID: u8 = 3;

/// A path byte's class: `PathAndQuery`'s (`"`, `{` and `}` taken as they are, for clients that
/// send JSON unencoded).
const PATH: [u8; 256] = classes(false);
/// A query byte's class (`?` is a query byte there).
const QUERY_BYTES: [u8; 256] = classes(true);

const fn classes(query: bool) -> [u8; 256] {
    let mut t = [INVALID; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = match b {
            b'#' => FRAGMENT,
            b'?' if !query => QUERY,
            0x21 | 0x24..=0x3B | 0x3D | 0x80..=0xFF => VALID,
            b'"' | 0x40..=0x5F | 0x61..=0x7A | 0x7C | b'{' | b'}' | 0x7E if !query => VALID,
            0x3F..=0x7E if query => VALID,
            _ => INVALID,
        };
        i += 1;
    }
    t
}

#[cfg(test)]
#[path = "request_head_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "request_head_http_tests.rs"]
mod http_tests;
