//! A micro-benchmark as a test: admit + complete decisions per second, printed, not asserted on
//! time (`cargo test --release --lib scheduler::bench -- --nocapture` for the real figure; the
//! target is at least 1,000,000 a second on one core). It asserts only that the run was sound.

use std::time::Instant;

use super::*;
use crate::process::ProcessId;
use crate::proxy::lane::Lane;
use crate::proxy::route::{Target, TxDemand};

#[test]
fn admit_and_complete_decisions_per_second() {
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
    // Keep 32 in flight, so every decision sees loaded processes.
    const DEPTH: u64 = 32;
    let n: u64 = 200_000;
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
    println!(
        "scheduler: {:.0} admit+complete decisions/s ({} requests, {} processes, {} in flight; \
         debug builds are ~10-30x slower than release)",
        (2 * n) as f64 / secs,
        n,
        procs.len(),
        DEPTH
    );
    assert_eq!(dispatched, n);
    assert_eq!(s.queued(), 0);
    for &(p, _) in &procs {
        assert_eq!(s.load(p).in_flight, 0);
    }
}
