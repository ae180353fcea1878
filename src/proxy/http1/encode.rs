//! A request as the launcher's own client writes it to a process: how its body is framed
//! (hyper's client's rules, so a process sees what it saw before), the bytes of the head,
//! encoded into a buffer the connection keeps between requests, and the body's framing bytes
//! ([`Encoder`]: chunk lines, the last chunk, the length kept), so the connection only writes
//! what it is given. One deliberate difference: a `Content-Length` list or repeat of one length
//! goes on as one value (RFC 9110 §8.6), where hyper passed it on as it came.

use http::header::{HeaderMap, HeaderValue, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::Method;
use http_body::SizeHint;

use super::response_head::ends_in_chunked;

/// How the request body goes to the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body is sent (none, or one hyper would not send: see [`frame_request`]).
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// The chunked coding.
    Chunked,
}

/// Settles the framing of a request body and the headers that announce it, as hyper's client
/// did (`Client::set_length`): a body at its end sends nothing (and no `Transfer-Encoding`); a
/// `Transfer-Encoding` given is kept with `chunked` last; a valid `Content-Length` given is
/// respected; else the body's exact size becomes the `Content-Length`; else it goes chunked,
/// except that a `GET`, `HEAD` or `CONNECT` of unknown size sends no body.
pub fn frame_request(
    method: &Method,
    headers: &mut HeaderMap,
    at_end: bool,
    hint: &SizeHint,
) -> BodyFraming {
    if at_end {
        headers.remove(TRANSFER_ENCODING);
        return BodyFraming::None;
    }
    if let Some(last) = headers.get_all(TRANSFER_ENCODING).iter().next_back() {
        if !ends_in_chunked(last) {
            let mut v = last.as_bytes().to_vec();
            v.extend_from_slice(b", chunked");
            if let Ok(v) = HeaderValue::from_bytes(&v) {
                // The last value gets `chunked` added, as hyper's `add_chunked` does.
                let values: Vec<HeaderValue> =
                    headers.get_all(TRANSFER_ENCODING).iter().cloned().collect();
                headers.remove(TRANSFER_ENCODING);
                for old in &values[..values.len() - 1] {
                    headers.append(TRANSFER_ENCODING, old.clone());
                }
                headers.append(TRANSFER_ENCODING, v);
            }
        }
        headers.remove(CONTENT_LENGTH);
        return BodyFraming::Chunked;
    }
    if let Some(n) = given_length(headers) {
        one_length(headers, n);
        return BodyFraming::Length(n);
    }
    if let Some(n) = hint.exact() {
        headers.insert(CONTENT_LENGTH, HeaderValue::from(n));
        return BodyFraming::Length(n);
    }
    if matches!(*method, Method::GET | Method::HEAD | Method::CONNECT) {
        return BodyFraming::None;
    }
    headers.insert(TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
    headers.remove(CONTENT_LENGTH);
    BodyFraming::Chunked
}

/// The one valid length the `Content-Length` headers agree on, if any.
fn given_length(headers: &HeaderMap) -> Option<u64> {
    let mut found = None;
    for v in headers.get_all(CONTENT_LENGTH) {
        for n in v.to_str().ok()?.split(',') {
            let n = n.trim();
            if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let n: u64 = n.parse().ok()?;
            if found.is_some_and(|f| f != n) {
                return None;
            }
            found = Some(n);
        }
    }
    found
}

/// RFC 9110 §8.6: a list (`5, 5`) or repeated lines of the one length `n` go on as that one
/// value. hyper's server takes both from a client and its client passed them on as they came;
/// Node's parser refuses both (`400`).
fn one_length(headers: &mut HeaderMap, n: u64) {
    let mut values = headers.get_all(CONTENT_LENGTH).iter();
    let plain = values.next().is_some_and(|v| !v.as_bytes().contains(&b','));
    if !plain || values.next().is_some() {
        headers.insert(CONTENT_LENGTH, HeaderValue::from(n));
    }
}

/// Appends the request line and headers (HTTP/1.1, origin form) and the blank line to `dst`.
pub fn encode(parts: &http::request::Parts, dst: &mut Vec<u8>) {
    dst.extend_from_slice(parts.method.as_str().as_bytes());
    dst.push(b' ');
    match parts.uri.path_and_query() {
        Some(pq) => dst.extend_from_slice(pq.as_str().as_bytes()),
        None => dst.push(b'/'),
    }
    dst.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in &parts.headers {
        dst.extend_from_slice(name.as_str().as_bytes());
        dst.extend_from_slice(b": ");
        dst.extend_from_slice(value.as_bytes());
        dst.extend_from_slice(b"\r\n");
    }
    dst.extend_from_slice(b"\r\n");
}

/// Appends a chunk's size line for `len` bytes of data.
fn chunk_line(len: usize, dst: &mut Vec<u8>) {
    use std::io::Write as _;
    let _ = write!(dst, "{len:X}\r\n");
}

/// The body's bytes were not the `Content-Length` the head announced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LengthMismatch;

/// The framing of a request body as it goes out: what goes before and after each piece of data,
/// and at the end; a body longer or shorter than its `Content-Length` is refused (the request
/// is spent, never sent cut or overlong).
#[derive(Debug)]
pub struct Encoder {
    framing: BodyFraming,
    sent: u64,
}

impl Encoder {
    pub fn new(framing: BodyFraming) -> Encoder {
        Encoder { framing, sent: 0 }
    }

    /// A body sent whole with its head: what precedes `len` bytes of data is appended to `dst`,
    /// what follows them (up to the body's end) is returned.
    pub fn whole(
        &mut self,
        len: usize,
        dst: &mut Vec<u8>,
    ) -> Result<&'static [u8], LengthMismatch> {
        self.sent = len as u64;
        Ok(match self.framing {
            BodyFraming::Length(n) if n != len as u64 => return Err(LengthMismatch),
            BodyFraming::Chunked if len == 0 => b"0\r\n\r\n",
            BodyFraming::Chunked => {
                chunk_line(len, dst);
                b"\r\n0\r\n\r\n"
            }
            _ => b"",
        })
    }

    /// `len` more bytes of a body sent as it comes: what precedes them is appended to `dst`,
    /// what follows them is returned.
    pub fn data(&mut self, len: usize, dst: &mut Vec<u8>) -> Result<&'static [u8], LengthMismatch> {
        self.sent += len as u64;
        Ok(match self.framing {
            BodyFraming::Length(n) if self.sent > n => return Err(LengthMismatch),
            BodyFraming::Chunked if len > 0 => {
                chunk_line(len, dst);
                b"\r\n"
            }
            _ => b"",
        })
    }

    /// The body's end: what closes it is appended to `dst` (nothing but for the chunked coding).
    pub fn end(&mut self, dst: &mut Vec<u8>) -> Result<(), LengthMismatch> {
        match self.framing {
            BodyFraming::Length(n) if self.sent != n => Err(LengthMismatch),
            BodyFraming::Chunked => {
                dst.extend_from_slice(b"0\r\n\r\n");
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(
        method: Method,
        headers: &[(&str, &str)],
        at_end: bool,
        hint: SizeHint,
    ) -> (BodyFraming, Vec<u8>) {
        let mut req = http::Request::builder().method(method).uri("/p?q=1");
        for (n, v) in headers {
            req = req.header(*n, *v);
        }
        let (mut parts, ()) = req.body(()).unwrap().into_parts();
        let f = frame_request(&parts.method.clone(), &mut parts.headers, at_end, &hint);
        let mut out = Vec::new();
        encode(&parts, &mut out);
        (f, out)
    }

    fn text(b: &[u8]) -> &str {
        std::str::from_utf8(b).unwrap()
    }

    #[test]
    fn a_body_at_its_end_sends_nothing_and_loses_its_transfer_encoding() {
        let (f, out) = framed(
            Method::POST,
            &[("transfer-encoding", "chunked")],
            true,
            SizeHint::with_exact(0),
        );
        assert_eq!(f, BodyFraming::None);
        assert_eq!(text(&out), "POST /p?q=1 HTTP/1.1\r\n\r\n");
    }

    #[test]
    fn a_given_content_length_is_respected_and_an_exact_size_becomes_one() {
        let (f, out) = framed(
            Method::PUT,
            &[("content-length", "5")],
            false,
            SizeHint::with_exact(5),
        );
        assert_eq!(f, BodyFraming::Length(5));
        assert_eq!(
            text(&out),
            "PUT /p?q=1 HTTP/1.1\r\ncontent-length: 5\r\n\r\n"
        );
        let (f, out) = framed(Method::POST, &[], false, SizeHint::with_exact(7));
        assert_eq!(f, BodyFraming::Length(7));
        assert!(text(&out).contains("content-length: 7\r\n"));
    }

    #[test]
    fn an_unknown_size_goes_chunked_except_for_get_head_and_connect() {
        let (f, out) = framed(
            Method::POST,
            &[("content-length", "x")],
            false,
            SizeHint::new(),
        );
        assert_eq!(f, BodyFraming::Chunked);
        assert_eq!(
            text(&out),
            "POST /p?q=1 HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n"
        );
        let (f, _) = framed(Method::GET, &[], false, SizeHint::new());
        assert_eq!(f, BodyFraming::None);
    }

    #[test]
    fn a_given_transfer_encoding_ends_in_chunked_and_drops_content_length() {
        let (f, out) = framed(
            Method::POST,
            &[("transfer-encoding", "gzip"), ("content-length", "3")],
            false,
            SizeHint::with_exact(3),
        );
        assert_eq!(f, BodyFraming::Chunked);
        assert_eq!(
            text(&out),
            "POST /p?q=1 HTTP/1.1\r\ntransfer-encoding: gzip, chunked\r\n\r\n"
        );
    }

    #[test]
    fn a_content_length_list_or_repeat_goes_on_as_one_value() {
        // RFC 9110 §8.6; hyper's server takes both from a client, Node's parser refuses both.
        for given in [
            &[("content-length", "5, 5")][..],
            &[("content-length", "5"); 2],
        ] {
            let (f, out) = framed(Method::POST, given, false, SizeHint::with_exact(5));
            assert_eq!(f, BodyFraming::Length(5));
            assert_eq!(
                text(&out),
                "POST /p?q=1 HTTP/1.1\r\ncontent-length: 5\r\n\r\n",
                "{given:?}"
            );
        }
    }

    #[test]
    fn chunk_lines_are_hex() {
        let mut v = Vec::new();
        chunk_line(255, &mut v);
        assert_eq!(v, b"FF\r\n");
    }

    /// The bytes an encoder frames `pieces` with, or its refusal.
    fn encoded(framing: BodyFraming, pieces: &[&[u8]]) -> Result<Vec<u8>, LengthMismatch> {
        let mut e = Encoder::new(framing);
        let mut out = Vec::new();
        for p in pieces {
            let tail = e.data(p.len(), &mut out)?;
            out.extend_from_slice(p);
            out.extend_from_slice(tail);
        }
        e.end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn a_streamed_body_is_framed_and_held_to_its_length() {
        assert_eq!(
            encoded(BodyFraming::Chunked, &[b"abc", b"", b"de"]).unwrap(),
            b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
        );
        assert_eq!(
            encoded(BodyFraming::Length(5), &[b"abc", b"de"]).unwrap(),
            b"abcde"
        );
        assert_eq!(
            encoded(BodyFraming::Length(5), &[b"abc"]),
            Err(LengthMismatch)
        );
        assert_eq!(
            encoded(BodyFraming::Length(2), &[b"abc"]),
            Err(LengthMismatch)
        );
    }

    #[test]
    fn a_whole_body_is_framed_in_one_piece() {
        let mut head = Vec::new();
        let tail = Encoder::new(BodyFraming::Chunked)
            .whole(3, &mut head)
            .unwrap();
        assert_eq!((&head[..], tail), (&b"3\r\n"[..], &b"\r\n0\r\n\r\n"[..]));
        let tail = Encoder::new(BodyFraming::Chunked)
            .whole(0, &mut Vec::new())
            .unwrap();
        assert_eq!(tail, b"0\r\n\r\n");
        let e = Encoder::new(BodyFraming::Length(4)).whole(3, &mut Vec::new());
        assert_eq!(e, Err(LengthMismatch));
    }
}
