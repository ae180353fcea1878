//! The budget for body bytes the front door holds on clients' behalf (`bufferMaxMB`): tx
//! responses read ahead of the client (STREAM-1), request bodies read before admission, and
//! whole requests waiting in the lobby.
//!
//! Why: each of those is held for as long as a client takes (a client that never reads keeps its
//! response for `writeTimeoutSeconds`), and the launcher shares its memory limit with the servers:
//! a few clients that never read a large response would hold it all. Past the budget nothing more
//! is read ahead: a tx response is streamed as the client takes it (the process's slot is then held
//! until the client has it all, or the write timeout cuts it off), and a request body is passed on
//! as it arrives.
//!
//! A `Lease` is the bytes one holder counts; it gives them back when dropped. The rule is the
//! pure `fits`; the shell is two atomics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The default budget: 256 MB.
pub const DEFAULT_LIMIT: u64 = 256 << 20;

/// Whether `more` bytes fit with `used` already held under `limit` (0: no limit).
pub fn fits(used: u64, more: u64, limit: u64) -> bool {
    limit == 0 || used.checked_add(more).is_some_and(|total| total <= limit)
}

/// Bytes held now, the limit, and what was not read ahead for want of room.
#[derive(Debug)]
pub struct Budget {
    limit: AtomicU64,
    used: AtomicU64,
    /// Tx responses streamed instead of read ahead because the budget was full.
    pub responses_streamed: AtomicU64,
    /// Request bodies passed on as they arrived instead of read before admission, because the
    /// budget was full.
    pub requests_streamed: AtomicU64,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget::new(DEFAULT_LIMIT)
    }
}

impl Budget {
    /// `limit` in bytes; 0: no limit.
    pub fn new(limit: u64) -> Budget {
        Budget {
            limit: AtomicU64::new(limit),
            used: AtomicU64::new(0),
            responses_streamed: AtomicU64::new(0),
            requests_streamed: AtomicU64::new(0),
        }
    }

    /// A new limit (reload); what is held already stays held.
    pub fn set_limit(&self, limit: u64) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Relaxed)
    }

    /// Bytes held now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Whether `n` more bytes would fit now (a look, not a hold).
    pub fn has_room(&self, n: u64) -> bool {
        fits(self.used(), n, self.limit())
    }

    /// Holds `n` bytes if they fit.
    #[cfg(test)]
    pub fn try_take(self: &Arc<Self>, n: u64) -> Option<Lease> {
        let mut lease = Lease::none(self);
        lease.try_grow(n).then_some(lease)
    }

    /// Counts `n` bytes held whether or not they fit (they are in memory already): the next
    /// `has_room` says no until they are given back.
    pub fn take_anyway(self: &Arc<Self>, n: u64) -> Lease {
        self.used.fetch_add(n, Ordering::Relaxed);
        Lease {
            budget: self.clone(),
            n,
        }
    }
}

/// Bytes counted against the budget until dropped.
#[derive(Debug)]
pub struct Lease {
    budget: Arc<Budget>,
    n: u64,
}

impl Lease {
    /// A lease of nothing yet, to grow.
    pub fn none(budget: &Arc<Budget>) -> Lease {
        Lease {
            budget: budget.clone(),
            n: 0,
        }
    }

    /// Holds `more` bytes too, if they fit; false (and nothing more held) if not.
    pub fn try_grow(&mut self, more: u64) -> bool {
        let limit = self.budget.limit();
        let grown = self
            .budget
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                fits(used, more, limit).then(|| used + more)
            })
            .is_ok();
        if grown {
            self.n += more;
        }
        grown
    }

    /// Bytes this lease holds.
    #[cfg(test)]
    pub fn bytes(&self) -> u64 {
        self.n
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.n > 0 {
            self.budget.used.fetch_sub(self.n, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_fits_under_the_limit_and_zero_is_no_limit() {
        assert!(fits(0, 10, 10));
        assert!(!fits(1, 10, 10));
        assert!(fits(u64::MAX - 1, 1, 0));
        assert!(!fits(u64::MAX, 1, u64::MAX), "no overflow");
    }

    #[test]
    fn a_lease_holds_its_bytes_until_dropped_and_never_past_the_limit() {
        let b = Arc::new(Budget::new(100));
        let mut a = b.try_take(60).expect("fits");
        assert_eq!(b.used(), 60);
        assert!(b.try_take(41).is_none());
        assert_eq!(b.used(), 60, "a refusal holds nothing");
        assert!(a.try_grow(40));
        assert!(!a.try_grow(1));
        assert_eq!((a.bytes(), b.used()), (100, 100));
        assert!(!b.has_room(1));
        drop(a);
        assert_eq!(b.used(), 0);
        assert!(b.has_room(100));
    }

    #[test]
    fn bytes_already_read_are_counted_even_past_the_limit() {
        let b = Arc::new(Budget::new(10));
        let held = b.take_anyway(25);
        assert_eq!(b.used(), 25);
        assert!(!b.has_room(0), "over the limit: no room at all");
        assert!(b.try_take(1).is_none());
        drop(held);
        assert!(b.try_take(10).is_some());
    }

    #[test]
    fn a_new_limit_applies_to_the_next_lease() {
        let b = Arc::new(Budget::new(10));
        let _a = b.try_take(10).expect("fits");
        b.set_limit(0);
        assert!(b.try_take(1 << 40).is_some(), "0: no limit");
    }
}
