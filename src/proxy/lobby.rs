//! The lobby: a connection's next request read, routed and admitted before hyper is given the
//! connection, whenever hyper does not hold it (a new connection, a parked one that wakes). A
//! tx request that must wait in the queue waits here, holding only its own bytes, its ticket and
//! the socket; hyper is given the connection once the scheduler has decided, and the request's
//! service takes the decision made here instead of asking again.
//!
//! Why: a request waiting inside hyper holds hyper's read and write buffers (8 KB each) for as
//! long as it waits, about 13 KB in all; a surge of clients that each open a connection and
//! wait would cost the launcher that much apiece. Here one costs about 2 KB.
//!
//! A head still arriving is waited for here, with hyper's header timeout counted from when the
//! connection was accepted or went idle (so a slow client holds only the bytes it has sent).
//! Only a whole request is admitted: the head complete, no chunked body, all of a
//! `Content-Length` body read, an origin-form target. Anything else (a large or chunked body, a
//! malformed head) is handed to hyper as read, to be answered as ever.
//!
//! While a request waits here, the socket is watched as hyper watches it: the client hanging up
//! cancels the request; more bytes (a pipelined request) are kept for hyper, up to
//! [`PIPELINED_AT_MOST`] (then the socket is left unread until hyper has it, as hyper leaves it
//! once its buffer is full).

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use http::Method;
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use tracing::debug;

use super::front::{Decision, Front, Ticket};
use super::route::{RequestHead, Route, TxDemand};

/// Bytes read ahead for hyper at most; a request with a larger body is left to hyper.
pub const KEEP_AT_MOST: usize = 64 * 1024;

/// Bytes of what follows a waiting request (pipelined) read while it waits, at most.
pub const PIPELINED_AT_MOST: usize = 8 * 1024;

/// Headers a head may have to be admitted here (hyper takes up to 100; more go to hyper).
const MAX_HEADERS: usize = 64;

/// A tx request admitted in the lobby, for its service to take up.
pub struct Early {
    pub demand: TxDemand,
    pub ticket: Ticket,
    /// Already decided (the value is there to be received), or left to come if the scheduler
    /// had not decided yet when hyper was given the connection.
    pub decision: oneshot::Receiver<Decision>,
}

/// How a connection leaves the lobby.
pub enum Leave {
    /// The client closed (or the socket failed) with no request to answer.
    Gone,
    /// To be closed: no whole head by the header deadline, or the drain began before one.
    Close,
    /// To hyper, with the bytes read ahead and the first request's admission if it was admitted.
    Serve { unread: Bytes, early: Option<Early> },
}

/// Reads what the client sends after `unread` until a head is whole, admits the request if it
/// is whole and for a tx process, and waits here while the scheduler decides.
///
/// A head not whole by `deadline` (`headerTimeoutSeconds` after the connection was accepted or
/// went idle) closes the connection, as hyper's header timeout would; so does the drain. While
/// nothing has arrived the connection holds no buffer.
pub async fn enter(
    stream: &TcpStream,
    unread: Bytes,
    front: &Arc<Front>,
    deadline: Option<Instant>,
    drain: &mut watch::Receiver<bool>,
) -> Leave {
    let mut buf = Vec::from(unread);
    loop {
        match read_available(stream, &mut buf) {
            Ok(true) if buf.is_empty() => return Leave::Gone,
            // Hung up after sending: hyper answers what it can, as it would have.
            Ok(true) => return serve(buf, None),
            Ok(false) => {}
            Err(_) => return Leave::Gone,
        }
        if !head_arriving(&buf) {
            break;
        }
        if *drain.borrow() {
            return Leave::Close;
        }
        tokio::select! {
            ready = stream.readable() => if ready.is_err() {
                return Leave::Gone;
            },
            () = sleep_until(deadline) => {
                debug!(
                    "a client sent no whole request head within headerTimeoutSeconds \
                     ({} bytes): closed",
                    buf.len()
                );
                return Leave::Close;
            }
            _ = drain.changed() => return Leave::Close,
        }
    }
    let Some(head) = whole_request(&buf) else {
        return serve(buf, None);
    };
    let watch_up_to = (head.len + PIPELINED_AT_MOST).min(KEEP_AT_MOST);
    let Ok(Route::Tx(demand)) = front.route(&head.as_route()) else {
        return serve(buf, None);
    };
    let (ticket, mut decision) = front.admit(&demand);
    if !decision.is_empty() {
        return serve(
            buf,
            Some(Early {
                demand,
                ticket,
                decision,
            }),
        );
    }
    let decided = loop {
        let watch = buf.len() < watch_up_to;
        tokio::select! {
            d = &mut decision => break d,
            ready = stream.readable(), if watch => {
                let hung_up = ready.is_err()
                    || !matches!(read_available(stream, &mut buf), Ok(false));
                if hung_up {
                    // Dropping the ticket cancels the request, as hyper's noticing would.
                    return Leave::Gone;
                }
            }
        }
    };
    // The decision was received here; the service receives it again from a new channel (a
    // channel dropped unsent is the scheduler's "stopping", as before).
    let (tx, decision) = oneshot::channel();
    if let Ok(d) = decided {
        let _ = tx.send(d);
    }
    serve(
        buf,
        Some(Early {
            demand,
            ticket,
            decision,
        }),
    )
}

