//! Where each request begins in the bytes hyper reads from a kept-alive connection, so that the
//! next request's head is checked (`head_check`) before hyper sees it: hyper answers a head its
//! parser refuses with a bare `400` of its own and never calls the service, so a head it would
//! refuse must not reach it. The bytes are passed a request at a time: a head once whole and
//! taken, then its body as its framing says (`Content-Length`, or chunked as hyper decodes it);
//! a head that would be refused is kept back, and the connection goes to the lobby, which
//! answers it (`ParkIo`, `served`).
//!
//! Sans-I/O: fed the bytes, it says how many may go to hyper.

use super::head_check::{check, Body, Check, Taken};

/// What may be done with the bytes at the start of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// This many (at least one) may go to hyper.
    Pass(usize),
    /// Nothing yet: a head not whole.
    Wait,
    /// The head here is one hyper would refuse (or is over `max_head`): keep it back.
    Refuse,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Head,
    Length(u64),
    Chunk(Chunk),
    /// Everything passes unchecked: hyper reads nothing after the last request (or failed the
    /// body, and closes).
    Done,
}

/// hyper's chunked decoder's states (`proto/h1/decode.rs`), as far as framing needs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    Start,
    Size(u64),
    Lws(u64),
    Ext(u64),
    SizeLf(u64),
    Data(u64),
    DataCr,
    DataLf,
    EndCr,
    Trailer,
    TrailerLf,
    EndLf,
}

/// Follows one hyper connection's requests from its first byte.
#[derive(Debug)]
pub struct Framer {
    state: State,
    max_head: usize,
}

impl Framer {
    /// At the start of a head; a partial head of `max_head` bytes is refused (`431`).
    pub fn new(max_head: usize) -> Framer {
        Framer {
            state: State::Head,
            max_head,
        }
    }

    /// One that passes everything unchecked.
    pub fn done() -> Framer {
        Framer {
            state: State::Done,
            max_head: 0,
        }
    }

    /// Bytes of the body of the request just passed still to come (`u64::MAX`: not known, a
    /// chunked body, or nothing more is followed).
    pub fn body_left(&self) -> u64 {
        match self.state {
            State::Head => 0,
            State::Length(n) => n,
            State::Chunk(_) | State::Done => u64::MAX,
        }
    }

    /// At a head's start: the next bytes passed are a head.
    pub fn at_head(&self) -> bool {
        self.state == State::Head
    }

    /// How many of the bytes at the start of `buf` may go to hyper; the framer moves past what
    /// it passes.
    pub fn step(&mut self, buf: &[u8]) -> Step {
        if buf.is_empty() {
            return Step::Wait;
        }
        match self.state {
            State::Head => match check(buf) {
                Check::Partial if buf.len() >= self.max_head => Step::Refuse,
                Check::Partial => Step::Wait,
                Check::Refused(_) => Step::Refuse,
                Check::Taken(t) if t.len > self.max_head => Step::Refuse,
                Check::Taken(t) => {
                    self.state = after_head(t);
                    Step::Pass(t.len)
                }
            },
            State::Length(n) => {
                let k = n.min(buf.len() as u64);
                self.state = if k == n {
                    State::Head
                } else {
                    State::Length(n - k)
                };
                Step::Pass(k as usize)
            }
            State::Chunk(c) => Step::Pass(self.chunked(c, buf)),
            State::Done => Step::Pass(buf.len()),
        }
    }

    /// Moves through a chunked body; the bytes passed (up to its end, or all of `buf`).
    fn chunked(&mut self, mut c: Chunk, buf: &[u8]) -> usize {
        let mut i = 0;
        while i < buf.len() {
            if let Chunk::Data(n) = c {
                let k = n.min((buf.len() - i) as u64);
                i += k as usize;
                c = if k == n {
                    Chunk::DataCr
                } else {
                    Chunk::Data(n - k)
                };
                continue;
            }
            let b = buf[i];
            i += 1;
            let Some(next) = chunk_byte(c, b) else {
                // hyper fails the body, and closes: nothing after it is read.
                self.state = State::Done;
                return buf.len();
            };
            match next {
                // The body's last LF: a head follows.
                Chunk::Start if c == Chunk::EndLf => {
                    self.state = State::Head;
                    return i;
                }
                _ => c = next,
            }
        }
        self.state = State::Chunk(c);
        i
    }
}

fn after_head(t: Taken) -> State {
    if t.last {
        return State::Done;
    }
    match t.body {
        Body::Length(0) => State::Head,
        Body::Length(n) => State::Length(n),
        Body::Chunked => State::Chunk(Chunk::Start),
    }
}

fn hex(b: u8) -> Option<u64> {
    (b as char).to_digit(16).map(u64::from)
}

/// The state after byte `b` in state `c` (not `Data`); `None`: hyper refuses the body. The end
/// of the body is `EndLf` followed by `Start`.
fn chunk_byte(c: Chunk, b: u8) -> Option<Chunk> {
    use Chunk::*;
    Some(match (c, b) {
        (Start, _) => Size(hex(b)?),
        (Size(n), _) if hex(b).is_some() => Size(n.checked_mul(16)?.checked_add(hex(b)?)?),
        (Size(n) | Lws(n), b'\t' | b' ') => Lws(n),
        (Size(n) | Lws(n) | Ext(n), b'\r') => SizeLf(n),
        (Size(n) | Lws(n), b';') => Ext(n),
        (Ext(_), b'\n') => return None,
        (Ext(n), _) => Ext(n),
        (SizeLf(0), b'\n') => EndCr,
        (SizeLf(n), b'\n') => Data(n),
        (DataCr, b'\r') => DataLf,
        (DataLf, b'\n') => Start,
        (EndCr, b'\r') => EndLf,
        (Trailer, b'\r') => TrailerLf,
        (EndCr | Trailer, _) => Trailer,
        (TrailerLf, b'\n') => EndCr,
        (EndLf, b'\n') => Start,
        _ => return None,
    })
}

#[cfg(test)]
#[path = "framing_tests.rs"]
mod tests;
