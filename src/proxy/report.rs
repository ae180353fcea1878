//! Logs what the launcher does to clients on its own (its 503 refusals, the connections it
//! closes for `writeTimeoutSeconds`) at most once a minute per kind, with a count, so a surge
//! or a crowd of stalled clients shows in the log without flooding it (QUEUE-17, STREAM-7).
//! The counting is the front's atomics; `Throttle` is the pure rule, the task only reads the
//! clock and the counters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::warn;

use super::front::Front;

/// The least time between two lines of one kind.
pub const EVERY: Duration = Duration::from_secs(60);

/// How often the counters are read: a first event is logged within this long.
const POLL: Duration = Duration::from_secs(1);

/// One kind of event's log rule: the first at once, then at most one line per `EVERY` with
/// the count since the last line.
#[derive(Debug, Default)]
pub struct Throttle {
    seen: u64,
    pending: u64,
    last: Option<Instant>,
}

impl Throttle {
    /// Takes the counter's running `total`; returns the count to log now, if a line is due.
    pub fn observe(&mut self, total: u64, now: Instant) -> Option<u64> {
        self.pending += total.saturating_sub(self.seen);
        self.seen = self.seen.max(total);
        let due = self
            .last
            .is_none_or(|t| now.saturating_duration_since(t) >= EVERY);
        if self.pending > 0 && due {
            self.last = Some(now);
            Some(std::mem::take(&mut self.pending))
        } else {
            None
        }
    }
}

/// Reads the front's counters every second and logs what is due, until the runtime ends.
pub async fn run(front: Arc<Front>) {
    let c = &front.counters;
    let kinds: [(&AtomicU64, &str); 4] = [
        (
            &c.refused_queue,
            "request(s) refused with 503: no process had room within queueSeconds \
             (ownerQueueSeconds for a cache-id)",
        ),
        (
            &c.refused_no_process,
            "request(s) refused with 503: no process ready",
        ),
        (
            &c.refused_master_down,
            "request(s) for the master refused with 503: the master is not ready",
        ),
        (
            &*c.write_timeout_closes,
            "client connection(s) closed: the client took none of its response for \
             writeTimeoutSeconds",
        ),
    ];
    let mut throttles: Vec<Throttle> = kinds.iter().map(|_| Throttle::default()).collect();
    let mut tick = tokio::time::interval(POLL);
    loop {
        tick.tick().await;
        let now = Instant::now();
        for ((counter, what), t) in kinds.iter().zip(throttles.iter_mut()) {
            if let Some(n) = t.observe(counter.load(Ordering::Relaxed), now) {
                warn!("{n} {what} (logged at most once a minute)");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_is_logged_at_once_then_at_most_once_a_minute_with_the_count() {
        // spec: QUEUE-17, STREAM-7
        let t0 = Instant::now();
        let mut t = Throttle::default();
        assert_eq!(t.observe(0, t0), None, "nothing happened");
        assert_eq!(t.observe(3, t0), Some(3));
        assert_eq!(t.observe(10, t0 + Duration::from_secs(1)), None);
        assert_eq!(t.observe(12, t0 + Duration::from_secs(59)), None);
        assert_eq!(t.observe(12, t0 + Duration::from_secs(60)), Some(9));
        assert_eq!(
            t.observe(12, t0 + Duration::from_secs(200)),
            None,
            "no news"
        );
        assert_eq!(t.observe(13, t0 + Duration::from_secs(201)), Some(1));
    }
}
