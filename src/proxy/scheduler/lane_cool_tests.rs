//! The scheduler's fast lane and cooldown rules, one test each, in simulated time.

use std::time::Duration;

use super::tests::{cfg, Harness, OK, P0, P1};
use super::*;
use crate::proxy::lane::Lane;

#[test]
fn a_503_cools_a_process_down_while_another_can_take_its_requests() {
    // spec: COOL-1, COOL-2, COOL-3
    let mut h = Harness::new(cfg(16, 4, 4), 2);
    let a = h.any(Lane::Normal);
    let pa = h.dispatched_to(a);
    let other = if pa == P0 { P1 } else { P0 };
    let held = h.fill(3, Lane::Normal); // load the other more
    h.finish(a, Finish::Responded { status: 503 });
    assert!(h.s.load(pa).cooling);
    for _ in 0..3 {
        let id = h.any(Lane::Normal);
        assert_eq!(h.dispatched_to(id), other);
    }
    // the other refuses too: every process is cooling, so both take requests (COOL-3)
    h.finish(held[0], Finish::Responded { status: 503 });
    let mut to = Vec::new();
    for _ in 0..8 {
        let id = h.any(Lane::Normal);
        to.push(h.dispatched_to(id));
    }
    assert!(to.contains(&pa) && to.contains(&other));
    // after cooldownSeconds, the first is open again
    h.at(2.0);
    assert!(!h.s.load(pa).cooling);
}

#[test]
fn a_cooldown_end_lets_waiting_requests_in() {
    // spec: COOL-1, COOL-2
    let mut h = Harness::new(cfg(1, 0, 0), 2);
    let a = h.any(Lane::Normal);
    h.dispatched_to(a);
    let b = h.any(Lane::Normal);
    h.dispatched_to(b);
    h.finish(a, Finish::Responded { status: 503 }); // pa free but cooling, the other full
    let w = h.any(Lane::Normal);
    h.waits(w);
    assert_eq!(h.s.poll_timeout(), Some(h.now + Duration::from_secs(1)));
    h.at(0.9);
    h.waits(w);
    let mut c = cfg(1, 0, 0);
    c.queue = Duration::from_secs(5);
    let mut h2 = Harness::new(c, 2);
    let a = h2.any(Lane::Normal);
    let pa = h2.dispatched_to(a);
    let b = h2.any(Lane::Normal);
    h2.dispatched_to(b);
    h2.finish(a, Finish::Responded { status: 503 });
    let w = h2.any(Lane::Normal);
    h2.waits(w);
    assert_eq!(h2.s.poll_timeout(), Some(h2.now + Duration::from_secs(2)));
    h2.at(2.0);
    assert_eq!(h2.dispatched_to(w), pa);
}

#[test]
fn three_timeouts_in_a_row_cool_a_process_and_a_response_breaks_the_run() {
    // spec: COOL-4, COOL-5, COOL-6, TIMEOUT-3
    let mut h = Harness::new(cfg(16, 4, 4), 1);
    let send = |h: &mut Harness, f: Finish| {
        let id = h.any(Lane::Normal);
        h.dispatched_to(id);
        h.finish(id, f);
    };
    send(&mut h, Finish::TimedOut);
    send(&mut h, Finish::TimedOut);
    send(&mut h, OK);
    send(&mut h, Finish::TimedOut);
    send(&mut h, Finish::TimedOut);
    assert!(!h.s.load(P0).cooling);
    assert_eq!(h.s.load(P0).in_flight, 0); // a timeout frees its slot
    send(&mut h, Finish::TimedOut);
    assert!(h.s.load(P0).cooling);
    // cooling alone, it still takes requests (COOL-3), and is never taken down (COOL-6)
    send(&mut h, OK);
}

#[test]
fn zero_cooldown_means_no_pause() {
    // spec: CONF-15
    let mut c = cfg(16, 4, 4);
    c.cooldown = Duration::ZERO;
    let mut h = Harness::new(c, 2);
    let a = h.any(Lane::Normal);
    h.dispatched_to(a);
    h.finish(a, Finish::Responded { status: 503 });
    assert!(!h.s.load(P0).cooling && !h.s.load(P1).cooling);
}

#[test]
fn the_fast_lane_uses_the_extra_slots_and_gets_freed_slots_first() {
    // spec: LANE-1, LANE-2, LANE-3, LANE-15
    let mut h = Harness::new(cfg(16, 4, 4), 1);
    let normal = h.fill(16, Lane::Normal);
    let fast = h.fill(4, Lane::Fast);
    assert_eq!(h.s.load(P0).in_flight, 20);
    assert_eq!(h.s.load(P0).slots, Some(20));
    let wn = h.any(Lane::Normal);
    h.waits(wn);
    let wf = h.any(Lane::Fast);
    h.waits(wf);
    h.finish(fast[0], OK);
    assert_eq!(h.dispatched_to(wf), P0); // the newer cheap one first
                                         // normal requests use only the first maxOutstanding slots (LANE-4)
    h.finish(fast[1], OK);
    h.waits(wn);
    for id in &normal[..3] {
        h.finish(*id, OK);
        h.waits(wn);
    }
    h.finish(normal[3], OK); // 15 in flight
    assert_eq!(h.dispatched_to(wn), P0);
}

