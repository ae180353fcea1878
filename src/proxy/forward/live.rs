//! A count of the connections open to one process, kept by the connections themselves: each
//! holds a `Live` from its connect until it is dropped (closed), whether it is carrying a
//! request, streaming a response or idle in the pool. When a replacement started beside a
//! process takes its place (`Upstream::move_to`), the old process's idle connections are
//! closed at once, so its count is then its requests still at work: its drain ends at 0.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// One open connection, counted in its process's count until dropped.
#[derive(Debug)]
pub struct Live(Arc<AtomicUsize>);

impl Live {
    /// A connection more in `count`.
    pub fn count(count: &Arc<AtomicUsize>) -> Live {
        count.fetch_add(1, Ordering::AcqRel);
        Live(Arc::clone(count))
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_counted_until_it_is_dropped() {
        let n = Arc::new(AtomicUsize::new(0));
        let a = Live::count(&n);
        let b = Live::count(&n);
        assert_eq!(n.load(Ordering::Acquire), 2);
        drop(a);
        assert_eq!(n.load(Ordering::Acquire), 1);
        drop(b);
        assert_eq!(n.load(Ordering::Acquire), 0);
    }
}
