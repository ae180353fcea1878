//! The scheduler's rules, one test each, in simulated time (no clock, no sleeps).

use std::time::{Duration, Instant};

use super::*;
use crate::process::ProcessId;
use crate::proxy::lane::Lane;
use crate::proxy::route::{Target, TxDemand};

pub(super) struct Harness {
    pub(super) s: Scheduler,
    pub(super) now: Instant,
    next: u64,
}

pub(super) fn cfg(max: u32, extra: u32, min: u32) -> SchedulerConfig {
    SchedulerConfig {
        max_outstanding: max,
        fast_lane_extra: extra,
        normal_min_slots: min,
        ..SchedulerConfig::default()
    }
}

/// The default `queueSeconds` and `ownerQueueSeconds`.
const QUEUE: Duration = Duration::from_secs(1);
const OWNER_QUEUE: Duration = Duration::from_secs(30);

pub(super) const P0: ProcessId = ProcessId(0);
pub(super) const P1: ProcessId = ProcessId(1);
pub(super) const P2: ProcessId = ProcessId(2);

impl Harness {
    /// Processes `0..n`, all ready and serving tx.
    pub(super) fn new(c: SchedulerConfig, n: u16) -> Harness {
        let procs: Vec<_> = (0..n).map(|i| (ProcessId(i), true)).collect();
        Harness::with(c, &procs)
    }

    pub(super) fn with(c: SchedulerConfig, procs: &[(ProcessId, bool)]) -> Harness {
        let now = Instant::now();
        let mut s = Scheduler::new(c, procs);
        for &(p, _) in procs {
            s.set_process(p, ProcessState::Ready, now);
        }
        Harness { s, now, next: 0 }
    }

    pub(super) fn submit_demand(&mut self, target: Target, lane: Lane, counted: bool) -> RequestId {
        self.next += 1;
        let id = RequestId(self.next);
        let d = TxDemand {
            target,
            lane,
            counted,
        };
        self.s.submit(id, &d, self.now);
        id
    }

    pub(super) fn submit(&mut self, target: Target, lane: Lane) -> RequestId {
        self.submit_demand(target, lane, true)
    }

    pub(super) fn any(&mut self, lane: Lane) -> RequestId {
        self.submit(Target::LeastLoaded, lane)
    }

    pub(super) fn actions(&mut self) -> Vec<Action> {
        std::iter::from_fn(|| self.s.poll_action()).collect()
    }

    /// The one action, which must be for `id`.
    pub(super) fn one(&mut self, id: RequestId) -> Option<Action> {
        let a = self.actions();
        assert!(a.len() <= 1, "{a:?}");
        if let Some(x) = a.first() {
            let got = match *x {
                Action::Dispatch { id, .. }
                | Action::Refuse { id, .. }
                | Action::Fail { id, .. } => id,
            };
            assert_eq!(got, id);
        }
        a.first().copied()
    }

    pub(super) fn dispatched_to(&mut self, id: RequestId) -> ProcessId {
        match self.one(id) {
            Some(Action::Dispatch { process, .. }) => process,
            other => panic!("{id:?} not dispatched: {other:?}"),
        }
    }

    pub(super) fn waits(&mut self, id: RequestId) {
        assert_eq!(self.one(id), None, "{id:?} should wait");
    }

    pub(super) fn refused(&mut self, id: RequestId) -> Refusal {
        match self.one(id) {
            Some(Action::Refuse { reason, .. }) => reason,
            other => panic!("{id:?} not refused: {other:?}"),
        }
    }

    pub(super) fn at(&mut self, secs: f64) {
        self.now += Duration::from_secs_f64(secs);
        self.s.handle_timeout(self.now);
    }

    pub(super) fn finish(&mut self, id: RequestId, f: Finish) {
        self.s.finish(id, f, self.now);
    }

    pub(super) fn fill(&mut self, n: usize, lane: Lane) -> Vec<RequestId> {
        (0..n)
            .map(|_| {
                let id = self.any(lane);
                self.dispatched_to(id);
                id
            })
            .collect()
    }
}

pub(super) const OK: Finish = Finish::Responded { status: 200 };

