//! The pieces that let an idle keep-alive client connection be parked outside hyper: what the
//! service and the stream tell the connection's loop (`Activity`), the pure rule that says when
//! a connection has been idle long enough (`Quiet`), the stream that gives hyper back the bytes
//! read before a park (`park_io::ParkIo`), and the response body that says when hyper is done with it
//! (`TrackedBody`).
//!
//! Why: hyper holds its read buffer, its write buffer and its state per connection for the
//! connection's whole life, idle or not. A parked connection is only the socket and its task,
//! so many idle keep-alive clients (nginx's `keepalive 32` and more, EDGE-6) cost little.
//!
//! When hyper may be stopped without the client seeing anything: no request in flight, the last
//! response's body dropped by hyper (it has been encoded whole), no write left stalled (nothing
//! buffered unsent), and the last request's body, if it had one, read whole before its response
//! (so hyper is not still reading one). Then hyper's state is idle, `graceful_shutdown` closes
//! it without writing, and `into_parts` gives back the socket and any bytes of a next request
//! read but not parsed yet.
//!
//! When: after about a second idle (`park_after`); at once as the first response on a new
//! connection ends; or, in a crowd, at once as its response ends while requests wait in the
//! queue (`park_at_once`).
//!
//! The first response: most keep-alive clients that send one request and stay open (health
//! checkers, a proxy's idle pool, a browser's spare connection) would otherwise hold hyper's
//! buffers for a second, and a crowd of them arriving together would leave the launcher large after
//! the parks (the freed buffers pin the pages the parked connections' own few KB share), where
//! parked at once they give them back (DEC-56). A client that goes on sending costs one more hyper
//! connection made, once per connection (its next hyper phase parks by the other rules), not per
//! request.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use crate::proxy::forward::ProxyBody;

/// One connection's counts, shared by its service, its stream and its loop (which outlive any
/// one hyper connection on the socket).
#[derive(Debug)]
pub struct Activity {
    /// When the connection was accepted; times below are milliseconds since.
    epoch: Instant,
    started: AtomicU32,
    ended: AtomicU32,
    last_end_ms: AtomicU64,
    bodied: AtomicBool,
    write_stalled: AtomicBool,
    /// `ended` when bytes last came from the client (`park_io`): a request that begins with
    /// more ended than that was read before its previous one's answer was written.
    ended_at_read: AtomicU32,
    /// The request hyper has just read was sent before the client had its previous answer: it
    /// yields to those of clients that wait for their answers (`hyper_phase`).
    pipelined: AtomicBool,
    /// Bytes written to the client since the accept: bounds its send queue without a system
    /// call (`unread::Seen`).
    written: AtomicU64,
}

/// Connections served by hyper at once above which idle ones are parked sooner: a crowd of
/// idle clients costs hyper's buffers each, a few keep-alive ones do not matter.
pub const CROWD: usize = 1000;

/// How long a connection must be idle before it is parked, with `hyper_phase` connections served by
/// hyper: about a second (a keep-alive client between requests is not parked and re-served each
/// time), a quarter of that in a crowd; and no longer than the header timeout (`header`, zero:
/// none), which only the lobby keeps: hyper is given no timer (its header timer is armed and
/// dropped on every request), so a client that sends no next head, or sends it slowly, is parked by
/// then and cut off by the lobby at the deadline counted from its last response, as hyper would
/// have.
pub fn park_after(served: usize, header: Duration) -> Duration {
    let after = if served > CROWD {
        Duration::from_millis(250)
    } else {
        Duration::from_secs(1)
    };
    if header.is_zero() {
        after
    } else {
        after.min(header)
    }
}

/// Whether a connection whose response has just ended is parked at once (not after
/// `park_after`): when requests wait in the queue, its next request is likely to wait too, and
/// it waits in the lobby for a small part of what it holds in hyper. Only in a crowd (more than
/// `CROWD` connections served by hyper): taking each request through the lobby (a hyper
/// connection given back and made again per request, the head read twice) costs much CPU a
/// request, while below the crowd what waits in hyper is bounded by `CROWD` (DEC-57).
pub fn park_at_once(served: usize, requests_wait: bool) -> bool {
    requests_wait && served > CROWD
}

/// What `Quiet` looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// Requests the service has been called for.
    pub started: u32,
    /// Of those, the ones whose response hyper is done with (or that were dropped).
    pub ended: u32,
    /// When the last of those ended (ms since the connection was accepted).
    pub last_end_ms: u64,
    /// The last request came with a body not all read by the time of its response.
    pub bodied: bool,
    /// The last write to the client could not complete: hyper has bytes buffered unsent.
    pub write_stalled: bool,
}

