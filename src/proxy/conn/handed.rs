//! Client connections handed over through an in-place upgrade: an idle keep-alive connection
//! (in the lobby, or parked from hyper once its response is written) hears the upgrade's drain
//! and gives its socket and the bytes it had read ahead of a next request to the [`Collector`]
//! instead of being closed; the listener returns them with itself, the launcher names them in
//! the handed-over state (`clientConns`) and keeps their fds across the `execve`, and the new
//! program (or this one, should the upgrade not happen) serves each again from the lobby, its
//! bytes first.
//!
//! Why: a client that doesn't retry (most HTTP libraries retry an idle connection's failure only
//! for idempotent requests, some never) saw a closed connection as a failed request: 22 of 6,397
//! across 20 upgrades. Handed over, the connection never closes, so it sees nothing.
//!
//! Nothing is lost or answered twice: a connection is collected only while idle (no request
//! started and unanswered), so a request's bytes are either still in the socket, which the new
//! program reads, or among the bytes handed with it. A `SIGTERM` drain collects nothing: its
//! idle connections are closed as ever (STOP-2).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use bytes::Bytes;

/// Connections handed over at most (each is one fd kept across the `execve` and a line of the
/// state); the rest are closed as a stop's drain closes them.
pub const HAND_OVER_AT_MOST: usize = 16_384;

/// An idle client connection, handed over: its socket (non-blocking, out of any reactor), the
/// bytes of a next request read from it and not yet parsed (a partial head, or more), and since
/// when it has been idle (its `headerTimeoutSeconds` go on counting from then: an upgrade
/// gives a slow head no more time).
#[derive(Debug)]
pub struct HandedClient {
    pub stream: std::net::TcpStream,
    pub unread: Bytes,
    pub idle_since: std::time::Instant,
}

/// Where idle connections go during an upgrade's drain, up to a bound.
#[derive(Debug)]
pub struct Collector {
    on: AtomicBool,
    taken: Mutex<Vec<HandedClient>>,
    at_most: usize,
}

impl Collector {
    pub fn new(at_most: usize) -> Collector {
        Collector {
            on: AtomicBool::new(false),
            taken: Mutex::new(Vec::new()),
            at_most,
        }
    }

    /// The drain that begins is an upgrade's: idle connections are collected from now on.
    pub fn begin(&self) {
        self.on.store(true, Ordering::SeqCst);
    }

    /// Whether idle connections are collected (not closed) as they hear the drain.
    pub fn collecting(&self) -> bool {
        self.on.load(Ordering::SeqCst)
    }

    /// Takes `c`, or gives it back (to be closed): not collecting, or the bound reached.
    pub fn offer(&self, c: HandedClient) -> Result<(), HandedClient> {
        if !self.collecting() {
            return Err(c);
        }
        let mut taken = self.taken.lock().unwrap_or_else(|p| p.into_inner());
        if taken.len() >= self.at_most {
            return Err(c);
        }
        taken.push(c);
        Ok(())
    }

    /// Everything collected, in the order it came.
    pub fn take(&self) -> Vec<HandedClient> {
        std::mem::take(&mut *self.taken.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> HandedClient {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        HandedClient {
            stream,
            unread: Bytes::from_static(b"GET / HT"),
            idle_since: std::time::Instant::now(),
        }
    }

    #[test]
    fn a_stops_drain_collects_nothing() {
        // spec: STOP-2 (a stop closes idle connections; only an upgrade hands them over)
        let c = Collector::new(4);
        assert!(c.offer(client()).is_err());
        assert!(c.take().is_empty());
    }

    #[test]
    fn an_upgrade_collects_up_to_its_bound_with_the_bytes() {
        let c = Collector::new(2);
        c.begin();
        assert!(c.offer(client()).is_ok());
        assert!(c.offer(client()).is_ok());
        assert!(c.offer(client()).is_err(), "over the bound: closed");
        let taken = c.take();
        assert_eq!(taken.len(), 2);
        assert_eq!(&taken[0].unread[..], b"GET / HT");
        assert!(c.take().is_empty());
    }
}
