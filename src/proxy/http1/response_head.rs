//! The head of a process's response, read by the launcher's own HTTP/1.1 client
//! (`forward::upstream_conn`): parsed with `httparse` into `http` response parts, with how its body is
//! framed (RFC 9112 §6.3) and whether the connection may carry another request after it.
//!
//! The rules are hyper's client's (1.x, `proto::h1::role::Client`), so what a process sends is
//! understood as before; the differential test (`differential_tests.rs`) holds the two to the
//! same answers. The deliberate differences (that test lists them all) are stricter or pass on
//! more of what was received: a response with both `Transfer-Encoding` and `Content-Length`
//! (RFC 9112 §6.3 item 3: a sign of response splitting) is framed by the chunked coding as hyper
//! does, but its connection is never reused; a `101` is refused (the launcher never asks for
//! an upgrade); a reason phrase goes on as received, obs-text too (hyper dropped it); a
//! `Content-Length` list or repeat goes on as one value (RFC 9110 §8.6); a head longer than
//! the read cap is refused however it arrived.
//!
//! The head comes out as the proxy passes it on: the hop-by-hop headers (RFC 9110 §7.6.1:
//! `Connection`, the headers it names, `Keep-Alive`, `Proxy-Connection`, `TE`, `Trailer`,
//! `Upgrade`, and `Transfer-Encoding` with a `Content-Length` beside it) are read for the
//! framing and keep-alive and never put in the map (`forward::headers::strip_hop_by_hop`'s
//! rule, which the tests hold this to): adding them only to take them out again would be work
//! on nearly every answer (nginx's `Connection: keep-alive` on every one; Node's `Keep-Alive`
//! too).
//!
//! Nothing here takes a position from a pointer without checking it lies in the head
//! (`span_in`): httparse hands back a static `""`, not a slice of the buffer, for a reason phrase
//! that is missing or holds obs-text, and subtracting addresses from it took the launcher down.

use std::mem::MaybeUninit;

use bytes::{Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use http::{Method, StatusCode, Version};

use super::limits::MAX_HEADERS;
use super::names::{name_of, Role};
use super::span_in;

/// The longest response head: the read cap, as hyper's `max_buf_size` was. The connection's
/// reads grow to it, so several may be buffered before a head is seen whole: its length is
/// checked, not only the buffer's while it is incomplete (a 70 KB head was taken).
const HEAD_AT_MOST: usize = super::limits::UPSTREAM_READ_AT_MOST;

/// How a response's body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body at all (`HEAD`, `204`, `304`, or `Content-Length: 0`).
    Empty,
    /// Exactly this many bytes (`Content-Length`).
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Everything until the process closes the connection (neither header, or a transfer
    /// coding that does not end in `chunked`): the connection cannot be reused.
    ToClose,
}

/// A parsed final response head.
#[derive(Debug)]
pub struct Head {
    pub parts: http::response::Parts,
    pub framing: Framing,
    /// The process allows another request on this connection after the body (HTTP/1.1
    /// without `Connection: close`, HTTP/1.0 with `keep-alive`) and the head gave no reason
    /// to distrust the framing.
    pub keep_alive: bool,
    /// The head had a `Transfer-Encoding` line (not in `parts`: it is hop-by-hop).
    pub transfer_encoding: bool,
}

/// Why a response head was refused: the process's answer is a `502`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadError {
    /// Not HTTP/1.x syntax (status line, header names or values, line ends, too many headers).
    Syntax(httparse::Error),
    /// Several differing `Content-Length` values, or one that is not a number.
    ContentLength,
    /// `Transfer-Encoding` in an HTTP/1.0 response, which has no transfer codings.
    TransferEncodingHttp10,
    /// The head did not end within the read cap.
    TooLarge,
    /// `101 Switching Protocols`, which answers only an `Upgrade` (RFC 9110 §15.2.2), and the
    /// launcher never passes one on: the process speaks something else on this connection.
    SwitchingProtocols,
}

