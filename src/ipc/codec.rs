//! Pure bytes ↔ frames for the IPC channel: one JSON object per `\n`-terminated line, each with a
//! string `"type"`. The decoder is fed whatever chunks the socket gives and yields complete lines;
//! nothing a peer sends can make it fail for good or buffer without bound: a line over
//! [`MAX_LINE_BYTES`] is dropped as it streams past (one error item, then it resynchronises at the
//! next newline), and a line that is not a JSON object with a `type` is one error item, skipped.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// The longest line accepted (without its newline). A status or snapshot is a few KB; a graph
/// history can be hundreds of KB, so 1 MiB leaves room without letting a peer exhaust memory.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// Why a line was skipped. Never fatal: the channel goes on with the next line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CodecError {
    /// A line longer than [`MAX_LINE_BYTES`]; `len` is how much of it was seen before giving up.
    TooLong { len: usize },
    /// Not JSON, or not UTF-8.
    Malformed(String),
    /// JSON, but not an object with a string `type`.
    NoType,
    /// An object of a known type whose fields did not fit it.
    BadFields { type_name: String, error: String },
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodecError::TooLong { len } => {
                write!(f, "line over {MAX_LINE_BYTES} bytes skipped ({len}+ bytes)")
            }
            CodecError::Malformed(e) => write!(f, "malformed JSON line skipped: {e}"),
            CodecError::NoType => f.write_str("line skipped: not a JSON object with a \"type\""),
            CodecError::BadFields { type_name, error } => {
                write!(f, "\"{type_name}\" message skipped: {error}")
            }
        }
    }
}

impl std::error::Error for CodecError {}

/// One decoded line: its `type` and the whole object.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    pub type_name: String,
    pub value: Value,
}

/// Splits a byte stream into lines, bounded by [`MAX_LINE_BYTES`].
#[derive(Debug, Default)]
pub struct LineDecoder {
    buf: Vec<u8>,
    /// Inside an oversize line: bytes are dropped until the next newline.
    skipping: bool,
}

impl LineDecoder {
    pub fn new() -> LineDecoder {
        LineDecoder::default()
    }

