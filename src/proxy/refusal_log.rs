//! Logs what the launcher does to clients on its own (its 503 refusals, the connections it
//! closes for `writeTimeoutSeconds`) at most once a minute per kind, with a count, so a surge
//! or a crowd of stalled clients shows in the log without flooding it (QUEUE-17, STREAM-7).
//! The counting is the front's atomics; `LogThrottle` is the pure rule, the task only reads the
//! clock and the counters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tracing::warn;

use super::front::Front;
use crate::log_throttle::LogThrottle;

/// The least time between two lines of one kind.
const EVERY: Duration = Duration::from_secs(60);

/// How often the counters are read: a first event is logged within this long.
const POLL: Duration = Duration::from_secs(1);

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
    let mut throttles: Vec<LogThrottle> = kinds.iter().map(|_| LogThrottle::new(EVERY)).collect();
    let mut tick = tokio::time::interval(POLL);
    loop {
        tick.tick().await;
        let now = crate::clock::now_std();
        for ((counter, what), t) in kinds.iter().zip(throttles.iter_mut()) {
            if let Some(n) = t.total(counter.load(Ordering::Relaxed), now) {
                warn!("{n} {what} (logged at most once a minute)");
            }
        }
    }
}
