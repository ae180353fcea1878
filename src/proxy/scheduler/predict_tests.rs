//! `predictiveAdmission` (DEC-50) in the scheduler, in simulated time (no clock, no sleeps):
//! cold start as today, early refusal of what cannot get a slot in time, never of what can when
//! the estimates are right, and a `Retry-After` that follows the load.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::tests::{cfg, Harness, OK, P0, P1};
use super::*;
use crate::process::ProcessId;
use crate::proxy::lane::Lane;
use crate::proxy::route::Target;

const SEC: Duration = Duration::from_secs(1);

fn predicting(max: u32, extra: u32, min: u32) -> SchedulerConfig {
    SchedulerConfig {
        predictive: true,
        ..cfg(max, extra, min)
    }
}

/// `n` requests of `lane` sent and answered after `took` each, so each process has a sample.
fn warm(h: &mut Harness, n: usize, lane: Lane, took: f64) {
    let ids = h.fill(n, lane);
    h.at(took);
    for id in ids {
        h.finish(id, OK);
    }
    assert!(h.actions().is_empty());
}

fn early(retry_after: u8) -> Refusal {
    Refusal::Forecast {
        waited: SEC,
        retry_after,
        early: true,
    }
}

#[test]
fn with_no_sample_yet_a_request_waits_its_whole_wait_and_is_told_5_s_as_today() {
    // spec: DEC-50, QUEUE-4, QUEUE-5 (cold start)
    let mut h = Harness::new(predicting(2, 0, 0), 1);
    h.fill(2, Lane::Normal);
    let late = h.any(Lane::Normal);
    h.waits(late);
    h.at(0.999);
    h.waits(late);
    h.at(0.001);
    assert_eq!(h.refused(late), Refusal::QueueTimeout { waited: SEC });
}

#[test]
fn behind_slots_busy_with_long_work_a_request_is_refused_at_once_and_told_when_one_frees() {
    // spec: DEC-50
    let mut h = Harness::new(predicting(2, 0, 0), 1);
    warm(&mut h, 2, Lane::Normal, 3.0);
    let busy = h.fill(2, Lane::Normal);
    // Both slots expected busy 3 s more: no slot within queueSeconds (1 s).
    let a = h.any(Lane::Normal);
    assert_eq!(h.refused(a), early(3));
    h.at(1.0);
    let b = h.any(Lane::Normal);
    assert_eq!(h.refused(b), early(2), "2 s left: Retry-After follows");
    // Half a second left: it waits, and gets the slot when the first ends.
    h.at(1.5);
    let c = h.any(Lane::Normal);
    h.waits(c);
    // One is waiting for the first free; the next would need the second, at the same time.
    let d = h.any(Lane::Normal);
    h.waits(d);
    // A third would need a slot after those two: 3.5 s from now.
    let e = h.any(Lane::Normal);
    assert_eq!(h.refused(e), early(4));
    h.at(0.5);
    h.finish(busy[0], OK);
    assert_eq!(h.dispatched_to(c), P0);
    h.finish(busy[1], OK);
    assert_eq!(h.dispatched_to(d), P0);
}

#[test]
fn with_it_off_the_same_request_waits_out_the_queue_and_is_told_5_s() {
    // spec: QUEUE-4, QUEUE-5 (the spec's rule alone)
    let mut h = Harness::new(cfg(2, 0, 0), 1);
    warm(&mut h, 2, Lane::Normal, 3.0);
    h.fill(2, Lane::Normal);
    let a = h.any(Lane::Normal);
    h.waits(a);
    h.at(1.0);
    assert_eq!(h.refused(a), Refusal::QueueTimeout { waited: SEC });
}

#[test]
fn short_work_lets_a_line_wait_as_long_as_the_slots_can_serve_it_in_time() {
    // spec: DEC-50
    // 2 slots of 300 ms: 3 frees each within 1 s, so 6 may wait; the 7th cannot get in (its
    // slot would come at 1.2 s).
    let mut h = Harness::new(predicting(2, 0, 0), 1);
    warm(&mut h, 2, Lane::Normal, 0.3);
    let mut running = h.fill(2, Lane::Normal);
    let line: Vec<_> = (0..6).map(|_| h.any(Lane::Normal)).collect();
    assert!(h.actions().is_empty(), "all six wait");
    let seventh = h.any(Lane::Normal);
    assert_eq!(h.refused(seventh), early(2));
    // Served as forecast: every one of the six gets its slot within its wait.
    let mut served = 0;
    for _ in 0..3 {
        h.at(0.3);
        for id in std::mem::take(&mut running) {
            h.finish(id, OK);
        }
        for a in h.actions() {
            if let Action::Dispatch { id, .. } = a {
                assert!(line.contains(&id));
                running.push(id);
                served += 1;
            }
        }
    }
    assert_eq!(served, 6);
}