impl std::fmt::Display for HeadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeadError::Syntax(e) => write!(f, "malformed response head: {e}"),
            HeadError::ContentLength => f.write_str("invalid Content-Length in the response"),
            HeadError::TransferEncodingHttp10 => {
                f.write_str("Transfer-Encoding in an HTTP/1.0 response")
            }
            HeadError::TooLarge => f.write_str("response head too large"),
            HeadError::SwitchingProtocols => {
                f.write_str("101 Switching Protocols, though no upgrade was asked for")
            }
        }
    }
}

/// Parses the final response head at the start of `buf`, for a request made with `method`:
/// `Ok(None)` if more bytes are needed. Interim (`1xx`) heads before it are consumed and
/// skipped; a `101` is refused (the launcher never passes an `Upgrade` on, so a switch of
/// protocols is unsolicited: RFC 9110 §15.2.2). The head's bytes are split off `buf`; the header
/// values share them.
pub fn parse(buf: &mut BytesMut, method: &Method) -> Result<Option<Head>, HeadError> {
    // On the stack, filled by `locate`: a `Vec` here would be an allocation per response.
    let mut spans = [NO_SPAN; MAX_HEADERS];
    loop {
        let Some(Located {
            len,
            status,
            version,
            count,
        }) = locate(buf, &mut spans)?
        else {
            return Ok(None);
        };
        if status == 101 {
            return Err(HeadError::SwitchingProtocols);
        }
        let bytes = buf.split_to(len).freeze();
        if (100..200).contains(&status) {
            // 100 Continue, 103 Early Hints and the like: the final head follows.
            continue;
        }
        let status =
            StatusCode::from_u16(status).map_err(|_| HeadError::Syntax(httparse::Error::Status))?;
        return build(bytes, status, version, &spans[..count], method).map(Some);
    }
}

/// Where a name and value sit in the head's bytes: name start and end, value start and end
/// (a head is at most `HEAD_AT_MOST`, 64 KB, and ends in an empty line: every position is below
/// `u16::MAX`; half the `u32`s' array to clear on the stack for every head).
type Span = [u16; 4];

const NO_SPAN: Span = [0; 4];

/// A complete head's length, status, version, and where its headers sit.
struct Located {
    len: usize,
    status: u16,
    version: Version,
    /// Header lines, their spans at the start of the array `locate` was given.
    count: usize,
}

/// The head's length, status, version and header count, if it is complete; the headers' spans
/// written to the start of `spans`.
fn locate(buf: &[u8], spans: &mut [Span; MAX_HEADERS]) -> Result<Option<Located>, HeadError> {
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut res = httparse::Response::new(&mut []);
    let len = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut res,
        buf,
        &mut headers,
    ) {
        // Whole, but longer than a head may be (more than one read's worth was buffered).
        Ok(httparse::Status::Complete(len)) if len > HEAD_AT_MOST => {
            return Err(HeadError::TooLarge)
        }
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(HeadError::Syntax(e)),
    };
    let head = buf.get(..len).ok_or(HeadError::TooLarge)?;
    // Below `u16::MAX` in a head no longer than `HEAD_AT_MOST` (see `Span`).
    let at = |i: usize| u16::try_from(i).map_err(|_| HeadError::TooLarge);
    // httparse fills at most `MAX_HEADERS` lines, so the zip drops none.
    for (slot, h) in spans.iter_mut().zip(res.headers.iter()) {
        let (n0, n1) = span_in(head, h.name.as_bytes())
            .ok_or(HeadError::Syntax(httparse::Error::HeaderName))?;
        let (v0, v1) =
            span_in(head, h.value).ok_or(HeadError::Syntax(httparse::Error::HeaderValue))?;
        let [n0, n1, v0, v1] = [at(n0)?, at(n1)?, at(v0)?, at(v1)?];
        *slot = [n0, n1, v0, v1];
    }
    let version = if res.version == Some(1) {
        Version::HTTP_11
    } else {
        Version::HTTP_10
    };
    let status = res.code.ok_or(HeadError::Syntax(httparse::Error::Status))?;
    Ok(Some(Located {
        len,
        status,
        version,
        count: res.headers.len(),
    }))
}

