//! A client whose answers lie unread gets no slot for its next request until it reads them.
//!
//! Why: a client that pipelines requests and never reads its answers is answered one request
//! after another, each taking a process's slot in its turn, while the kernel's buffers absorb
//! the answers (about 128 KB in the client's receive buffer, up to 4 MB in the launcher's send
//! buffer on Linux): the write timeout never runs, because no write ever waits, and a crowd of
//! such connections takes the slots a client that reads is waiting for
//! (`reliability_front::pipelining_clients_that_never_read_do_not_slow_a_client_that_does`).
//!
//! So before a request on a kept-alive connection is routed, the bytes of earlier answers still
//! in the launcher's send queue (`TIOCOUTQ`: written, not yet taken by the client) are looked
//! at. Over [`UNREAD_AT_MOST`], the request waits until the client has taken enough; a client
//! that takes none of them for `writeTimeoutSeconds` has its connection closed, as one whose
//! write waits that long (STREAM-4). A client that reads its answers, pipelining or not, never
//! waits: its send queue is empty by the time its next request is read, or drains as it reads.
//!
//! Asking the kernel is a system call (an `ioctl`) per request, one in seven of a forwarded
//! request's: so it is asked only when the queue could be over the bound. The queue holds at
//! most what it held at the last look plus what has been written since (`Seen`), so a client
//! that reads as it goes is looked at about once per [`UNREAD_AT_MOST`] bytes of answers.
//!
//! `Unread` is the rule, a function of the queue's length and `now`; `Seen` says when to look;
//! `wait` is their shell.

use std::os::fd::RawFd;
use std::time::Duration;

use tokio::time::Instant;

/// Unread bytes of earlier answers a connection may have and still be given its next request's
/// slot: a few answers' worth; a client reading as it goes has none.
pub const UNREAD_AT_MOST: usize = 64 * 1024;

/// How often a waiting request looks again, at most (it starts at 1 ms, doubling).
const LOOK_AT_MOST: Duration = Duration::from_millis(50);

/// What to do with a request whose connection has `unread` bytes of answers not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Look {
    Go,
    /// Look again after this long.
    Again(Duration),
    /// The client has taken nothing for the write timeout: close the connection.
    Close,
}

/// One request's wait for its client to read.
#[derive(Debug)]
pub struct Unread {
    /// `writeTimeoutSeconds` (zero: none).
    timeout: Duration,
    /// The fewest unread bytes seen, and when: the client has taken some since.
    least: usize,
    since: Instant,
    next: Duration,
}

impl Unread {
    pub fn new(timeout: Duration, now: Instant) -> Unread {
        Unread {
            timeout,
            least: usize::MAX,
            since: now,
            next: Duration::from_millis(1),
        }
    }

    pub fn look(&mut self, unread: usize, now: Instant) -> Look {
        if unread <= UNREAD_AT_MOST {
            return Look::Go;
        }
        if unread < self.least {
            // The client took some (or this is the first look): its clock starts again.
            self.least = unread;
            self.since = now;
        }
        if !self.timeout.is_zero() && now.saturating_duration_since(self.since) >= self.timeout {
            return Look::Close;
        }
        let wait = self.next;
        self.next = (self.next * 2).min(LOOK_AT_MOST);
        Look::Again(wait)
    }
}

/// What the last look at a connection's send queue found: `unread` bytes, when `written` bytes
/// had been written to it in all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    pub written: u64,
    pub unread: usize,
}

impl Seen {
    /// Whether the queue may hold more than [`UNREAD_AT_MOST`] now that `written` bytes have
    /// been written in all: `None` (no look yet on this connection's turn in hyper) may.
    pub fn may_be_over(last: Option<Seen>, written: u64) -> bool {
        let Some(s) = last else {
            return true;
        };
        let since = written.saturating_sub(s.written);
        (s.unread as u64).saturating_add(since) > UNREAD_AT_MOST as u64
    }
}