#[test]
fn a_request_that_waited_its_whole_wait_is_told_when_a_slot_is_now_expected() {
    // spec: DEC-50
    let mut h = Harness::new(predicting(1, 0, 0), 1);
    warm(&mut h, 1, Lane::Normal, 0.5);
    h.fill(1, Lane::Normal);
    // Expected to free in 0.5 s: both wait.
    let (a, b) = (h.any(Lane::Normal), h.any(Lane::Normal));
    assert!(h.actions().is_empty());
    // It runs on past its estimate: each wait ends. The running one may end any moment now,
    // and the next newcomer would be first in line: a slot within a second.
    h.at(1.0);
    let told = Refusal::Forecast {
        waited: SEC,
        retry_after: 1,
        early: false,
    };
    assert_eq!(
        h.actions(),
        vec![
            Action::Refuse {
                id: a,
                reason: told
            },
            Action::Refuse {
                id: b,
                reason: told
            }
        ]
    );
}

#[test]
fn a_process_that_restarted_has_no_estimate_until_it_answers_again() {
    // spec: DEC-50
    let mut h = Harness::new(predicting(1, 0, 0), 2);
    warm(&mut h, 2, Lane::Normal, 3.0);
    h.s.set_process(P1, ProcessState::Down, h.now);
    h.s.set_process(P1, ProcessState::Ready, h.now);
    h.fill(2, Lane::Normal);
    let a = h.any(Lane::Normal);
    h.waits(a);
    h.at(1.0);
    assert_eq!(h.refused(a), Refusal::QueueTimeout { waited: SEC });
}

#[test]
fn a_cheap_request_is_not_refused_early_while_normal_ones_wait() {
    // spec: DEC-50, LANE-6 (the lane's reservation may lift without a slot freeing)
    let mut h = Harness::new(predicting(2, 1, 1), 1);
    warm(&mut h, 3, Lane::Fast, 3.0);
    warm(&mut h, 2, Lane::Normal, 3.0);
    h.fill(2, Lane::Normal);
    h.fill(1, Lane::Fast);
    // Nothing normal waits: every slot busy for 3 s more, the cheap one is refused at once.
    let cheap = h.any(Lane::Fast);
    assert_eq!(h.refused(cheap), early(3));
    // A heavy request for its cache-id's issuer waits (30 s): should it leave, the lane's
    // reservation lifts and a cheap one may get in with no slot freed. Not predicted: it waits.
    let own = h.submit(Target::Owner(P0), Lane::Normal);
    h.waits(own);
    let cheap = h.any(Lane::Fast);
    h.waits(cheap);
}

#[test]
fn a_request_for_its_cache_ids_issuer_is_never_refused_early() {
    // spec: DEC-50, QUEUE-6
    let mut h = Harness::new(predicting(1, 0, 0), 1);
    warm(&mut h, 1, Lane::Normal, 60.0);
    h.fill(1, Lane::Normal);
    let own = h.submit(Target::Owner(P0), Lane::Normal);
    h.waits(own);
}

#[test]
fn a_cooling_process_whose_cooldown_ends_within_the_wait_counts_as_room() {
    // spec: DEC-50, COOL-1
    let mut h = Harness::new(predicting(1, 0, 0), 2);
    warm(&mut h, 2, Lane::Normal, 3.0);
    let a = h.any(Lane::Normal);
    let b = h.any(Lane::Normal);
    h.actions();
    let on_p1 = if h.s.load(P1).in_flight == 1 && h.s.load(P0).in_flight == 1 {
        // Which went where: the least loaded rotates; ask the process of each by finishing
        // the one on P1 with a 503 (its memory guard): cooling for 2 s, its slot free.
        if h.s.load(P1).cooling {
            a
        } else {
            b
        }
    } else {
        panic!("one each")
    };
    h.finish(on_p1, Finish::Responded { status: 503 });
    let cooled = if h.s.load(P1).cooling { P1 } else { P0 };
    assert_eq!(h.s.load(cooled).in_flight, 0);
    // The other busy 3 s more, the cooling one free in 2 s: nothing within the wait.
    let c = h.any(Lane::Normal);
    assert_eq!(h.refused(c), early(2));
    h.at(1.5);
    let d = h.any(Lane::Normal);
    h.waits(d); // its cooldown ends 0.5 s from now: room in time
    h.at(0.5);
    assert_eq!(h.dispatched_to(d), cooled);
}