#[test]
fn a_process_takes_max_outstanding_and_the_rest_wait_oldest_first() {
    // spec: QUEUE-1, QUEUE-2, QUEUE-3, LANE-4
    let mut h = Harness::new(cfg(16, 4, 0), 1);
    let running = h.fill(16, Lane::Normal);
    let a = h.any(Lane::Normal);
    h.waits(a);
    let b = h.any(Lane::Normal);
    h.waits(b);
    assert_eq!(h.s.queued(), 2);
    assert_eq!(h.s.load(P0).in_flight, 16);
    h.finish(running[0], OK);
    assert_eq!(h.dispatched_to(a), P0);
    h.finish(running[1], OK);
    assert_eq!(h.dispatched_to(b), P0);
}

#[test]
fn a_wait_ends_in_a_refusal_after_queue_seconds() {
    // spec: QUEUE-4, QUEUE-9
    let mut h = Harness::new(cfg(1, 0, 0), 1);
    h.fill(1, Lane::Normal);
    let a = h.any(Lane::Normal);
    h.waits(a);
    assert_eq!(h.s.poll_timeout(), Some(h.now + Duration::from_secs(1)));
    h.at(0.5);
    h.waits(a);
    h.at(0.5);
    assert_eq!(h.refused(a), Refusal::QueueTimeout { waited: QUEUE });
    assert_eq!(h.s.queued(), 0);
    assert_eq!(h.s.poll_timeout(), None);
}

#[test]
fn zero_waits_refuse_at_once() {
    // spec: CONF-13, CONF-14
    let mut c = cfg(1, 0, 0);
    c.queue = Duration::ZERO;
    c.owner_queue = Duration::ZERO;
    let mut h = Harness::new(c, 1);
    h.fill(1, Lane::Normal);
    let a = h.any(Lane::Normal);
    let at_once = Refusal::QueueTimeout {
        waited: Duration::ZERO,
    };
    assert_eq!(h.refused(a), at_once);
    let b = h.submit(Target::Owner(P0), Lane::Normal);
    assert_eq!(h.refused(b), at_once);
}

#[test]
fn no_limit_means_nothing_waits() {
    // spec: CONF-12
    let mut h = Harness::new(cfg(0, 4, 4), 2);
    h.fill(1000, Lane::Normal);
    h.fill(1000, Lane::Fast);
    assert_eq!(h.s.load(P0).in_flight + h.s.load(P1).in_flight, 2000);
    assert_eq!(h.s.load(P0).slots, None);
}

#[test]
fn a_cache_id_request_waits_only_for_its_owner_and_longer() {
    // spec: QUEUE-6, ROUTE-3a, DEC-8
    let mut h = Harness::new(cfg(1, 0, 0), 2);
    let first = h.submit(Target::Owner(P1), Lane::Normal);
    assert_eq!(h.dispatched_to(first), P1);
    let a = h.submit(Target::Owner(P1), Lane::Normal);
    h.waits(a); // P0 is free, but cannot stand in
    assert_eq!(h.s.load(P1).queued, 1);
    h.at(29.0);
    h.waits(a);
    h.at(1.0);
    assert_eq!(
        h.refused(a),
        Refusal::QueueTimeout {
            waited: OWNER_QUEUE
        }
    );
    // a cache-id request goes to its owner even in cooldown (DEC-8)
    h.finish(first, Finish::Responded { status: 503 });
    assert!(h.s.load(P1).cooling);
    let b = h.submit(Target::Owner(P1), Lane::Normal);
    assert_eq!(h.dispatched_to(b), P1);
}

#[test]
fn an_owner_down_or_draining_means_the_cache_is_lost() {
    // spec: ROUTE-3b, DEC-15, OPT-3, OPT-11
    let mut h = Harness::new(cfg(1, 0, 0), 3);
    let busy = h.submit(Target::Owner(P1), Lane::Normal);
    h.dispatched_to(busy);
    let waiting = h.submit(Target::Owner(P1), Lane::Normal);
    h.waits(waiting);
    h.s.set_process(P1, ProcessState::Draining, h.now);
    assert_eq!(h.refused(waiting), Refusal::OwnerGone(P1));
    let a = h.submit(Target::Owner(P1), Lane::Normal);
    assert_eq!(h.refused(a), Refusal::OwnerGone(P1));
    h.finish(busy, OK); // the drained one's request still finishes cleanly
    assert_eq!(h.s.load(P1).in_flight, 0);
    h.s.set_process(P2, ProcessState::Down, h.now);
    let b = h.submit(Target::Owner(P2), Lane::Normal);
    assert_eq!(h.refused(b), Refusal::OwnerGone(P2));
}

