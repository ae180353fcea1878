//! Where each request begins in the bytes hyper reads from a kept-alive connection, so that the
//! next request's head is checked (`http1::request_head`) before hyper sees it: hyper answers a head its
//! parser refuses with a bare `400` of its own and never calls the service, so a head it would
//! refuse must not reach it. The bytes are passed a request at a time: a head once whole and
//! taken, then its body as its framing says (`Content-Length`, or chunked, followed by the
//! codec's decoder, whose rules are hyper's);
//! a head that would be refused is kept back, and the connection goes to the lobby, which
//! answers it (`ParkIo`, `hyper_phase`).
//!
//! Sans-I/O: fed the bytes, it says how many may go to hyper.

use crate::proxy::http1::chunked::Chunked;
use crate::proxy::http1::request_head::{check, Body, Check, Taken};

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

#[derive(Debug)]
enum State {
    Head,
    Length(u64),
    /// The codec's own chunked decoder, moving past the body (`Chunked::skip`).
    Chunk(Chunked),
    /// Everything passes unchecked: hyper reads nothing after the last request (or failed the
    /// body, and closes).
    Done,
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
        matches!(self.state, State::Head)
    }

    /// After the last request hyper reads (`Connection: close`, ...): nothing more is followed.
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
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
            State::Chunk(ref mut c) => match c.skip(buf) {
                Ok((n, true)) => {
                    // The body's last LF: a head follows.
                    self.state = State::Head;
                    Step::Pass(n)
                }
                Ok((n, false)) => Step::Pass(n),
                Err(_) => {
                    // hyper fails the body, and closes: nothing after it is read.
                    self.state = State::Done;
                    Step::Pass(buf.len())
                }
            },
            State::Done => Step::Pass(buf.len()),
        }
    }
}

fn after_head(t: Taken) -> State {
    if t.last {
        return State::Done;
    }
    match t.body {
        Body::Length(0) => State::Head,
        Body::Length(n) => State::Length(n),
        Body::Chunked => State::Chunk(Chunked::default()),
    }
}

#[cfg(test)]
#[path = "framing_tests.rs"]
mod tests;
