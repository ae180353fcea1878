//! What the lifecycle's unit tests (`tests.rs`, `rolling/tests.rs`) share: the
//! processes' ids, and a cluster brought to running with its start-up actions taken.

use std::time::{Duration, Instant};

use super::{Action, Lifecycle};
use crate::process::ProcessId;

pub(super) const M: ProcessId = ProcessId::MASTER;
pub(super) const T1: ProcessId = ProcessId(1);
pub(super) const T2: ProcessId = ProcessId(2);
pub(super) const T3: ProcessId = ProcessId(3);

pub(super) fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Every action the lifecycle has for the shell now, in order.
pub(super) fn drain(l: &mut Lifecycle) -> Vec<Action> {
    std::iter::from_fn(|| l.poll_action()).collect()
}

/// The master and `n` workers, all ready, their actions taken.
pub(super) fn running(n: usize, t: Instant) -> Lifecycle {
    let mut l = Lifecycle::new(n, 6, secs(30));
    l.start(t);
    l.ready(M, t);
    l.set_workers(n, t);
    for i in 1..=n {
        l.ready(ProcessId(i as u16), t);
    }
    drain(&mut l);
    l
}