#[test]
fn an_unknown_prefix_goes_anywhere_but_waits_as_long_as_an_owner_wait() {
    // spec: QUEUE-7, ROUTE-3c
    let mut h = Harness::new(cfg(1, 0, 0), 2);
    let a = h.submit(Target::UnknownPrefix, Lane::Normal);
    h.dispatched_to(a);
    let b = h.submit(Target::UnknownPrefix, Lane::Normal);
    h.dispatched_to(b);
    let c = h.submit(Target::UnknownPrefix, Lane::Normal);
    h.waits(c);
    h.at(29.0);
    h.waits(c);
    h.finish(b, OK);
    h.dispatched_to(c);
}

#[test]
fn affinity_waits_for_a_full_issuer_and_falls_back_when_it_goes() {
    // spec: QUEUE-8, DEC-9, ROUTE-3d, ROUTE-5c
    let mut h = Harness::new(cfg(1, 0, 0), 3);
    let a = h.submit(Target::Affinity(P1), Lane::Normal);
    assert_eq!(h.dispatched_to(a), P1);
    let b = h.submit(Target::Affinity(P1), Lane::Normal);
    h.waits(b); // P0 and P2 are free: the issuer is only full
    h.at(10.0);
    h.waits(b);
    // the issuer starts draining: its waiter goes by rule 4, at once here
    h.s.set_process(P1, ProcessState::Draining, h.now);
    assert_ne!(h.dispatched_to(b), P1);
    // an issuer that is down: rule 4 at once
    let c = h.submit(Target::Affinity(P1), Lane::Normal);
    assert_ne!(h.dispatched_to(c), P1);
    // full issuer, owner wait times out with owner_wait
    let mut h = Harness::new(cfg(1, 0, 0), 1);
    let a = h.submit(Target::Affinity(P0), Lane::Normal);
    h.dispatched_to(a);
    let b = h.submit(Target::Affinity(P0), Lane::Normal);
    h.waits(b);
    h.at(30.0);
    assert_eq!(
        h.refused(b),
        Refusal::QueueTimeout {
            waited: OWNER_QUEUE
        }
    );
}

#[test]
fn least_outstanding_wins_and_ties_rotate() {
    // spec: ROUTE-4a
    let mut h = Harness::new(cfg(16, 4, 4), 3);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let id = h.any(Lane::Normal);
        seen.push(h.dispatched_to(id));
    }
    seen.sort();
    assert_eq!(seen, vec![P0, P1, P2]);
    let extra = h.any(Lane::Normal);
    let p = h.dispatched_to(extra);
    assert_eq!(h.s.load(p).in_flight, 2);
    // the next ones fill the other two before anyone gets a third
    for _ in 0..2 {
        let id = h.any(Lane::Normal);
        assert_ne!(h.dispatched_to(id), p);
    }
}

#[test]
fn only_ready_tx_processes_take_ordinary_requests() {
    // spec: ROUTE-4b, ROUTE-4c, LIMIT-3
    let mut h = Harness::with(cfg(16, 4, 4), &[(P0, false), (P1, true), (P2, true)]);
    h.s.set_process(P2, ProcessState::Down, h.now);
    for _ in 0..5 {
        let id = h.any(Lane::Normal);
        assert_eq!(h.dispatched_to(id), P1);
    }
    // the master (not serving tx) still takes the cache-ids it issued
    let own = h.submit(Target::Owner(P0), Lane::Normal);
    assert_eq!(h.dispatched_to(own), P0);
    // master down: tx carries on (LIMIT-3)
    let mut h = Harness::new(cfg(16, 4, 4), 2);
    h.s.set_process(P0, ProcessState::Down, h.now);
    let id = h.any(Lane::Normal);
    assert_eq!(h.dispatched_to(id), P1);
}