/// Sleeps until `deadline`; forever without one.
pub async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

fn serve(buf: Vec<u8>, early: Option<Early>) -> Leave {
    Leave::Serve {
        unread: Bytes::from(buf),
        early,
    }
}

/// Appends what the socket has now, without waiting; `Ok(true)` once the client has closed.
/// Not async, so its buffer is on the stack only while it runs.
fn read_available(stream: &TcpStream, buf: &mut Vec<u8>) -> io::Result<bool> {
    let mut chunk = [0u8; 8192];
    while buf.len() < KEEP_AT_MOST {
        match stream.try_read(&mut chunk) {
            Ok(0) => return Ok(true),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(false)
}

/// Whether `buf` holds nothing yet or the start of a head not yet whole (and not too large to
/// keep waiting for here). A whole head, or bytes that are no head, are for what follows.
fn head_arriving(buf: &[u8]) -> bool {
    if buf.len() >= KEEP_AT_MOST {
        return false;
    }
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    matches!(
        httparse::Request::new(&mut headers).parse(buf),
        Ok(httparse::Status::Partial)
    )
}

/// What routing needs of a request `buf` holds whole.
#[derive(Debug, PartialEq, Eq)]
pub struct Head<'a> {
    /// The whole request's length: head and body.
    pub len: usize,
    pub method: Method,
    pub target: &'a str,
    pub cache_id: Option<&'a [u8]>,
    pub content_length: Option<u64>,
}

impl Head<'_> {
    pub fn as_route(&self) -> RequestHead<'_> {
        RequestHead {
            method: &self.method,
            target: self.target,
            cache_id: self.cache_id,
            content_length: self.content_length,
        }
    }
}

/// The head of the request at the start of `buf`, if `buf` holds all of it and its body, and
/// the lobby may admit it (see the module's notes); `None` leaves it to hyper.
pub fn whole_request(buf: &[u8]) -> Option<Head<'_>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let httparse::Status::Complete(head_len) = req.parse(buf).ok()? else {
        return None;
    };
    let target = req.path.filter(|t| t.starts_with('/'))?;
    let method = Method::from_bytes(req.method?.as_bytes()).ok()?;
    let mut cache_id = None;
    let mut content_length = None;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return None;
        } else if h.name.eq_ignore_ascii_case("content-length") {
            // Twice, or not a number: hyper answers it.
            let n = std::str::from_utf8(h.value)
                .ok()?
                .trim()
                .parse::<u64>()
                .ok()?;
            if content_length.replace(n).is_some() {
                return None;
            }
        } else if h.name.eq_ignore_ascii_case("x-cache-id") && cache_id.is_none() {
            // As hyper gives a value: without the whitespace around it.
            cache_id = Some(h.value.trim_ascii());
        }
    }
    let body = usize::try_from(content_length.unwrap_or(0)).ok()?;
    if head_len + body > buf.len() {
        return None;
    }
    Some(Head {
        len: head_len + body,
        method,
        target,
        cache_id,
        content_length,
    })
}

#[cfg(test)]
#[path = "lobby_tests.rs"]
mod tests;