/// Bytes written to the socket and not yet taken by the client (`TIOCOUTQ`); 0 if unknown.
pub fn unread_bytes(fd: RawFd) -> usize {
    // `fd` is the connection's open socket for as long as its requests are served.
    crate::system::ffi::unsent_bytes(fd)
}

/// Waits while the connection's unread answers are over the bound; false: close it.
pub async fn wait(fd: RawFd, timeout: Duration) -> bool {
    let mut rule = Unread::new(timeout, Instant::now());
    loop {
        match rule.look(unread_bytes(fd), Instant::now()) {
            Look::Go => return true,
            Look::Close => return false,
            Look::Again(d) => tokio::time::sleep(d).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_is_looked_at_only_when_what_was_written_since_could_put_it_over() {
        // spec: STREAM-4, DEC-58
        assert!(Seen::may_be_over(None, 0), "no look yet: look");
        let seen = Seen {
            written: 1_000,
            unread: 0,
        };
        assert!(!Seen::may_be_over(Some(seen), 1_000));
        assert!(!Seen::may_be_over(
            Some(seen),
            1_000 + UNREAD_AT_MOST as u64
        ));
        assert!(Seen::may_be_over(Some(seen), 1_001 + UNREAD_AT_MOST as u64));
        let full = Seen {
            written: 5_000,
            unread: UNREAD_AT_MOST,
        };
        assert!(!Seen::may_be_over(Some(full), 5_000));
        assert!(
            Seen::may_be_over(Some(full), 5_001),
            "a byte more may be over"
        );
    }

    const SEC: Duration = Duration::from_secs(1);

    #[test]
    fn a_connection_with_its_answers_read_goes_at_once() {
        let now = Instant::now();
        assert_eq!(Unread::new(SEC, now).look(0, now), Look::Go);
        assert_eq!(Unread::new(SEC, now).look(UNREAD_AT_MOST, now), Look::Go);
    }

    #[test]
    fn one_that_takes_none_waits_then_is_closed_after_the_write_timeout() {
        // spec: STREAM-4
        let t0 = Instant::now();
        let mut u = Unread::new(SEC, t0);
        let big = 4 << 20;
        assert_eq!(u.look(big, t0), Look::Again(Duration::from_millis(1)));
        assert_eq!(u.look(big, t0), Look::Again(Duration::from_millis(2)));
        let mut last = Duration::ZERO;
        for _ in 0..10 {
            if let Look::Again(d) = u.look(big, t0 + SEC / 2) {
                last = d;
            }
        }
        assert_eq!(last, LOOK_AT_MOST, "looks grow no rarer than this");
        assert_eq!(u.look(big, t0 + SEC), Look::Close);
    }

    #[test]
    fn one_that_takes_some_keeps_waiting_and_goes_once_drained() {
        let t0 = Instant::now();
        let mut u = Unread::new(SEC, t0);
        assert!(matches!(u.look(1 << 20, t0), Look::Again(_)));
        assert!(
            matches!(u.look(900 << 10, t0 + SEC), Look::Again(_)),
            "it took some"
        );
        assert!(matches!(
            u.look(900 << 10, t0 + SEC * 3 / 2),
            Look::Again(_)
        ));
        assert_eq!(u.look(900 << 10, t0 + SEC * 2), Look::Close);
        let mut u = Unread::new(SEC, t0);
        assert!(matches!(u.look(1 << 20, t0), Look::Again(_)));
        assert_eq!(u.look(1000, t0 + SEC / 2), Look::Go);
    }

    #[test]
    fn without_a_write_timeout_it_waits_for_ever() {
        let t0 = Instant::now();
        let mut u = Unread::new(Duration::ZERO, t0);
        assert!(matches!(
            u.look(1 << 20, t0 + Duration::from_secs(86_400)),
            Look::Again(_)
        ));
    }
}
