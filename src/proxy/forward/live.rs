//! A count of the connections open to one process, kept by the connections themselves: each
//! holds a `Live` from its connect until it is dropped (closed), whether it is carrying a
//! request, streaming a response or idle in the pool. When a replacement started beside a
//! process takes its place (`Upstream::move_to`), the old process's idle connections are
//! closed at once, so its count is then its requests still at work: its drain ends at 0.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use tokio::sync::Notify;

/// The connections open to one process; told, once asked, who to wake as the last one closes,
/// so a drain after a switch is not paced by the supervisor's once-a-second look (DEC-83).
#[derive(Debug, Default)]
pub struct Count {
    open: AtomicUsize,
    at_zero: OnceLock<Arc<Notify>>,
}

impl Count {
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// `news` is woken as the count next reaches 0 (and now, should it be 0 already).
    pub fn wake_at_zero(&self, news: Arc<Notify>) {
        let news = self.at_zero.get_or_init(|| news);
        if self.open() == 0 {
            news.notify_one();
        }
    }
}

/// One open connection, counted in its process's count until dropped.
#[derive(Debug)]
pub struct Live(Arc<Count>);

impl Live {
    /// A connection more in `count`.
    pub fn count(count: &Arc<Count>) -> Live {
        count.open.fetch_add(1, Ordering::AcqRel);
        Live(Arc::clone(count))
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if self.0.open.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Some(news) = self.0.at_zero.get() {
                news.notify_one();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_counted_until_it_is_dropped() {
        let n = Arc::new(Count::default());
        let a = Live::count(&n);
        let b = Live::count(&n);
        assert_eq!(n.open(), 2);
        drop(a);
        assert_eq!(n.open(), 1);
        drop(b);
        assert_eq!(n.open(), 0);
    }

    #[tokio::test]
    async fn the_last_close_wakes_who_asked() {
        // spec: DEC-83
        let n = Arc::new(Count::default());
        let a = Live::count(&n);
        let news = Arc::new(Notify::new());
        n.wake_at_zero(news.clone());
        let woken = news.notified();
        tokio::pin!(woken);
        assert!(
            futures_poll_once(woken.as_mut()).is_pending(),
            "not while one is open"
        );
        drop(a);
        assert!(
            futures_poll_once(woken.as_mut()).is_ready(),
            "at the last close"
        );
    }

    fn futures_poll_once<F: std::future::Future>(
        f: std::pin::Pin<&mut F>,
    ) -> std::task::Poll<F::Output> {
        let waker = std::task::Waker::noop();
        f.poll(&mut std::task::Context::from_waker(waker))
    }
}