#[test]
fn under_a_hold_only_a_heavy_requests_end_lets_a_heavy_one_in() {
    // spec: DEC-50, DEC-29
    let mut h = Harness::new(predicting(16, 4, 4), 1);
    warm(&mut h, 1, Lane::Normal, 3.0);
    warm(&mut h, 1, Lane::Fast, 0.01);
    h.s.set_saturated(P0, Some(1), h.now);
    h.fill(1, Lane::Normal);
    h.fill(10, Lane::Fast);
    // Cheap ones end every 10 ms, but a held process lets a heavy one in only as one ends.
    let heavy = h.any(Lane::Normal);
    assert_eq!(h.refused(heavy), early(3));
}

/// A run in simulated time where every request takes exactly its process's time for its lane,
/// so the estimates are right from each one's first answer.
#[derive(Clone)]
struct Sim {
    s: Scheduler,
    base: Instant,
    t: Duration,
    took: Vec<[Duration; 2]>,
    lanes: HashMap<RequestId, Lane>,
    /// In flight: id, process, lane, when it ends.
    running: Vec<(RequestId, usize, Lane, Duration)>,
    outcome: HashMap<RequestId, Result<Duration, Refusal>>,
    next: u64,
}

fn lane_ix(l: Lane) -> usize {
    usize::from(l == Lane::Normal)
}

impl Sim {
    fn new(c: SchedulerConfig, took: Vec<[Duration; 2]>) -> Sim {
        let base = Instant::now();
        let procs: Vec<_> = (0..took.len())
            .map(|i| (ProcessId(i as u16), true))
            .collect();
        let mut s = Scheduler::new(c, &procs);
        for &(p, _) in &procs {
            s.set_process(p, ProcessState::Ready, base);
        }
        Sim {
            s,
            base,
            t: Duration::ZERO,
            took,
            lanes: HashMap::new(),
            running: Vec::new(),
            outcome: HashMap::new(),
            next: 0,
        }
    }

    fn drain(&mut self) {
        while let Some(a) = self.s.poll_action() {
            match a {
                Action::Dispatch { id, process } => {
                    let lane = self.lanes[&id];
                    let end = self.t + self.took[process.index()][lane_ix(lane)];
                    self.running.push((id, process.index(), lane, end));
                    self.outcome.insert(id, Ok(self.t));
                }
                Action::Refuse { id, reason } => {
                    self.outcome.insert(id, Err(reason));
                }
                Action::Fail { .. } => panic!("nothing fails here"),
            }
        }
    }

    /// Every end and timer up to `to`, in time order.
    fn run_to(&mut self, to: Duration) {
        loop {
            let end = self.running.iter().map(|r| r.3).min();
            let timer = self.s.poll_timeout().map(|at| at - self.base);
            let next = match (end, timer) {
                (Some(e), Some(t)) => e.min(t),
                (Some(e), None) => e,
                (None, Some(t)) => t,
                (None, None) => break,
            };
            if next > to {
                break;
            }
            self.t = next;
            if end == Some(next) {
                let i = self.running.iter().position(|r| r.3 == next).unwrap_or(0);
                let (id, ..) = self.running.swap_remove(i);
                self.s.finish(id, OK, self.base + next);
            } else {
                self.s.handle_timeout(self.base + next);
            }
            self.drain();
        }
        self.t = to;
    }

    fn submit(&mut self, lane: Lane, effective: Lane) -> RequestId {
        self.next += 1;
        let id = RequestId(self.next);
        self.lanes.insert(id, effective);
        let d = crate::proxy::route::TxDemand {
            target: Target::LeastLoaded,
            lane,
            counted: true,
        };
        self.s.submit(id, &d, self.base + self.t);
        self.drain();
        id
    }
}

fn run_config() -> impl Strategy<Value = SchedulerConfig> {
    (1u32..4, 0u32..3, 0u32..4, 1u64..3).prop_map(|(max, extra, min, q)| SchedulerConfig {
        queue: Duration::from_secs(q),
        predictive: true,
        ..cfg(max, extra, min.min(max))
    })
}

fn took() -> impl Strategy<Value = Vec<[Duration; 2]>> {
    prop::collection::vec((1u64..300, 50u64..2500), 1..4).prop_map(|v| {
        v.into_iter()
            .map(|(f, n)| [Duration::from_millis(f), Duration::from_millis(n)])
            .collect()
    })
}

