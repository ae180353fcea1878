//! The scheduler with saturated processes (fhircluster's own rule, `slots.rs`), in simulated
//! time.

use super::tests::{cfg, Harness, OK, P0, P1};
use super::*;
use crate::proxy::lane::Lane;

#[test]
fn a_saturated_process_takes_only_min_normal_heavy_requests_and_the_lane_keeps_its_slots() {
    // spec: DEC-29
    let mut h = Harness::new(cfg(16, 4, 4), 1);
    h.s.set_saturated(P0, Some(4), h.now);
    assert!(h.s.load(P0).saturated);
    let heavy = h.fill(4, Lane::Normal);
    let fifth = h.any(Lane::Normal);
    h.waits(fifth);
    // cheap requests still get any slot left (20 - 4 - nothing reserved: 4 normal run)
    let cheap = h.fill(16, Lane::Fast);
    let over = h.any(Lane::Fast);
    h.waits(over);
    // a heavy one ends: the oldest waiting heavy one takes its place (a cheap one ends: the
    // waiting cheap one does, the heavy one still may not)
    h.finish(cheap[0], OK);
    assert_eq!(h.dispatched_to(over), P0);
    h.finish(heavy[0], OK);
    assert_eq!(h.dispatched_to(fifth), P0);
    assert_eq!(h.s.load(P0).normal_running, 4);
}

#[test]
fn the_end_of_saturation_lets_waiting_requests_in_at_once() {
    // spec: DEC-29
    let mut h = Harness::new(cfg(16, 4, 4), 1);
    h.s.set_saturated(P0, Some(4), h.now);
    h.fill(4, Lane::Normal);
    let waiting: Vec<_> = (0..3).map(|_| h.any(Lane::Normal)).collect();
    assert!(h.actions().is_empty());
    h.s.set_saturated(P0, None, h.now);
    let sent = h.actions();
    assert_eq!(sent.len(), 3, "{sent:?}");
    for (a, id) in sent.iter().zip(&waiting) {
        assert!(matches!(a, Action::Dispatch { id: got, process: P0, .. } if got == id));
    }
}

#[test]
fn heavy_requests_go_to_the_process_that_is_not_saturated() {
    // spec: DEC-29
    let mut h = Harness::new(cfg(16, 4, 4), 2);
    h.s.set_saturated(P0, Some(4), h.now);
    let to: Vec<_> = (0..12)
        .map(|_| {
            let id = h.any(Lane::Normal);
            h.dispatched_to(id)
        })
        .collect();
    assert_eq!(to.iter().filter(|&&p| p == P0).count(), 4, "{to:?}");
    assert_eq!(to.iter().filter(|&&p| p == P1).count(), 8, "{to:?}");
}

#[test]
fn a_process_that_goes_down_comes_back_not_saturated() {
    // spec: DEC-29
    let mut h = Harness::new(cfg(16, 4, 4), 1);
    h.s.set_saturated(P0, Some(4), h.now);
    h.s.set_process(P0, ProcessState::Down, h.now);
    assert!(!h.s.load(P0).saturated);
    // and a process that is not ready can't be marked
    h.s.set_saturated(P0, Some(4), h.now);
    assert!(!h.s.load(P0).saturated);
    h.s.set_process(P0, ProcessState::Ready, h.now);
    assert!(!h.s.load(P0).saturated);
    assert_eq!(h.fill(16, Lane::Normal).len(), 16);
}

#[test]
fn a_hold_of_one_runs_one_heavy_request_and_a_higher_hold_lets_the_next_in_at_once() {
    // spec: DEC-29
    let mut h = Harness::new(cfg(16, 4, 4), 1);
    h.s.set_saturated(P0, Some(1), h.now);
    assert_eq!(h.s.load(P0).held, Some(1));
    let first = h.any(Lane::Normal);
    assert_eq!(h.dispatched_to(first), P0);
    let waiting: Vec<_> = (0..3).map(|_| h.any(Lane::Normal)).collect();
    for &id in &waiting {
        h.waits(id);
    }
    assert!(h.s.normal_waiting(P0));
    // the lane keeps every other slot: nothing reserved past the one heavy request running
    let cheap = h.fill(19, Lane::Fast);
    // held to 2 now: the next free slot goes to the oldest heavy request
    h.s.set_saturated(P0, Some(2), h.now);
    assert!(
        h.actions().is_empty(),
        "no slot free: the lane has them all"
    );
    h.finish(cheap[0], OK);
    assert_eq!(h.dispatched_to(waiting[0]), P0);
    assert_eq!(h.s.load(P0).normal_running, 2);
}

#[test]
fn growing_the_hold_dispatches_the_oldest_waiting_heavy_request_and_shrinking_evicts_none() {
    // spec: DEC-29
    let mut h = Harness::new(cfg(16, 4, 4), 1);
    h.s.set_saturated(P0, Some(1), h.now);
    let first = h.any(Lane::Normal);
    h.dispatched_to(first);
    let waiting: Vec<_> = (0..3).map(|_| h.any(Lane::Normal)).collect();
    assert!(h.actions().is_empty());
    h.s.set_saturated(P0, Some(2), h.now);
    let sent = h.actions();
    assert!(
        matches!(sent.as_slice(), [Action::Dispatch { id, process: P0 }] if *id == waiting[0]),
        "{sent:?}"
    );
    // back to 1: the two running finish in their own time; the next waits for both
    h.s.set_saturated(P0, Some(1), h.now);
    assert!(h.actions().is_empty());
    h.finish(first, OK);
    assert!(h.actions().is_empty(), "one still runs: held to 1");
    h.finish(waiting[0], OK);
    assert_eq!(h.dispatched_to(waiting[1]), P0);
    assert_eq!(h.s.load(P0).normal_running, 1);
    assert_eq!(h.s.queued(), 1);
    assert!(h.s.normal_waiting(P0));
}
