//! One body decoder for every framing a message can have (RFC 9112 §6.3): a `Content-Length`, the
//! chunked coding (`chunked`), or everything until the close; a message without a body (`HEAD`,
//! `1xx`, `204`, `304`, `Content-Length: 0`) is a length of 0. As hyper's `Decoder { kind:
//! Length | Chunked | Eof }` (`proto/h1/decode.rs`), so the connection's read loop is "fill,
//! then step" whatever the framing.
//!
//! Sans-I/O: fed the connection's read buffer and whether the peer has closed; data comes out as
//! slices of that buffer.

use bytes::BytesMut;

use super::chunked::{ChunkError, Chunked};
use super::response_head::Framing;

/// What the decoder has for the body: some of it (`Data`), `NeedMore`, or its `End` (the chunked
/// coding's steps, the same for every framing).
pub use super::chunked::Step;

/// Why a body could not be read to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    Chunk(ChunkError),
    /// The peer closed before the body's end.
    Closed,
}

#[derive(Debug)]
enum Kind {
    /// Bytes still to come.
    Length(u64),
    Chunked(Chunked),
    /// Until the close.
    Eof,
}

/// A body's decoder, from its head's framing to its end.
#[derive(Debug)]
pub struct Decoder {
    kind: Kind,
}

impl Decoder {
    pub fn new(framing: Framing) -> Decoder {
        let kind = match framing {
            Framing::Empty => Kind::Length(0),
            Framing::Length(n) => Kind::Length(n),
            Framing::Chunked => Kind::Chunked(Chunked::default()),
            Framing::ToClose => Kind::Eof,
        };
        Decoder { kind }
    }

    /// A length with none of it left: the body is over, nothing more need be read.
    pub fn is_end(&self) -> bool {
        matches!(self.kind, Kind::Length(0))
    }

    /// The body ends only with the connection, which then can carry nothing more.
    pub fn ends_at_close(&self) -> bool {
        matches!(self.kind, Kind::Eof)
    }

    /// Bytes still to come, when known.
    pub fn remaining(&self) -> Option<u64> {
        match self.kind {
            Kind::Length(n) => Some(n),
            _ => None,
        }
    }

    /// Takes the body's next bytes from the front of `buf` (`eof`: the peer has closed, nothing
    /// more will come).
    pub fn step(&mut self, buf: &mut BytesMut, eof: bool) -> Result<Step, DecodeError> {
        match &mut self.kind {
            Kind::Length(0) => Ok(Step::End),
            Kind::Length(_) if buf.is_empty() => need_more(eof),
            Kind::Length(left) => {
                let n = buf.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
                *left -= n as u64;
                Ok(Step::Data(buf.split_to(n).freeze()))
            }
            Kind::Chunked(c) => match c.step(buf).map_err(DecodeError::Chunk)? {
                Step::NeedMore => need_more(eof),
                step => Ok(step),
            },
            Kind::Eof if !buf.is_empty() => Ok(Step::Data(buf.split().freeze())),
            Kind::Eof if eof => Ok(Step::End),
            Kind::Eof => Ok(Step::NeedMore),
        }
    }
}

fn need_more(eof: bool) -> Result<Step, DecodeError> {
    if eof {
        Err(DecodeError::Closed)
    } else {
        Ok(Step::NeedMore)
    }
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
