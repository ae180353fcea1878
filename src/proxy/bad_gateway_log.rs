//! Every `502` the launcher gives is logged at WARNING with its reason, at most once a minute
//! per process and reason, with the count of those not logged (as its refusals are,
//! `refusal_log`): a process failing every request, or a flood of requests that kill it, shows
//! in the log without flooding it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::warn;

use crate::log_throttle::LogThrottle;
use crate::process::ProcessId;

/// The least time between two lines of one process and reason.
const EVERY: Duration = Duration::from_secs(60);

/// Why a `502`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Why {
    /// The process failed the request it had (closed, reset, a bad response head or body).
    Failed,
    /// Nothing of it could be sent, or it came back unanswered, and no other process could take
    /// it (DEC-33).
    NotSent,
    /// Its process ended by itself under it, and it was not sent on (DEC-73).
    MayHaveEndedIt,
}

const WHYS: usize = 3;

fn ix(why: Why) -> usize {
    match why {
        Why::Failed => 0,
        Why::NotSent => 1,
        Why::MayHaveEndedIt => 2,
    }
}

/// One throttle per process and reason.
pub(crate) struct BadGatewayLog {
    throttles: Mutex<Vec<[LogThrottle; WHYS]>>,
}

impl BadGatewayLog {
    pub(crate) fn new(processes: usize) -> BadGatewayLog {
        let fresh = [const { LogThrottle::new(EVERY) }; WHYS];
        BadGatewayLog {
            throttles: Mutex::new(vec![fresh; processes]),
        }
    }

    /// A `502` for `process` at `now`: `Some(n)` when it is to be logged, `n` being how many of
    /// the kind were not since the last line.
    pub(crate) fn due(&self, process: ProcessId, why: Why, now: Instant) -> Option<u64> {
        let mut t = self.throttles.lock().unwrap_or_else(|p| p.into_inner());
        match t.get_mut(process.index()) {
            Some(kinds) => kinds[ix(why)].event(now),
            // A process beyond the table (none is): logged, never lost.
            None => Some(0),
        }
    }

    /// Logs `line` (the 502's reason, ending "answered 502") if it is due now.
    pub(crate) fn warn(&self, process: ProcessId, why: Why, line: impl FnOnce() -> String) {
        match self.due(process, why, crate::clock::now_std()) {
            Some(0) => warn!("{}", line()),
            Some(n) => warn!(
                "{} ({n} more like it not logged in the last minute)",
                line()
            ),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TX1: ProcessId = ProcessId(1);
    const TX2: ProcessId = ProcessId(2);

    #[test]
    fn each_process_and_reason_is_logged_at_once_then_once_a_minute() {
        let log = BadGatewayLog::new(3);
        let t0 = Instant::now();
        assert_eq!(log.due(TX1, Why::NotSent, t0), Some(0));
        assert_eq!(log.due(TX1, Why::Failed, t0), Some(0), "another reason");
        assert_eq!(log.due(TX2, Why::NotSent, t0), Some(0), "another process");
        for k in 1..=5 {
            assert_eq!(
                log.due(TX1, Why::NotSent, t0 + Duration::from_secs(k)),
                None
            );
        }
        assert_eq!(log.due(TX1, Why::NotSent, t0 + EVERY), Some(5));
        assert_eq!(log.due(ProcessId(9), Why::NotSent, t0), Some(0));
    }
}