/// Where the reason phrase of the status line that opens `head` (a head httparse has parsed
/// whole) lies: after the code's space up to the line's end, found by position, not from
/// httparse's `reason` (a static `""` when the phrase is missing or holds obs-text). httparse
/// has checked the bytes (HTAB, SP, VCHAR, obs-text) and the line's shape: empty lines, then
/// `HTTP/1.x`, one space, three digits, and a space or the line's end.
fn reason_span(head: &[u8]) -> (usize, usize) {
    let is_eol = |b: &u8| matches!(b, b'\r' | b'\n');
    let start = head.iter().position(|b| !is_eol(b)).unwrap_or(head.len());
    let end = head[start..]
        .iter()
        .position(is_eol)
        .map_or(head.len(), |i| start + i);
    ((start + STATUS_PREFIX).min(end), end)
}

/// `HTTP/1.1 200 `: the bytes of a status line before its reason phrase.
const STATUS_PREFIX: usize = 13;

fn build(
    bytes: Bytes,
    status: StatusCode,
    version: Version,
    spans: &[Span],
    method: &Method,
) -> Result<Head, HeadError> {
    // Room for every line at once.
    let mut headers = HeaderMap::with_capacity(spans.len());
    let mut keep_alive = version == Version::HTTP_11;
    let mut saw_close = false;
    // What the framing and the hop-by-hop headers need, gathered in this one pass (not looked
    // up again in the map).
    let mut seen = Seen::default();
    for &[n0, n1, v0, v1] in spans {
        let (n0, n1, v0, v1) = (n0 as usize, n1 as usize, v0 as usize, v1 as usize);
        // The spans were checked to lie inside the head (`span_in`), which `bytes` is.
        let (name, role) =
            name_of(&bytes[n0..n1]).map_err(|_| HeadError::Syntax(httparse::Error::HeaderName))?;
        match role {
            Role::Plain => {}
            Role::ContentLength => seen.content_length(&bytes[v0..v1]),
            Role::Close => seen.header_named_close = true,
            // Hop-by-hop (RFC 9110 §7.6.1): read, never passed on, so never made a value.
            Role::HopByHop => continue,
            Role::Connection => {
                let says = Tokens::of(&bytes[v0..v1]);
                // Once any `Connection` line says close, a later `keep-alive` does not undo it.
                if saw_close || says.close {
                    saw_close = true;
                    keep_alive = false;
                } else if !keep_alive {
                    keep_alive = says.keep_alive;
                }
                seen.connection_names |= says.others;
                seen.connection = true;
                continue;
            }
            Role::TransferEncoding => {
                let value = HeaderValue::from_maybe_shared(bytes.slice(v0..v1))
                    .map_err(|_| HeadError::Syntax(httparse::Error::HeaderValue))?;
                seen.transfer_encoding = Some(value);
                continue;
            }
        }
        let value = HeaderValue::from_maybe_shared(bytes.slice(v0..v1))
            .map_err(|_| HeadError::Syntax(httparse::Error::HeaderValue))?;
        headers.append(name, value);
    }
    let te = seen.transfer_encoding.as_ref();
    let (framing, trusted) = framing(status, version, method, te, seen.length)?;
    if seen.not_one_plain_value {
        // RFC 9110 §8.6: a list (`5, 5`) or repeated lines of one length go on as that one
        // value, the length the body was framed by. Lengths that differ reach here only on a
        // response whose framing never reads them (HEAD, 204, 304): one nobody can trust is not
        // passed on.
        headers.remove(CONTENT_LENGTH);
        if let Some(Some(n)) = seen.length {
            headers.insert(CONTENT_LENGTH, HeaderValue::from(n));
        }
    }
    strip_connection_options(&mut headers, &bytes, spans, &seen);
    let mut parts = http::Response::new(()).into_parts().0;
    parts.status = status;
    parts.version = version;
    parts.headers = headers;
    // The reason phrase as received goes on to the client, as hyper passed it, unless it is the
    // usual one (hyper writes that anyway); none received goes on as none (`HTTP/1.1 200 `),
    // and obs-text (`Não encontrado`, as Node writes it) as its bytes.
    let (r0, r1) = reason_span(&bytes);
    if Some(&bytes[r0..r1]) != status.canonical_reason().map(str::as_bytes) {
        if let Ok(p) = hyper::ext::ReasonPhrase::try_from(bytes.slice(r0..r1)) {
            parts.extensions.insert(p);
        }
    }
    Ok(Head {
        parts,
        framing,
        keep_alive: keep_alive && trusted,
        transfer_encoding: seen.transfer_encoding.is_some(),
    })
}

