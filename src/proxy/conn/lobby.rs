//! The lobby: a connection's next request read, routed and admitted before hyper is given the
//! connection, whenever hyper does not hold it (a new connection, a parked one that wakes). A
//! tx request that must wait in the queue waits here, holding only its own bytes, its ticket and
//! the socket; hyper is given the connection once the scheduler has decided, and the request's
//! service takes the decision made here instead of asking again.
//!
//! Why: a request waiting inside hyper holds hyper's read and write buffers for as long as it
//! waits; a surge of clients that each open a connection and wait would cost the launcher those
//! apiece. Here one costs a small part of that (DEC-57).
//!
//! A head still arriving is waited for here, with the header timeout counted from when the
//! connection was accepted or went idle (so a slow client holds only the bytes it has sent). A
//! head over `headerMaxKB` is answered `431` here, before any process is asked, and the
//! connection closed. A head hyper's parser would refuse (`http1::request_head`) is answered here with the
//! launcher's own `400` (or `431`, `414`) and closed (on a connection hyper holds, hyper answers
//! it, `hyper_phase`). Only a whole
//! request is admitted: the head complete, no chunked body, all of a `Content-Length` body read,
//! an origin-form target, one `Host`. Anything else (a large or chunked body, no `Host`) is
//! handed to hyper as read, to be answered as ever.
//!
//! What a request waiting here holds counts against the budget (`proxy::budget`); while the
//! budget is full, the head is read a chunk at a time, so little more than the head is read
//! ahead and a body waits in the socket instead.
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
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::debug;

use crate::proxy::admission::Early;
use crate::proxy::front::Front;
use crate::proxy::http1::request_head::{self, Body, Check, Refused, Span, Taken};
use crate::proxy::route::{RequestHead, Route};
use crate::proxy::verdict::Verdict;

/// Bytes read ahead for hyper at most; a request with a larger body is left to hyper.
pub const KEEP_AT_MOST: usize = 64 * 1024;

/// Bytes of what follows a waiting request (pipelined) read while it waits, at most.
pub const PIPELINED_AT_MOST: usize = 8 * 1024;

/// Bytes read from the socket at a time.
const CHUNK: usize = 8192;

/// How a connection leaves the lobby.
pub enum Leave {
    /// The client closed (or the socket failed) with no request to answer.
    Gone,
    /// To be closed: no whole head by the header deadline.
    Close,
    /// The drain began before a whole head: closed (a stop) or handed over (an upgrade), with
    /// the bytes read of the head begun, if any.
    Drained { unread: Bytes },
    /// To be answered `431` and closed: the head is over `max_head` bytes (its bytes, for the
    /// access log).
    HeadTooLarge { head: Vec<u8> },
    /// To be answered (`400`, `431`, `414`) and closed: a head hyper would refuse; its bytes,
    /// for the access log.
    Refused { why: Refused, head: Vec<u8> },
    /// To hyper, with the bytes read ahead and the first request's admission if it was admitted.
    Serve { unread: Bytes, early: Option<Early> },
}

/// Reads what the client sends after `buf` (what was read of it before) until a head is whole, admits the request if it
/// is whole and for a tx process, and waits here while the scheduler decides.
///
/// A head not whole by `deadline` (`headerTimeoutSeconds` after the connection was accepted or
/// went idle) closes the connection, as hyper's header timeout would; the drain ends it too
/// (`Leave::Drained`, with what was read). While
/// nothing has arrived the connection holds no buffer.
///
/// Not an `async fn`, whose future keeps each argument twice (rust-lang/rust#62958): the block
/// uses what it captures in place.
#[allow(clippy::manual_async_fn)] // On purpose: see above.
pub fn enter<'a>(
    stream: &'a TcpStream,
    mut buf: Vec<u8>,
    front: &'a Arc<Front>,
    deadline: Option<Instant>,
    drain: &'a mut watch::Receiver<bool>,
    max_head: usize,
) -> impl std::future::Future<Output = Leave> + Send + 'a {
    async move {
        let parsed = loop {
            // With the budget full, a chunk at a time until the head is whole: little of a body is
            // read ahead, and the rest waits in the socket.
            let read_up_to = if front.budget.has_room(KEEP_AT_MOST as u64) {
                KEEP_AT_MOST
            } else {
                (buf.len() + CHUNK).min(max_head)
            };
            match read_available(stream, &mut buf, read_up_to) {
                Ok(true) if buf.is_empty() => return Leave::Gone,
                // Done sending (a half-close, or a hang-up: they look alike): hyper, told of the
                // end as it reads, takes it for a hang-up (DEC-52); what it would
                // refuse, the launcher answers.
                Ok(true) => {
                    return match request_head::check(&buf) {
                        Check::Refused(why) => Leave::Refused { why, head: buf },
                        _ => serve(buf, None),
                    }
                }
                Ok(false) => {}
                Err(_) => return Leave::Gone,
            }
            // A whole head, bytes that are no head, or a head over `max_head`: for what follows.
            // (In a `match` of its own: a reading kept in the loop's scope would have room in the
            // task while it waits below.)
            match request_head::check(&buf) {
                Check::Partial if buf.len() < max_head => {}
                parsed => break parsed,
            }
            if *drain.borrow() {
                return Leave::Drained {
                    unread: Bytes::from(buf),
                };
            }
            tokio::select! {
                ready = readable(stream) => if ready.is_err() {
                    return Leave::Gone;
                },
                () = sleep_until(deadline) => {
                    front.counters.observed.header_timeouts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    debug!(
                        "a client sent no whole request head within headerTimeoutSeconds \
                         ({} bytes): closed",
                        buf.len()
                    );
                    return Leave::Close;
                }
                _ = drain.changed() => return Leave::Drained { unread: Bytes::from(buf) },
            }
        };
        // In a block: the reading and the head are not kept (nor room for them) while it waits.
        let (demand, watch_up_to) = {
            let taken = match parsed {
                // Not whole, and no more is waited for: over `max_head`.
                Check::Partial => return Leave::HeadTooLarge { head: buf },
                Check::Taken(t) if t.len > max_head => return Leave::HeadTooLarge { head: buf },
                Check::Refused(why) => return Leave::Refused { why, head: buf },
                Check::Taken(t) => t,
            };
            let Some(head) = whole_request(&buf, &taken) else {
                return serve(buf, None);
            };
            if buf.len() > head.len {
                // Pipelined (more was sent without waiting for this answer): hyper's service admits
                // it, as one of the few pipelined requests routed at once (`hyper_phase`).
                return serve(buf, None);
            }
            let watch_up_to = (head.len + PIPELINED_AT_MOST).min(KEEP_AT_MOST);
            let Ok(Route::Tx(demand)) = front.route(&head.as_route()) else {
                return serve(buf, None);
            };
            (demand, watch_up_to)
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
        // Held while it waits: counted, so that a crowd of them stops the reading ahead of more.
        let held = front.budget.take_anyway(buf.len() as u64);
        let waiting = front.counters.observed.waiting();
        let decided = loop {
            let watch = buf.len() < watch_up_to;
            tokio::select! {
                d = &mut decision => break d,
                ready = readable(stream), if watch => {
                    let hung_up = ready.is_err()
                        || !matches!(read_available(stream, &mut buf, watch_up_to), Ok(false));
                    if hung_up {
                        // Dropping the ticket cancels the request, as hyper's noticing would.
                        return Leave::Gone;
                    }
                }
            }
        };
        drop((held, waiting));
        // The decision was received here; the service takes it as made (none: the scheduler's
        // "stopping", as before).
        let decision = Verdict::made(decided);
        serve(
            buf,
            Some(Early {
                demand,
                ticket,
                decision,
            }),
        )
    }
}

