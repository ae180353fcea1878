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
//! Nothing here takes a position from a pointer without checking it lies in the head
//! (`span_in`): httparse hands back a static `""`, not a slice of the buffer, for a reason phrase
//! that is missing or holds obs-text, and subtracting addresses from it took the launcher down.

use std::mem::MaybeUninit;

use bytes::{Bytes, BytesMut};
use http::header::TRANSFER_ENCODING;
use http::header::{HeaderMap, HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH};
use http::{Method, StatusCode, Version};

use super::limits::MAX_HEADERS;
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
    // On the stack, filled by `locate`: a `Vec` here was an allocation and about 1k
    // instructions per response (callgrind, tests/perf/callgrind-per-request.sh).
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
/// (a head is at most `HEAD_AT_MOST` bytes, well within `u32`).
type Span = [u32; 4];

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
    let as_u32 = |(a, b): (usize, usize)| Some((u32::try_from(a).ok()?, u32::try_from(b).ok()?));
    // httparse fills at most `MAX_HEADERS` lines, so the zip drops none.
    for (slot, h) in spans.iter_mut().zip(res.headers.iter()) {
        let (n0, n1) = span_in(head, h.name.as_bytes())
            .and_then(as_u32)
            .ok_or(HeadError::Syntax(httparse::Error::HeaderName))?;
        let (v0, v1) = span_in(head, h.value)
            .and_then(as_u32)
            .ok_or(HeadError::Syntax(httparse::Error::HeaderValue))?;
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
    let mut headers = HeaderMap::with_capacity(spans.len());
    let mut keep_alive = version == Version::HTTP_11;
    let mut saw_close = false;
    // What the framing needs, gathered in this one pass (not looked up again in the map).
    let mut seen = Seen::default();
    for &[n0, n1, v0, v1] in spans {
        let (n0, n1, v0, v1) = (n0 as usize, n1 as usize, v0 as usize, v1 as usize);
        // The spans were checked to lie inside the head (`span_in`), which `bytes` is.
        let name = HeaderName::from_bytes(&bytes[n0..n1])
            .map_err(|_| HeadError::Syntax(httparse::Error::HeaderName))?;
        let value = HeaderValue::from_maybe_shared(bytes.slice(v0..v1))
            .map_err(|_| HeadError::Syntax(httparse::Error::HeaderValue))?;
        if name == CONNECTION {
            // Once any `Connection` line says close, a later `keep-alive` does not undo it.
            if saw_close || has_token(&value, "close") {
                saw_close = true;
                keep_alive = false;
            } else if !keep_alive {
                keep_alive = has_token(&value, "keep-alive");
            }
        } else if name == TRANSFER_ENCODING {
            seen.transfer_encoding = Some(value.clone());
        } else if name == CONTENT_LENGTH {
            seen.content_length(&value);
        }
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
    })
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
}

impl Seen {
    fn content_length(&mut self, value: &HeaderValue) {
        self.not_one_plain_value |= self.length.is_some() || value.as_bytes().contains(&b',');
        if self.length == Some(None) {
            return;
        }
        let Ok(s) = value.to_str() else {
            self.length = Some(None);
            return;
        };
        // Bytes, not `str::split`/`trim` (about 350 instructions a response): past `to_str`
        // they are visible ASCII, space and tab, where ASCII trimming is `str::trim`.
        for n in s.as_bytes().split(|&b| b == b',') {
            let n = digits(n.trim_ascii());
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

/// A comma-separated header value lists `token` (case-insensitively).
/// As hyper's (`to_str`, split on commas, trimmed), on the bytes: once `to_str` has passed
/// them they are visible ASCII, space and tab, so ASCII trimming is `str::trim`.
fn has_token(value: &HeaderValue, token: &str) -> bool {
    value.to_str().is_ok_and(|s| {
        s.as_bytes()
            .split(|&b| b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
    })
}

#[cfg(test)]
#[path = "response_head_tests.rs"]
mod tests;