/// What is left of the hop-by-hop rule once their own lines were left out of the map: the
/// headers a `Connection` value names go too (except `Host` and `Content-Length`, which say
/// what the message is), and with `Transfer-Encoding` a `Content-Length` goes (RFC 9112 §6.3:
/// the next hop would frame the body by it), unless `Connection` named the `Transfer-Encoding`
/// (then it went as an option, and the length stays). The same as `forward::headers`'
/// `strip_hop_by_hop` on the whole map, which the tests hold it to. Almost no `Connection`
/// value names a header (nginx's `keep-alive`, a `close`): then its values are not read again.
fn strip_connection_options(headers: &mut HeaderMap, bytes: &Bytes, spans: &[Span], seen: &Seen) {
    let mut transfer_encoding_named = false;
    if seen.connection && (seen.connection_names || seen.header_named_close) {
        for &[n0, n1, v0, v1] in spans {
            let name = &bytes[n0 as usize..n1 as usize];
            if !matches!(name_of(name), Ok((_, Role::Connection))) {
                continue;
            }
            let value = &bytes[v0 as usize..v1 as usize];
            if !visible(value) {
                continue;
            }
            for token in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                if token.eq_ignore_ascii_case(b"keep-alive")
                    || (token.eq_ignore_ascii_case(b"close") && !seen.header_named_close)
                {
                    continue;
                }
                let Ok(named) = HeaderName::from_bytes(token) else {
                    continue;
                };
                if named == TRANSFER_ENCODING {
                    transfer_encoding_named = true;
                } else if named != HOST && named != CONTENT_LENGTH {
                    headers.remove(named);
                }
            }
        }
    }
    if seen.transfer_encoding.is_some() && !transfer_encoding_named {
        headers.remove(CONTENT_LENGTH);
    }
}

/// The headers the framing depends on, as the head's lines go by.
#[derive(Default)]
struct Seen {
    /// The last `Transfer-Encoding` line's value.
    transfer_encoding: Option<HeaderValue>,
    /// The length every `Content-Length` value says so far: `None` for none yet,
    /// `Some(None)` once one is not a number or two differ. A list (`5, 5`) counts as repeated
    /// values.
    length: Option<Option<u64>>,
    /// More than one `Content-Length` line, or a list in one: not passed on as it came.
    not_one_plain_value: bool,
    /// A `Connection` line.
    connection: bool,
    /// A `Connection` value names more than `keep-alive` and `close` (or is not text).
    connection_names: bool,
    /// A header named `close`, which a `Connection: close` names.
    header_named_close: bool,
}