#[test]
fn no_ready_process_is_a_refusal_at_once() {
    // spec: QUEUE-16, DEC-10
    let mut h = Harness::new(cfg(1, 0, 0), 1);
    let busy = h.any(Lane::Normal);
    h.dispatched_to(busy);
    let waiting = h.any(Lane::Normal);
    h.waits(waiting);
    h.s.set_process(P0, ProcessState::Down, h.now);
    assert_eq!(h.refused(waiting), Refusal::NoProcessReady);
    let a = h.any(Lane::Fast);
    assert_eq!(h.refused(a), Refusal::NoProcessReady);
    let b = h.submit(Target::UnknownPrefix, Lane::Normal);
    assert_eq!(h.refused(b), Refusal::NoProcessReady);
    h.finish(busy, Finish::Failed);
    assert_eq!(h.s.load(P0).in_flight, 0);
}

#[test]
fn options_neither_waits_nor_counts() {
    // spec: QUEUE-12, QUEUE-13, DEC-11
    let mut h = Harness::new(cfg(1, 0, 0), 1);
    h.fill(1, Lane::Normal);
    let o = h.submit_demand(Target::LeastLoaded, Lane::Normal, false);
    assert_eq!(h.dispatched_to(o), P0);
    assert_eq!(h.s.load(P0).in_flight, 1);
    let o2 = h.submit_demand(Target::Owner(P0), Lane::Normal, false);
    h.dispatched_to(o2);
    h.finish(o, OK);
    h.finish(o2, OK);
    assert_eq!(h.s.load(P0).in_flight, 1);
}

#[test]
fn stopping_refuses_every_wait_and_nothing_waits_after() {
    // spec: QUEUE-15
    let mut h = Harness::new(cfg(1, 0, 0), 2);
    let a = h.submit(Target::Owner(P0), Lane::Normal);
    h.dispatched_to(a);
    let b = h.any(Lane::Normal);
    h.dispatched_to(b);
    let w1 = h.any(Lane::Normal);
    let w2 = h.submit(Target::Owner(P0), Lane::Normal);
    assert!(h.actions().is_empty());
    h.s.stop(h.now);
    let mut refused = h.actions();
    refused.sort_by_key(|a| match a {
        Action::Refuse { id, .. } => id.0,
        _ => 0,
    });
    assert_eq!(
        refused,
        vec![
            Action::Refuse {
                id: w1,
                reason: Refusal::Stopping
            },
            Action::Refuse {
                id: w2,
                reason: Refusal::Stopping
            }
        ]
    );
    let c = h.any(Lane::Normal);
    assert_eq!(h.refused(c), Refusal::Stopping);
    h.finish(b, OK);
    let d = h.any(Lane::Normal); // room: still served
    h.dispatched_to(d);
}

#[test]
fn not_sent_is_tried_once_more_elsewhere_else_it_fails() {
    let mut h = Harness::new(cfg(16, 4, 4), 2);
    let a = h.any(Lane::Normal);
    let first = h.dispatched_to(a);
    h.finish(a, Finish::NotSent);
    let second = h.dispatched_to(a);
    assert_ne!(first, second);
    h.finish(a, Finish::NotSent);
    assert_eq!(
        h.one(a),
        Some(Action::Fail {
            id: a,
            process: second
        })
    );
    // an owner's request cannot go elsewhere
    let b = h.submit(Target::Owner(P1), Lane::Normal);
    h.dispatched_to(b);
    h.finish(b, Finish::NotSent);
    assert_eq!(h.one(b), Some(Action::Fail { id: b, process: P1 }));
    // the only process: nowhere else
    let mut h = Harness::new(cfg(16, 4, 4), 1);
    let c = h.any(Lane::Fast);
    h.dispatched_to(c);
    h.finish(c, Finish::NotSent);
    assert_eq!(h.one(c), Some(Action::Fail { id: c, process: P0 }));
    assert_eq!(h.s.load(P0).in_flight, 0);
}

