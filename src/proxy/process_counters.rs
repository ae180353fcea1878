//! What the front door counts per process, whichever process it is and whether it speaks the
//! IPC channel or not: its answers by status class, the bytes each way, the launcher's refusals
//! of requests only it could take, and its latency over the status interval. Atomics indexed by
//! process (as `Counters::lost`), so a request adds to its process's figures with a few relaxed
//! adds and takes no lock. Read into `status::front::FrontFigures` for the status and `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::interval_histogram::IntervalHistogram;

/// One process's counters (one per slot, for the launcher's life).
#[derive(Debug, Default)]
pub struct ProcessCounters {
    /// Its answers, by status class 1xx .. 5xx.
    pub answered: [AtomicU64; 5],
    /// The launcher's own refusals of requests bound for it alone.
    pub refused: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    /// From sending a request to it to its answer ready to pass on, this interval.
    pub latency: IntervalHistogram,
}

impl ProcessCounters {
    /// One answer of the process: its status, how long it took from being sent, and the body
    /// bytes sent to it (as far as known when it was sent).
    pub fn answered(&self, status: u16, took: Duration, bytes_in: u64) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        self.answered[class].fetch_add(1, Ordering::Relaxed);
        if bytes_in > 0 {
            self.bytes_in.fetch_add(bytes_in, Ordering::Relaxed);
        }
        self.latency.record(took);
    }

    /// Response body bytes passed on to a client.
    pub fn sent_out(&self, bytes: u64) {
        if bytes > 0 {
            self.bytes_out.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    pub fn answers(&self) -> [u64; 5] {
        std::array::from_fn(|i| self.answered[i].load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::interval_histogram::latency;

    #[test]
    fn an_answer_counts_by_class_with_its_bytes_and_latency() {
        let c = ProcessCounters::default();
        c.answered(200, Duration::from_millis(3), 10);
        c.answered(404, Duration::from_millis(3), 0);
        c.answered(99, Duration::from_millis(3), 0);
        c.sent_out(123);
        assert_eq!(c.answers(), [1, 1, 0, 1, 0]);
        assert_eq!(c.bytes_in.load(Ordering::Relaxed), 10);
        assert_eq!(c.bytes_out.load(Ordering::Relaxed), 123);
        assert_eq!(latency(&c.latency.take()).count, 3);
    }
}