impl Activity {
    pub fn new(epoch: Instant) -> Activity {
        Activity {
            epoch,
            started: AtomicU32::new(0),
            ended: AtomicU32::new(0),
            last_end_ms: AtomicU64::new(0),
            bodied: AtomicBool::new(false),
            write_stalled: AtomicBool::new(false),
            ended_at_read: AtomicU32::new(0),
            pipelined: AtomicBool::new(false),
            written: AtomicU64::new(0),
        }
    }

    /// `now` in the snapshot's milliseconds.
    pub fn ms(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.epoch).as_millis() as u64
    }

    /// The instant of a snapshot's milliseconds.
    pub fn instant(&self, ms: u64) -> Instant {
        self.epoch + Duration::from_millis(ms)
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            started: self.started.load(Ordering::Relaxed),
            ended: self.ended.load(Ordering::Relaxed),
            last_end_ms: self.last_end_ms.load(Ordering::Relaxed),
            bodied: self.bodied.load(Ordering::Relaxed),
            write_stalled: self.write_stalled.load(Ordering::Relaxed),
        }
    }

    /// A request begins; the guard, kept until hyper drops the response body, ends it.
    pub fn begin(self: &Arc<Self>, has_body: bool) -> RequestGuard {
        self.bodied.store(has_body, Ordering::Relaxed);
        let before = self.started.fetch_add(1, Ordering::Relaxed);
        // Its bytes came by the last read at the latest: if a request before it had not ended
        // then, the client sent this one without waiting for that one's answer. (What the lobby
        // read counts as read when hyper is given the stream, every answer before it written.)
        let pipelined = self.ended_at_read.load(Ordering::Relaxed) != before;
        self.pipelined.store(pipelined, Ordering::Relaxed);
        RequestGuard(self.clone())
    }

    /// Bytes came from the client.
    pub(super) fn read(&self) {
        let ended = self.ended.load(Ordering::Relaxed);
        self.ended_at_read.store(ended, Ordering::Relaxed);
    }

    pub(super) fn wrote(&self, stalled: bool) {
        self.write_stalled.store(stalled, Ordering::Relaxed);
    }

    /// `n` bytes were written to the client.
    pub(super) fn wrote_bytes(&self, n: usize) {
        self.written.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Bytes written to the client since the accept.
    pub(super) fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Whether the request hyper has just read was pipelined (see `begin`).
    pub fn pipelined(&self) -> bool {
        self.pipelined.load(Ordering::Relaxed)
    }
}

/// Ends its request when dropped: with the response body once hyper has written it, or with the
/// request's future if that is dropped first.
#[derive(Debug)]
pub struct RequestGuard(Arc<Activity>);

impl RequestGuard {
    /// The request's body has all been read (hyper's reading of it is done), so it does not keep
    /// the connection from being parked.
    pub fn body_read(&self) {
        self.0.bodied.store(false, Ordering::Relaxed);
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        let a = &self.0;
        // One clock read per request, no timer: the connection's loop compares it when it looks.
        a.last_end_ms.store(a.ms(Instant::now()), Ordering::Relaxed);
        a.ended.fetch_add(1, Ordering::Relaxed);
    }
}

/// The rule for parking, looked at now and then (no timer per request): park once nothing is in
/// flight, nothing is left to write or read, and that has been so for `after`.
#[derive(Debug, Default)]
pub struct Quiet {
    /// No park before this many requests have started: hyper's state is idle only once a
    /// whole exchange has been done on *its* connection (a new one starts busy, and
    /// `graceful_shutdown` would then turn keep-alive off instead of closing it). So each new
    /// hyper connection on the socket needs a request of its own first.
    min_started: u32,
}

/// What a look decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Look {
    Park,
    /// Look again after this long.
    Again(Duration),
}

impl Quiet {
    pub fn look(&self, s: Snapshot, now_ms: u64, after: Duration) -> Look {
        let idle =
            s.started == s.ended && !s.bodied && !s.write_stalled && s.started >= self.min_started;
        if !idle {
            return Look::Again(after);
        }
        let idle_for = Duration::from_millis(now_ms.saturating_sub(s.last_end_ms));
        if idle_for >= after {
            Look::Park
        } else {
            Look::Again(after - idle_for)
        }
    }

    /// A new hyper connection serves the socket: no park until a request has started on it.
    pub fn served_anew(&mut self, s: Snapshot) {
        self.min_started = s.started.wrapping_add(1);
    }
}

/// A response body that holds its request's guard, so the request ends when hyper drops it.
pub struct TrackedBody {
    inner: ProxyBody,
    _guard: RequestGuard,
}

impl TrackedBody {
    pub fn new(inner: ProxyBody, guard: RequestGuard) -> TrackedBody {
        TrackedBody {
            inner,
            _guard: guard,
        }
    }
}