#[test]
fn normal_requests_may_go_past_max_while_few_of_them_run() {
    // spec: LANE-5
    let mut h = Harness::new(cfg(16, 4, 4), 1);
    h.fill(16, Lane::Fast);
    let n = h.fill(4, Lane::Normal); // slots 17..20, fewer than 4 normal each time
    assert_eq!(h.s.load(P0).normal_running, 4);
    let w = h.any(Lane::Normal);
    h.waits(w);
    h.finish(n[0], OK); // 19 in flight, 3 normal running: may go
    assert_eq!(h.dispatched_to(w), P0);
}

#[test]
fn while_normal_requests_wait_cheap_ones_leave_room_for_min_normal() {
    // spec: LANE-6
    let mut h = Harness::new(cfg(16, 4, 4), 1);
    let fast = h.fill(16, Lane::Fast);
    let n1 = h.any(Lane::Normal);
    h.dispatched_to(n1); // 17 in flight, 1 normal
    h.fill(3, Lane::Normal); // 20 in flight, 4 normal
    let waits: Vec<_> = (0..3).map(|_| h.any(Lane::Normal)).collect();
    let wf = h.any(Lane::Fast);
    assert!(h.actions().is_empty());
    // a slot frees: the normal waiter is admitted (4 normal running: no, unless fewer)
    h.finish(n1, OK); // 19 in flight, 3 normal running -> a normal may take the slot
    assert_eq!(h.dispatched_to(waits[0]), P0);
    h.finish(fast[0], OK); // 19, 4 normal: normal may not (>=16), cheap may (4 normal run)
    assert_eq!(h.dispatched_to(wf), P0);
    // with 2 normal running and normal requests waiting, cheap ones keep 2 slots free
    let mut h = Harness::new(cfg(16, 4, 4), 1);
    h.fill(16, Lane::Fast);
    let two = h.fill(2, Lane::Normal); // 18 in flight, 2 normal
    h.fill(2, Lane::Normal); // 20, 4 normal
    let wn = h.any(Lane::Normal);
    let wf = h.any(Lane::Fast);
    assert!(h.actions().is_empty());
    h.finish(two[0], OK); // 19, 3 normal: a cheap one would take the 4th normal its room
    assert_eq!(h.dispatched_to(wn), P0);
    assert!(h.actions().is_empty());
    h.s.cancel(wf, h.now);
}

#[test]
fn a_cheap_request_is_held_back_for_the_reservation() {
    // spec: LANE-6
    let mut h = Harness::new(cfg(4, 2, 2), 1); // 6 slots, 2 normal minimum
    h.fill(4, Lane::Fast);
    let n = h.any(Lane::Normal);
    h.dispatched_to(n); // 5 in flight, 1 normal (past max, under the minimum)
    let f1 = h.fill(1, Lane::Fast); // 6: full
    let wn = h.any(Lane::Normal);
    h.waits(wn);
    let wf = h.any(Lane::Fast);
    h.waits(wf);
    h.finish(f1[0], OK); // 5 in flight: a cheap one would leave 0 free with 1 normal short
    assert_eq!(h.dispatched_to(wn), P0);
    h.finish(n, OK); // 5 in flight, 1 normal; nothing normal waits: cheap may fill
    assert_eq!(h.dispatched_to(wf), P0);
}

#[test]
fn no_fast_lane_makes_cheap_requests_normal() {
    // spec: CONF-20, CONF-21
    let mut h = Harness::new(cfg(2, 0, 0), 1);
    h.fill(2, Lane::Fast);
    let f = h.any(Lane::Fast);
    h.waits(f);
    assert_eq!(h.s.load(P0).slots, Some(2));
}

#[test]
fn a_slot_that_opens_goes_to_a_waiting_cheap_request_before_an_older_normal_one() {
    // spec: LANE-3
    let mut h = Harness::new(cfg(1, 1, 0), 2);
    h.s.set_process(P1, ProcessState::Down, h.now);
    h.fill(1, Lane::Normal);
    h.fill(1, Lane::Fast); // P0 full (2 slots)
    let wn = h.any(Lane::Normal);
    let wf = h.any(Lane::Fast);
    assert!(h.actions().is_empty());
    h.s.set_process(P1, ProcessState::Ready, h.now);
    assert_eq!(h.dispatched_to(wf), P1);
    // P1 has 1 in flight = maxOutstanding: the normal one keeps waiting
    h.waits(wn);
}

#[test]
fn a_cooldown_handed_over_by_an_in_place_upgrade_runs_on_to_its_end() {
    // #16: an upgrade keeps the cooldowns: the new program's scheduler takes each one over with
    // what is left of it, and steers around the process until then.
    let mut old = Harness::new(cfg(16, 4, 4), 2);
    let a = old.any(Lane::Normal);
    let pa = old.dispatched_to(a);
    let other = if pa == P0 { P1 } else { P0 };
    old.finish(a, Finish::Responded { status: 503 });
    old.at(0.5);
    let running = old.s.cooldowns();
    assert_eq!(running.len(), 1);
    assert_eq!(running[0].0, pa);
    let left = running[0].1 - old.now;

    let mut new = Harness::new(cfg(16, 4, 4), 2);
    assert!(!new.s.load(pa).cooling);
    new.s.resume_cooldown(pa, new.now + left, new.now);
    assert!(new.s.load(pa).cooling);
    for _ in 0..3 {
        let id = new.any(Lane::Normal);
        assert_eq!(new.dispatched_to(id), other);
    }
    assert_eq!(new.s.poll_timeout(), Some(new.now + left));
    new.at(left.as_secs_f64());
    assert!(!new.s.load(pa).cooling);
    // One already over by the time it is taken over is not started again.
    new.s.resume_cooldown(pa, new.now, new.now);
    assert!(!new.s.load(pa).cooling);
}