#[test]
fn not_sent_with_every_other_process_full_waits_queue_seconds_from_the_retry() {
    // spec: DEC-33 (the retried request waits for a slot as a new one does, its queueSeconds
    // counted from the retry, not from its arrival)
    let mut h = Harness::new(cfg(1, 0, 0), 2);
    let a = h.any(Lane::Normal);
    let on_a = h.dispatched_to(a);
    let b = h.any(Lane::Normal);
    let on_b = h.dispatched_to(b);
    assert_ne!(on_a, on_b);
    h.now += QUEUE * 2; // longer than queueSeconds since a arrived
    h.s.set_process(on_a, ProcessState::Down, h.now);
    h.finish(a, Finish::NotSent);
    assert_eq!(h.actions(), vec![], "a waits for b's slot, not a 502");
    h.now += QUEUE / 2;
    h.finish(b, OK);
    assert_eq!(h.dispatched_to(a), on_b);
    // Sent twice: a second hand-back fails.
    h.finish(a, Finish::NotSent);
    assert_eq!(
        h.one(a),
        Some(Action::Fail {
            id: a,
            process: on_b
        })
    );
    // Waiting past queueSeconds from the retry: the queue's refusal.
    h.s.set_process(on_a, ProcessState::Ready, h.now);
    let c = h.any(Lane::Normal);
    let on_c = h.dispatched_to(c);
    let d = h.any(Lane::Normal);
    h.dispatched_to(d);
    h.s.set_process(on_c, ProcessState::Down, h.now);
    h.finish(c, Finish::NotSent);
    assert_eq!(h.actions(), vec![]);
    h.now += QUEUE;
    h.s.handle_timeout(h.now);
    assert!(matches!(h.refused(c), Refusal::QueueTimeout { .. }));
}

#[test]
fn cancel_drops_a_waiter_and_frees_a_slot() {
    let mut h = Harness::new(cfg(1, 0, 0), 1);
    let a = h.any(Lane::Normal);
    h.dispatched_to(a);
    let w1 = h.any(Lane::Normal);
    let w2 = h.any(Lane::Normal);
    h.s.cancel(w1, h.now);
    assert_eq!(h.s.queued(), 1);
    h.s.cancel(a, h.now);
    assert_eq!(h.dispatched_to(w2), P0); // w1 was never sent
    h.at(5.0);
    assert!(h.actions().is_empty());
    assert_eq!(h.s.poll_timeout(), None);
}

#[test]
fn a_live_reload_applies_to_the_next_decisions() {
    let mut h = Harness::new(cfg(1, 0, 0), 1);
    h.fill(1, Lane::Normal);
    let w = h.any(Lane::Normal);
    h.waits(w);
    h.s.set_config(cfg(2, 0, 0), h.now);
    assert_eq!(h.dispatched_to(w), P0);
}

#[test]
fn workers_come_and_go() {
    let mut h = Harness::new(cfg(1, 0, 0), 1);
    h.fill(1, Lane::Normal);
    let w = h.any(Lane::Normal);
    h.waits(w);
    h.s.add_process(P1, true);
    h.waits(w); // added down
    h.s.set_process(P1, ProcessState::Ready, h.now);
    assert_eq!(h.dispatched_to(w), P1);
    h.s.remove_process(P1, h.now);
    h.finish(w, OK); // its request ends after it left: no panic, no leak
    assert_eq!(h.s.load(P1).in_flight, 0);
    let x = h.any(Lane::Normal);
    h.waits(x);
}

#[test]
fn a_freed_slot_goes_to_the_oldest_request_that_may_use_it() {
    // spec: QUEUE-3
    let mut h = Harness::new(cfg(1, 0, 0), 1);
    let a = h.any(Lane::Normal);
    h.dispatched_to(a);
    let shared = h.any(Lane::Normal);
    let owned = h.submit(Target::Owner(P0), Lane::Normal);
    let shared2 = h.any(Lane::Normal);
    assert!(h.actions().is_empty());
    h.finish(a, OK);
    h.dispatched_to(shared);
    h.finish(shared, OK);
    h.dispatched_to(owned);
    h.finish(owned, OK);
    h.dispatched_to(shared2);
}