impl Body for TrackedBody {
    type Data = Bytes;
    type Error = <ProxyBody as Body>::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    fn idle(n: u32, last_end_ms: u64) -> Snapshot {
        Snapshot {
            started: n,
            ended: n,
            last_end_ms,
            ..Snapshot::default()
        }
    }

    #[test]
    fn parks_once_idle_for_the_whole_delay_and_says_when_to_look_again() {
        let q = Quiet::default();
        assert_eq!(
            q.look(idle(1, 500), 900, SEC),
            Look::Again(Duration::from_millis(600))
        );
        assert_eq!(
            q.look(idle(1, 500), 1499, SEC),
            Look::Again(Duration::from_millis(1))
        );
        assert_eq!(q.look(idle(1, 500), 1500, SEC), Look::Park);
    }

    #[test]
    fn never_with_a_request_in_flight_a_body_or_a_stalled_write() {
        let busy = Snapshot {
            started: 3,
            ended: 2,
            ..Snapshot::default()
        };
        let bodied = Snapshot {
            bodied: true,
            ..idle(3, 0)
        };
        let stalled = Snapshot {
            write_stalled: true,
            ..idle(3, 0)
        };
        let q = Quiet::default();
        for s in [busy, bodied, stalled] {
            assert_eq!(q.look(s, 60_000, SEC), Look::Again(SEC), "{s:?}");
        }
    }

    #[test]
    fn a_new_hyper_connection_needs_a_request_of_its_own_first() {
        let mut q = Quiet::default();
        q.served_anew(idle(0, 0));
        assert_eq!(
            q.look(idle(0, 0), 10_000, SEC),
            Look::Again(SEC),
            "nothing sent yet"
        );
        assert_eq!(q.look(idle(1, 10_000), 11_000, SEC), Look::Park);
        q.served_anew(idle(4, 0));
        assert_eq!(q.look(idle(4, 0), 10_000, SEC), Look::Again(SEC));
        assert_eq!(q.look(idle(5, 10_000), 11_000, SEC), Look::Park);
    }

    #[test]
    fn a_crowd_is_parked_sooner() {
        let none = Duration::ZERO;
        assert_eq!(park_after(10, none), SEC);
        assert_eq!(park_after(CROWD, none), SEC);
        assert!(park_after(CROWD + 1, none) < SEC);
    }

    #[test]
    fn never_later_than_the_header_timeout() {
        let short = Duration::from_millis(200);
        assert_eq!(park_after(10, short), short);
        assert_eq!(park_after(CROWD + 1, short), short);
        assert_eq!(park_after(10, Duration::from_secs(30)), SEC);
    }

    #[test]
    fn at_once_only_in_a_crowd_while_requests_wait() {
        assert!(park_at_once(CROWD + 1, true));
        assert!(!park_at_once(CROWD + 1, false), "nothing waits");
        assert!(!park_at_once(CROWD, true), "no crowd");
        assert!(!park_at_once(0, true));
    }

    #[test]
    fn the_guard_ends_its_request_when_dropped() {
        let epoch = Instant::now() - Duration::from_secs(5);
        let a = Arc::new(Activity::new(epoch));
        let g = a.begin(true);
        assert_eq!(
            a.snapshot(),
            Snapshot {
                started: 1,
                ended: 0,
                last_end_ms: 0,
                bodied: true,
                write_stalled: false
            }
        );
        drop(TrackedBody::new(crate::proxy::forward::body::empty(), g));
        assert_eq!(a.snapshot().ended, 1);
        assert!(a.snapshot().last_end_ms >= 5_000);
    }

    #[test]
    fn a_request_read_before_the_answer_before_it_ended_is_pipelined() {
        // spec: DEC-39
        let a = Arc::new(Activity::new(Instant::now()));
        a.read();
        let first = a.begin(false);
        assert!(!a.pipelined(), "the first request");
        drop(first);
        a.read();
        let second = a.begin(false);
        assert!(!a.pipelined(), "sent once the first was answered");
        // The third comes while the second is in progress.
        a.read();
        drop(second);
        let third = a.begin(false);
        assert!(a.pipelined(), "sent before the second's answer");
        drop(third);
        // Two in one read (or read ahead by the lobby, which does not count as a read).
        a.read();
        drop(a.begin(false));
        let fifth = a.begin(false);
        assert!(a.pipelined(), "read with the one before it");
        drop(fifth);
        a.read();
        drop(a.begin(false));
        assert!(!a.pipelined(), "a read after every answer");
    }

    #[test]
    fn a_body_read_whole_does_not_keep_the_connection_from_parking() {
        let a = Arc::new(Activity::new(Instant::now()));
        let g = a.begin(true);
        assert!(a.snapshot().bodied);
        g.body_read();
        drop(g);
        assert!(!a.snapshot().bodied);
        assert_eq!(Quiet::default().look(a.snapshot(), 60_000, SEC), Look::Park);
    }
}
