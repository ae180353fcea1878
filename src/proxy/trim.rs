//! Hands back to the system the memory that parked connections no longer use. A crowd of new
//! keep-alive clients is served by hyper (its buffers each) before it goes quiet and is parked
//! (a few KB); the allocator keeps what hyper freed for reuse, so without this the launcher's
//! RSS stays at the crowd's peak. After every `BATCH` parks, once the crowd has settled for
//! `SETTLE`, the free pages are returned (`ffi::allocator_purge`: jemalloc's arenas and glibc's
//! heap; on a blocking thread, a few ms for a large heap, once per crowd, not per connection).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

/// Parks between two trims. Public for `tests/proxy_park.rs`, which counts them in the log.
pub const BATCH: usize = 256;

/// How long after the batch's last park the trim waits, so one crowd is one trim.
pub(crate) const SETTLE: Duration = Duration::from_millis(300);

#[derive(Debug, Default)]
pub(crate) struct Trimmer {
    parked: AtomicUsize,
    wake: Notify,
}

impl Trimmer {
    /// A connection was parked.
    pub(crate) fn parked(&self) {
        if self.parked.fetch_add(1, Ordering::Relaxed) + 1 == BATCH {
            self.wake.notify_one();
        }
    }

    /// Whether a trim is due (a batch of parks since the last).
    #[cfg(test)]
    pub(crate) fn due(&self) -> bool {
        self.parked.load(Ordering::Relaxed) >= BATCH
    }

    /// Trims after each batch of parks, for as long as the listener runs.
    pub(crate) async fn run(self: Arc<Self>) {
        loop {
            self.wake.notified().await;
            // Let the crowd settle: later parks of it join this trim.
            let mut seen = self.parked.load(Ordering::Relaxed);
            loop {
                tokio::time::sleep(SETTLE).await;
                let now = self.parked.load(Ordering::Relaxed);
                if now == seen {
                    break;
                }
                seen = now;
            }
            self.parked.store(0, Ordering::Relaxed);
            let took = tokio::task::spawn_blocking(trim_now).await;
            tracing::debug!("{seen} connections parked: free memory handed back ({took:?})");
        }
    }
}

/// Returns free heap pages to the system; how long it took.
fn trim_now() -> Duration {
    let start = std::time::Instant::now();
    crate::system::ffi::allocator_purge();
    start.elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_of_parks_makes_a_trim_due() {
        let t = Trimmer::default();
        for _ in 0..BATCH - 1 {
            t.parked();
        }
        assert!(!t.due());
        t.parked();
        assert!(t.due());
    }

    #[tokio::test(start_paused = true)]
    async fn one_crowd_is_one_trim_once_it_settles() {
        let t = Arc::new(Trimmer::default());
        let task = tokio::spawn(t.clone().run());
        for _ in 0..BATCH + 10 {
            t.parked();
        }
        tokio::task::yield_now().await;
        // Still parking: no trim yet.
        tokio::time::sleep(SETTLE / 2).await;
        t.parked();
        assert!(t.due());
        // Settled: the count starts over.
        tokio::time::sleep(SETTLE * 3).await;
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        assert!(!t.due(), "trimmed");
        task.abort();
    }

    fn rss_kb() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS")
    }

    #[test]
    fn the_trim_hands_the_freed_heap_back_to_the_system() {
        // spec: DEC-60
        // What a crowd of hyper connections leaves when it is parked: many small blocks freed.
        // The allocator keeps their pages for reuse until the trim returns them.
        const BLOCKS: usize = 64 * 1024;
        let blocks: Vec<Box<[u8; 1024]>> = (0..BLOCKS).map(|_| Box::new([1u8; 1024])).collect();
        let full = rss_kb();
        drop(blocks);
        trim_now();
        let after = rss_kb();
        assert!(
            after + 32 * 1024 < full,
            "64 MB freed, then trimmed: {full} kB resident before, {after} kB after"
        );
    }
}