    /// Feeds one chunk; appends every line it completes (as a frame or an error) to `out`.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<Result<Frame, CodecError>>) {
        while !chunk.is_empty() {
            let newline = chunk.iter().position(|&b| b == b'\n');
            let (part, rest, complete) = match newline {
                Some(i) => (&chunk[..i], &chunk[i + 1..], true),
                None => (chunk, &chunk[chunk.len()..], false),
            };
            if self.skipping {
                self.skipping = !complete;
            } else if self.buf.len() + part.len() > MAX_LINE_BYTES {
                out.push(Err(CodecError::TooLong {
                    len: self.buf.len() + part.len(),
                }));
                self.buf = Vec::new();
                self.skipping = !complete;
            } else {
                self.buf.extend_from_slice(part);
                if complete {
                    let line = std::mem::take(&mut self.buf);
                    if !line.iter().all(u8::is_ascii_whitespace) {
                        out.push(parse_frame(&line));
                    }
                }
            }
            chunk = rest;
        }
    }

    /// Bytes of an unfinished line held (a partial final line at EOF is dropped, not decoded:
    /// a peer that died mid-write sent half a message).
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The unfinished line's bytes, taken (an in-place upgrade carries them to the new
    /// program, which feeds them first). Inside an oversize line nothing is kept: the rest of
    /// it is then skipped as a bad line.
    pub(crate) fn take_partial(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

/// Parses one line (without its newline) into a frame.
pub fn parse_frame(line: &[u8]) -> Result<Frame, CodecError> {
    let value: Value =
        serde_json::from_slice(line).map_err(|e| CodecError::Malformed(e.to_string()))?;
    let type_name = value
        .get("type")
        .and_then(Value::as_str)
        .ok_or(CodecError::NoType)?
        .to_string();
    Ok(Frame { type_name, value })
}

/// A frame as a typed message.
pub fn decode<T: DeserializeOwned>(frame: Frame) -> Result<T, CodecError> {
    let type_name = frame.type_name;
    T::deserialize(frame.value).map_err(|e| CodecError::BadFields {
        type_name,
        error: e.to_string(),
    })
}

/// One message as one line, newline included. serde_json escapes control characters inside
/// strings, so the only raw newline is the terminator.
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut v = serde_json::to_vec(msg)?;
    v.push(b'\n');
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(d: &mut LineDecoder, chunks: &[&[u8]]) -> Vec<Result<Frame, CodecError>> {
        let mut out = Vec::new();
        for c in chunks {
            d.feed(c, &mut out);
        }
        out
    }

    fn types(items: &[Result<Frame, CodecError>]) -> Vec<String> {
        items
            .iter()
            .map(|r| match r {
                Ok(f) => f.type_name.clone(),
                Err(e) => format!("ERR {e}"),
            })
            .collect()
    }

    const STREAM: &[u8] = b"{\"type\":\"ready\",\"code\":\"tx1\",\"pid\":7,\"port\":3002}\n{\"type\":\"status\",\"inFlight\":2,\"note\":\"a\\nb \xc3\xa9\"}\n";

    #[test]
    fn every_split_of_two_messages_gives_the_same_two_frames() {
        for i in 0..=STREAM.len() {
            for j in i..=STREAM.len() {
                let mut d = LineDecoder::new();
                let out = feed_all(&mut d, &[&STREAM[..i], &STREAM[i..j], &STREAM[j..]]);
                assert_eq!(types(&out), ["ready", "status"], "split at {i},{j}");
                assert_eq!(d.pending(), 0);
            }
        }
    }

    #[test]
    fn byte_at_a_time_works() {
        let mut d = LineDecoder::new();
        let mut out = Vec::new();
        for b in STREAM {
            d.feed(std::slice::from_ref(b), &mut out);
        }
        assert_eq!(types(&out), ["ready", "status"]);
        assert_eq!(
            out[1].as_ref().map(|f| f.value["note"].clone()).ok(),
            Some("a\nb é".into())
        );
    }

    #[test]
    fn garbage_and_typeless_lines_are_skipped_not_fatal() {
        let mut d = LineDecoder::new();
        let out = feed_all(
            &mut d,
            &[b"not json\n[1,2]\n{\"kind\":1}\n{\"type\":5}\n\xff\xfe\n\n  \n{\"type\":\"ok\"}\n"],
        );
        assert_eq!(out.len(), 6);
        assert!(matches!(out[0], Err(CodecError::Malformed(_))));
        assert_eq!(out[1], Err(CodecError::NoType));
        assert_eq!(out[2], Err(CodecError::NoType));
        assert_eq!(out[3], Err(CodecError::NoType));
        assert!(matches!(out[4], Err(CodecError::Malformed(_))));
        assert_eq!(types(&out[5..]), ["ok"]);
    }

    #[test]
    fn an_oversize_line_is_one_error_and_not_buffered_and_the_next_line_decodes() {
        let mut d = LineDecoder::new();
        let mut out = Vec::new();
        d.feed(b"{\"type\":\"big\",\"x\":\"", &mut out);
        let block = vec![b'a'; 64 * 1024];
        for _ in 0..40 {
            d.feed(&block, &mut out);
            assert!(d.pending() <= MAX_LINE_BYTES);
        }
        assert_eq!(out.len(), 1);
        assert!(matches!(out[0], Err(CodecError::TooLong { .. })));
        assert_eq!(d.pending(), 0, "the rest of the oversize line is not held");
        d.feed(b"\"}\n{\"type\":\"after\"}\n", &mut out);
        assert_eq!(types(&out[1..]), ["after"]);
    }

    #[test]
    fn a_line_of_exactly_the_limit_is_accepted_and_one_over_is_not() {
        let mk = |n: usize| {
            let mut l = b"{\"type\":\"t\",\"x\":\"".to_vec();
            l.resize(n - 2, b'a');
            l.extend_from_slice(b"\"}\n");
            l
        };
        let mut d = LineDecoder::new();
        let mut out = Vec::new();
        d.feed(&mk(MAX_LINE_BYTES), &mut out);
        d.feed(&mk(MAX_LINE_BYTES + 1), &mut out);
        assert!(out[0].is_ok());
        assert!(matches!(out[1], Err(CodecError::TooLong { .. })));
        // A whole oversize line in one chunk leaves nothing to skip.
        d.feed(b"{\"type\":\"next\"}\n", &mut out);
        assert_eq!(types(&out[2..]), ["next"]);
    }

    #[test]
    fn a_partial_final_line_is_held_not_decoded() {
        let mut d = LineDecoder::new();
        let out = feed_all(&mut d, &[b"{\"type\":\"a\"}\n{\"type\":\"b\""]);
        assert_eq!(types(&out), ["a"]);
        assert_eq!(d.pending(), br#"{"type":"b""#.len());
    }

    #[test]
    fn encode_is_one_line() {
        let v = serde_json::json!({"type": "x", "s": "line1\nline2\r\u{2028}"});
        let bytes = encode(&v).unwrap_or_default();
        assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count(), 1);
        assert_eq!(bytes.last(), Some(&b'\n'));
        let mut d = LineDecoder::new();
        let mut out = Vec::new();
        d.feed(&bytes, &mut out);
        assert_eq!(out[0].as_ref().map(|f| f.value.clone()).ok(), Some(v));
    }
}
