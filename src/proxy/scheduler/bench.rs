//! A micro-benchmark of the scheduler: admit + complete decisions per second on one core, with
//! 32 requests in flight over 4 processes so every decision sees loaded processes. One loop,
//! called by the test below (which asserts only that the run was sound, never a time) and by
//! `fhircluster-load compare` (the figure, in a release build; the target is at least 1,000,000
//! a second).

use std::time::Instant;

use super::*;
use crate::process::ProcessId;
use crate::proxy::lane::Lane;
use crate::proxy::route::{Target, TxDemand};

/// What one run of the loop did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BenchFigures {
    /// Admit + complete decisions per second (two per request).
    pub decisions_per_second: f64,
    pub requests: u64,
    pub dispatched: u64,
    /// Left queued or in flight at the end (0 for a sound run).
    pub left_over: usize,
}

/// Submits and finishes `n` requests (a third fast-lane, a third routed to an owner), keeping
/// 32 in flight, and times it.
pub fn admit_and_complete(n: u64) -> BenchFigures {
    let procs: Vec<_> = (0..4).map(|i| (ProcessId(i), true)).collect();
    let now = Instant::now();
    let mut s = Scheduler::new(SchedulerConfig::default(), &procs);
    for &(p, _) in &procs {
        s.set_process(p, ProcessState::Ready, now);
    }
    let demands = [
        TxDemand {
            target: Target::LeastLoaded,
            lane: Lane::Normal,
            counted: true,
        },
        TxDemand {
            target: Target::LeastLoaded,
            lane: Lane::Fast,
            counted: true,
        },
        TxDemand {
            target: Target::Owner(ProcessId(2)),
            lane: Lane::Normal,
            counted: true,
        },
    ];
    const DEPTH: u64 = 32;
    let started = Instant::now();
    let mut dispatched = 0u64;
    for i in 0..n {
        s.submit(RequestId(i), &demands[(i % 3) as usize], now);
        while let Some(a) = s.poll_action() {
            if matches!(a, Action::Dispatch { .. }) {
                dispatched += 1;
            }
        }
        if i >= DEPTH {
            s.finish(RequestId(i - DEPTH), Finish::Responded { status: 200 }, now);
        }
    }
    for i in n.saturating_sub(DEPTH)..n {
        s.finish(RequestId(i), Finish::Responded { status: 200 }, now);
    }
    while let Some(a) = s.poll_action() {
        if matches!(a, Action::Dispatch { .. }) {
            dispatched += 1;
        }
    }
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    let in_flight: usize = procs
        .iter()
        .map(|&(p, _)| s.load(p).in_flight as usize)
        .sum();
    BenchFigures {
        decisions_per_second: (2 * n) as f64 / secs,
        requests: n,
        dispatched,
        left_over: s.queued() + in_flight,
    }
}

#[cfg(test)]
mod tests {
    use super::admit_and_complete;

    #[test]
    fn admit_and_complete_decisions_per_second() {
        let f = admit_and_complete(200_000);
        println!(
            "scheduler: {:.0} admit+complete decisions/s ({} requests; debug builds are ~10-30x \
             slower than release)",
            f.decisions_per_second, f.requests
        );
        assert_eq!(f.dispatched, f.requests);
        assert_eq!(f.left_over, 0);
    }
}
