//! The chunked transfer coding (RFC 9112 §7.1), decoded from a connection's read buffer (a
//! process's response body, through `decode`): chunk data comes out as slices of that buffer, chunk extensions are
//! tolerated and skipped, trailers are read past and dropped (the launcher never passes them on).
//!
//! A pure state machine over bytes: no I/O, so the unit tests and the differential test drive it
//! split at any byte. The limits are hyper's, so a process is held to the same rules as before:
//! sizes overflow-checked, at most 16 KB of extensions and of trailers, strict CRLF.

use bytes::{Buf, Bytes, BytesMut};

/// Bytes of chunk extensions a body may have in all (hyper's limit).
const EXTENSIONS_AT_MOST: u64 = 16 * 1024;
/// Bytes of trailers a body may have (hyper's limit).
const TRAILERS_AT_MOST: usize = 16 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// The first hex digit of a size.
    Start,
    Size,
    /// Whitespace after the size.
    SizeLws,
    Extension,
    SizeLf,
    Data,
    DataCr,
    DataLf,
    /// After the last chunk's line: CR (the end) or a trailer line.
    EndCr,
    EndLf,
    Trailer,
    TrailerLf,
    Done,
}

/// What the decoder has for the body.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Some of a chunk's data.
    Data(Bytes),
    /// The buffer is used up before the body's end: read more.
    NeedMore,
    /// The last chunk and its trailers have been read.
    End,
}

/// Why a chunked body was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkError(pub &'static str);

impl std::fmt::Display for ChunkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid chunked body: {}", self.0)
    }
}

/// The decoder's state between reads.
#[derive(Debug)]
pub struct Chunked {
    state: State,
    /// The size being read, then what is left of the chunk's data.
    size: u64,
    extensions: u64,
    trailers: usize,
}

impl Default for Chunked {
    fn default() -> Self {
        Chunked {
            state: State::Start,
            size: 0,
            extensions: 0,
            trailers: 0,
        }
    }
}

impl Chunked {
    /// Consumes framing bytes from the front of `buf` up to the next data (split off and
    /// returned), the body's end, or the end of `buf`.
    pub fn step(&mut self, buf: &mut BytesMut) -> Result<Step, ChunkError> {
        let framing = self.framing(buf)?;
        buf.advance(framing);
        match self.state {
            State::Done => Ok(Step::End),
            State::Data if !buf.is_empty() => {
                let n = self.take_data(buf.len());
                Ok(Step::Data(buf.split_to(n).freeze()))
            }
            _ => Ok(Step::NeedMore),
        }
    }

    /// How many framing bytes at the front of `buf` were read, up to data, the end, or all.
    fn framing(&mut self, buf: &[u8]) -> Result<usize, ChunkError> {
        let mut i = 0;
        while !matches!(self.state, State::Data | State::Done) && i < buf.len() {
            self.state = self.next(buf[i])?;
            i += 1;
        }
        Ok(i)
    }

    /// Up to `available` bytes of the chunk's data, counted off: how many.
    fn take_data(&mut self, available: usize) -> usize {
        let n = usize::try_from(self.size)
            .unwrap_or(usize::MAX)
            .min(available);
        self.size -= n as u64;
        if self.size == 0 {
            self.state = State::DataCr;
        }
        n
    }

    /// The state after framing byte `b`.
    fn next(&mut self, b: u8) -> Result<State, ChunkError> {
        use State::*;
        let digit = |b: u8| (b as char).to_digit(16).map(u64::from);
        Ok(match (self.state, b) {
            (Start, _) => {
                let d = digit(b).ok_or(ChunkError("missing size digit"))?;
                self.size = d;
                Size
            }
            (Size, _) if digit(b).is_some() => {
                let d = digit(b).unwrap_or(0);
                self.size = self
                    .size
                    .checked_mul(16)
                    .and_then(|s| s.checked_add(d))
                    .ok_or(ChunkError("chunk size overflows"))?;
                Size
            }
            (Size | SizeLws, b'\t' | b' ') => SizeLws,
            (Size | SizeLws, b';') => Extension,
            (Size | SizeLws | Extension, b'\r') => SizeLf,
            (Size | SizeLws, _) => return Err(ChunkError("invalid size line")),
            (Extension, b'\n') => return Err(ChunkError("newline in a chunk extension")),
            (Extension, _) => {
                self.extensions += 1;
                if self.extensions >= EXTENSIONS_AT_MOST {
                    return Err(ChunkError("chunk extensions over the limit"));
                }
                Extension
            }
            (SizeLf, b'\n') if self.size == 0 => EndCr,
            (SizeLf, b'\n') => Data,
            (SizeLf, _) => return Err(ChunkError("size line not ended by CRLF")),
            (DataCr, b'\r') => DataLf,
            (DataCr, _) => return Err(ChunkError("chunk data not followed by CR")),
            (DataLf, b'\n') => {
                self.size = 0;
                Start
            }
            (DataLf, _) => return Err(ChunkError("chunk data not followed by LF")),
            (EndCr, b'\r') => EndLf,
            (EndCr | Trailer, _) => {
                self.trailer_byte()?;
                if b == b'\r' {
                    TrailerLf
                } else {
                    Trailer
                }
            }
            (EndLf, b'\n') => Done,
            (EndLf, _) => return Err(ChunkError("last chunk not ended by CRLF")),
            (TrailerLf, b'\n') => {
                self.trailer_byte()?;
                EndCr
            }
            (TrailerLf, _) => return Err(ChunkError("trailer not ended by CRLF")),
            (Data | Done, _) => unreachable_state(),
        })
    }

    fn trailer_byte(&mut self) -> Result<(), ChunkError> {
        self.trailers += 1;
        if self.trailers > TRAILERS_AT_MOST {
            return Err(ChunkError("trailers over the limit"));
        }
        Ok(())
    }
}

/// `step` handles `Data` and `Done` before asking for a byte's next state.
fn unreachable_state() -> State {
    debug_assert!(false, "no byte is read in the Data or Done state");
    State::Done
}

#[cfg(test)]
#[path = "chunked_tests.rs"]
mod tests;