/// Waits until `stream` may be read. Through the socket's one reader waker, not `readable()`,
/// whose future holds a waiter of its own: about 150 bytes less in every connection's task
/// while it waits here (the lobby is the socket's only reader meanwhile).
fn readable(stream: &TcpStream) -> impl std::future::Future<Output = io::Result<()>> + '_ {
    std::future::poll_fn(move |cx| stream.poll_read_ready(cx))
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

/// Appends what the socket has now, up to `up_to` bytes in `buf`, without waiting; `Ok(true)`
/// once the client has closed. Not async: it reads through the thread's scratch buffer
/// (`SCRATCH`), so `buf` grows by what was read and no more.
fn read_available(stream: &TcpStream, buf: &mut Vec<u8>, up_to: usize) -> io::Result<bool> {
    SCRATCH.with_borrow_mut(|chunk| {
        while buf.len() < up_to {
            let room = (up_to - buf.len()).min(chunk.len());
            match stream.try_read(&mut chunk[..room]) {
                Ok(0) => return Ok(true),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    })
}

thread_local! {
    /// One read's room per thread, zeroed once: a fresh `[0; CHUNK]` on the stack at each
    /// read would be a `memset` of the whole chunk twice a request (a read, then the one that
    /// would block), a large part of what forwarding a request costs.
    static SCRATCH: std::cell::RefCell<Box<[u8]>> =
        std::cell::RefCell::new(vec![0u8; CHUNK].into_boxed_slice());
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

/// The head of the request at the start of `buf` (`taken`: the codec's reading of it), if `buf`
/// holds all of it and its body, and the lobby may admit it (see the module's notes); `None`
/// leaves it to hyper.
pub fn whole_request<'a>(buf: &'a [u8], taken: &Taken) -> Option<Head<'a>> {
    let r = &taken.route;
    let at = |(a, b): Span| buf.get(a..b);
    let target = std::str::from_utf8(at(r.target)?)
        .ok()
        .filter(|t| t.starts_with('/'))?;
    // Without a fragment, as `http::Uri` gives the path and query hyper's service routes by: a
    // fragment routed here and not there made the two routings differ (the differential test).
    let target = target.split_once('#').map_or(target, |(t, _)| t);
    // `CONNECT` is refused by the service (`forward::refuse`): not queued first.
    let method = Method::from_bytes(at(r.method)?)
        .ok()
        .filter(|m| m != Method::CONNECT)?;
    // RFC 9112 §3.2: one `Host` (HTTP/1.0 may have none); hyper's service answers the rest. A
    // transfer coding or `Content-Length` lines repeated: hyper's service reads the body.
    if r.hosts > 1 || (r.hosts == 0 && !r.http_10) || r.transfer_encoding || r.lengths > 1 {
        return None;
    }
    let content_length = match taken.body {
        Body::Length(n) if r.lengths == 1 => Some(n),
        Body::Length(_) => None,
        Body::Chunked => return None,
    };
    let cache_id = match r.cache_id {
        Some(s) => Some(at(s)?),
        None => None,
    };
    // Checked: a length near 2^64 would wrap to a request shorter than its own head.
    let len = usize::try_from(content_length.unwrap_or(0))
        .ok()
        .and_then(|body| taken.len.checked_add(body))?;
    if len > buf.len() {
        return None;
    }
    Some(Head {
        len,
        method,
        target,
        cache_id,
        content_length,
    })
}

#[cfg(test)]
#[path = "lobby_tests.rs"]
mod tests;