fn arrivals() -> impl Strategy<Value = Vec<(u64, bool)>> {
    prop::collection::vec((0u64..400, any::<bool>()), 1..120)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn a_request_refused_early_could_not_have_been_admitted_in_time(
        c in run_config(),
        took in took(),
        arrivals in arrivals(),
    ) {
        // spec: DEC-50 (no false refusals when the estimates are right)
        let queue = c.queue;
        let extra = c.fast_lane_extra;
        let mut sim = Sim::new(c, took);
        for (gap, fast) in arrivals {
            sim.run_to(sim.t + Duration::from_millis(gap));
            let lane = if fast { Lane::Fast } else { Lane::Normal };
            let effective = if extra == 0 { Lane::Normal } else { lane };
            let before = sim.clone();
            let id = sim.submit(lane, effective);
            let Some(Err(Refusal::Forecast { early: true, waited, .. })) = sim.outcome.get(&id).copied() else {
                continue;
            };
            prop_assert_eq!(waited, queue);
            // The same moment with the spec's rule alone, and nothing more arriving (which could
            // only take slots first): the request gets no slot before its wait ends.
            let mut off = before;
            let mut plain = off.s.config().clone();
            plain.predictive = false;
            off.s.set_config(plain, off.base + off.t);
            off.drain();
            let again = off.submit(lane, effective);
            let deadline = off.t + queue;
            off.run_to(deadline + Duration::from_millis(1));
            prop_assert_eq!(
                off.outcome.get(&again).copied(),
                Some(Err(Refusal::QueueTimeout { waited: queue })),
                "refused early at {:?}, but would have been served", off.t
            );
        }
    }

    #[test]
    fn behind_slots_all_busy_longer_than_the_wait_a_heavy_request_is_refused_at_once(
        c in run_config(),
        took in took(),
        arrivals in arrivals(),
    ) {
        // spec: DEC-50 (what certainly cannot be admitted is refused at once)
        let queue = c.queue;
        let mut sim = Sim::new(c, took);
        for (gap, _) in arrivals {
            sim.run_to(sim.t + Duration::from_millis(gap));
            let all_long = !sim.running.is_empty()
                && sim.running.iter().all(|r| r.3 > sim.t + queue)
                && (0..sim.took.len()).all(|p| sim.took[p][1] > queue);
            let id = sim.submit(Lane::Normal, Lane::Normal);
            let o = sim.outcome.get(&id).copied();
            if all_long && warm_everywhere(&sim) && !matches!(o, Some(Ok(_))) {
                prop_assert!(
                    matches!(o, Some(Err(Refusal::Forecast { early: true, .. }))),
                    "waited instead: {:?}", o
                );
            }
        }
    }

    #[test]
    fn until_a_request_has_ended_predicting_changes_nothing(
        c in run_config(),
        took in took(),
        arrivals in arrivals(),
    ) {
        // spec: DEC-50 (cold start exactly as today)
        let mut plain = c.clone();
        plain.predictive = false;
        // Nothing ever ends within the run: no sample, on or off the same.
        let never: Vec<[Duration; 2]> = took.iter().map(|_| [Duration::from_secs(3600); 2]).collect();
        let (mut on, mut off) = (Sim::new(c, never.clone()), Sim::new(plain, never));
        for (gap, fast) in arrivals {
            let lane = if fast { Lane::Fast } else { Lane::Normal };
            for sim in [&mut on, &mut off] {
                sim.run_to(sim.t + Duration::from_millis(gap));
                sim.submit(lane, lane);
            }
        }
        on.run_to(on.t + Duration::from_secs(5));
        off.run_to(off.t + Duration::from_secs(5));
        prop_assert_eq!(on.outcome, off.outcome);
    }
}

/// Every process has an estimate for the normal lane (a normal request ended on it).
fn warm_everywhere(sim: &Sim) -> bool {
    (0..sim.took.len()).all(|p| sim.s.estimate(ProcessId(p as u16), Lane::Normal).is_some())
}

#[test]
fn four_slow_answers_do_not_get_eight_fast_requests_refused_that_would_be_served_in_time() {
    // spec: DEC-50 (a few outliers are bounded in what they do to the estimate)
    let mut h = Harness::new(predicting(2, 0, 0), 1);
    for _ in 0..5 {
        warm(&mut h, 2, Lane::Normal, 0.1);
    }
    // Four slow ones (3 s) in the same lane, answered.
    warm(&mut h, 2, Lane::Normal, 3.0);
    warm(&mut h, 2, Lane::Normal, 3.0);
    // Both slots busy with the usual 100 ms work, eight more arrive: 2 slots × 10 a second
    // serve them all well within queueSeconds (1 s).
    let mut running = h.fill(2, Lane::Normal);
    let line: Vec<_> = (0..8).map(|_| h.any(Lane::Normal)).collect();
    let refused: Vec<Action> = h.actions();
    assert!(refused.is_empty(), "refused at once: {refused:?}");
    let mut served = 0;
    while served < line.len() {
        assert!(h.now.elapsed() < Duration::from_secs(60), "stuck");
        h.at(0.1);
        for id in std::mem::take(&mut running) {
            h.finish(id, OK);
        }
        for a in h.actions() {
            match a {
                Action::Dispatch { id, .. } if line.contains(&id) => {
                    running.push(id);
                    served += 1;
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