impl Seen {
    fn content_length(&mut self, value: &[u8]) {
        self.not_one_plain_value |= self.length.is_some() || value.contains(&b',');
        if self.length == Some(None) {
            return;
        }
        // Bytes, not `str::split`/`trim` (which work by char, on every response). hyper read the
        // value with `to_str` and `str::trim`; here each part is only spaces and tabs around
        // digits: any other byte, text or not (`to_str`'s failure), is no number either.
        for n in value.split(|&b| b == b',') {
            let n = digits(trim_ows(n));
            let agrees = match self.length {
                Some(Some(f)) => n == Some(f),
                _ => true,
            };
            self.length = Some(n.filter(|_| agrees));
            if self.length == Some(None) {
                return;
            }
        }
    }
}

/// The body's framing (RFC 9112 §6.3, in hyper's order), and whether the connection may be
/// trusted with another request afterwards; from the last `Transfer-Encoding` value, if any,
/// and what the `Content-Length` lines said (`Seen::length`).
fn framing(
    status: StatusCode,
    version: Version,
    method: &Method,
    transfer_encoding: Option<&HeaderValue>,
    length: Option<Option<u64>>,
) -> Result<(Framing, bool), HeadError> {
    if matches!(status.as_u16(), 204 | 304) {
        return Ok((Framing::Empty, true));
    }
    if method == Method::HEAD {
        return Ok((Framing::Empty, true));
    }
    if method == Method::CONNECT && status.is_success() {
        return Ok((Framing::Empty, false));
    }
    if let Some(te) = transfer_encoding {
        if version == Version::HTTP_10 {
            return Err(HeadError::TransferEncodingHttp10);
        }
        if !ends_in_chunked(te) {
            return Ok((Framing::ToClose, false));
        }
        // With a Content-Length too: framed by the chunks, and the connection not trusted.
        return Ok((Framing::Chunked, length.is_none()));
    }
    match length {
        None => Ok((Framing::ToClose, false)),
        Some(Some(0)) => Ok((Framing::Empty, true)),
        Some(Some(n)) => Ok((Framing::Length(n), true)),
        Some(None) => Err(HeadError::ContentLength),
    }
}

/// `b` without the spaces and tabs around it (RFC 9110's OWS).
fn trim_ows(mut b: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = b {
        b = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = b {
        b = rest;
    }
    b
}

/// A decimal number without sign, overflow-checked.
fn digits(b: &[u8]) -> Option<u64> {
    if b.is_empty() {
        return None;
    }
    b.iter().try_fold(0u64, |n, &d| {
        if !d.is_ascii_digit() {
            return None;
        }
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// A `Transfer-Encoding` value whose last coding is `chunked` (case-insensitively).
pub(super) fn ends_in_chunked(value: &HeaderValue) -> bool {
    value
        .to_str()
        .ok()
        .and_then(|s| s.rsplit(',').next())
        .is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"))
}

/// A value `HeaderValue::to_str` takes: visible ASCII, space and tab (obs-text is not text).
fn visible(value: &[u8]) -> bool {
    value
        .iter()
        .all(|&b| b == b'\t' || (b' '..=b'~').contains(&b))
}

/// What a `Connection` value says, read as hyper reads it (`to_str`, split on commas, each
/// trimmed, ASCII case-insensitively), in one pass over its bytes: once `visible` has passed
/// them they are visible ASCII, space and tab, where ASCII trimming is `str::trim`.
#[derive(Debug, Default, PartialEq, Eq)]
struct Tokens {
    close: bool,
    keep_alive: bool,
    /// A token other than those two, or the value is not text: it may name a header.
    others: bool,
}

impl Tokens {
    fn of(value: &[u8]) -> Tokens {
        let mut says = Tokens::default();
        if !visible(value) {
            says.others = true;
            return says;
        }
        for t in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
            if t.eq_ignore_ascii_case(b"keep-alive") {
                says.keep_alive = true;
            } else if t.eq_ignore_ascii_case(b"close") {
                says.close = true;
            } else {
                says.others = true;
            }
        }
        says
    }
}

#[cfg(test)]
#[path = "response_head_tests.rs"]
mod tests;
