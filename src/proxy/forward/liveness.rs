//! What the hang watchdog (`supervisor::hang`, DEC-82) needs to know of one process from its
//! connections: whether it has written any byte of any answer since a moment (`heard`, a count
//! of reads that brought bytes: the supervisor compares two readings, it needs no time), and the
//! oldest request sent to it since it last did (`Owed`: when, and its method and target for the
//! WARNING). A request ended by the upstream timeout's `504` stays owed: the timeout ends the
//! client's wait, not the process's debt, so the watchdog's clock is not reset by it.
//!
//! Why a count and not a time: every read from a process's connection bumps it (one relaxed
//! add, no clock read), and the watchdog, which looks once a second, timestamps a change itself.
//! The owed request is kept only while nothing was heard since it was sent, so a busy process
//! that answers takes the lock once per request at most, and a request behind an older owed one
//! not at all.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use http::{Method, Uri};
use tokio::time::Instant;

pub use crate::supervisor::hang::Owed;

/// One process's liveness, shared by its pool's connections.
#[derive(Debug, Default)]
pub struct Liveness {
    /// Reads from the process's connections that brought bytes.
    heard: AtomicU64,
    /// `heard + 1` as it was when `owed` was taken; 0: none taken yet. Read without the lock.
    owed_at: AtomicU64,
    owed: Mutex<Option<Owed>>,
}

impl Liveness {
    /// The process wrote bytes on one of its connections (a response head or body).
    pub fn heard(&self) {
        self.heard.fetch_add(1, Ordering::Relaxed);
    }

    /// How many reads have brought bytes so far.
    pub fn heard_count(&self) -> u64 {
        self.heard.load(Ordering::Relaxed)
    }

    /// A request was written to the process at `sent`: it is the owed one unless an older one
    /// is owed already (sent since the process last wrote anything).
    pub fn sent(&self, sent: Instant, method: &Method, target: &Uri) {
        let heard = self.heard.load(Ordering::Relaxed);
        if self.owed_at.load(Ordering::Relaxed) == heard + 1 {
            return;
        }
        let mut owed = self.owed.lock().unwrap_or_else(|p| p.into_inner());
        if owed.as_ref().is_some_and(|o| o.heard == heard) {
            return;
        }
        *owed = Some(Owed {
            sent: sent.into_std(),
            heard,
            method: method.clone(),
            target: target.clone(),
        });
        self.owed_at.store(heard + 1, Ordering::Relaxed);
    }

    /// The oldest request owed an answer: sent since the process last wrote a byte.
    pub fn owed(&self) -> Option<Owed> {
        let heard = self.heard.load(Ordering::Relaxed);
        let owed = self.owed.lock().unwrap_or_else(|p| p.into_inner());
        owed.as_ref().filter(|o| o.heard == heard).cloned()
    }

    /// The process was started again: nothing of the last one is owed.
    pub fn clear(&self) {
        *self.owed.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.owed_at.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(uri: &str) -> (Method, Uri) {
        (Method::GET, uri.parse().expect("a uri"))
    }

    #[test]
    fn the_oldest_request_since_the_last_byte_is_owed_until_a_byte_comes() {
        let l = Liveness::default();
        let t0 = Instant::now();
        assert!(l.owed().is_none());
        let (m, a) = get("/a");
        l.sent(t0, &m, &a);
        let (m, b) = get("/b");
        l.sent(t0 + std::time::Duration::from_secs(1), &m, &b);
        let owed = l.owed().expect("owed");
        assert_eq!((owed.sent, owed.target.path()), (t0.into_std(), "/a"));
        l.heard();
        assert!(l.owed().is_none(), "a byte of any answer pays it");
        let (m, c) = get("/c?x=1");
        l.sent(t0 + std::time::Duration::from_secs(2), &m, &c);
        assert_eq!(l.owed().expect("owed").target.to_string(), "/c?x=1");
        l.clear();
        assert!(l.owed().is_none());
    }
}
