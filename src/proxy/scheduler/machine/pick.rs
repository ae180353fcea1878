//! Admission and selection: which ready process may take a request now (slots, lane,
//! cooldown), the least loaded of those, and which waiting request a process takes when it has
//! room (`pump`). Part of the scheduler's state machine (`machine.rs`).

use std::time::{Duration, Instant};

use super::*;
use crate::deadline::Later;

impl Scheduler {
    pub(super) fn is_ready(&self, i: usize) -> bool {
        self.procs
            .get(i)
            .is_some_and(|p| p.present && p.state == Some(ProcessState::Ready))
    }

    /// Not in cooldown, or every ready tx process is (COOL-3).
    pub(super) fn steerable(&self, i: usize) -> bool {
        !self.procs[i].cool.cooling() || self.open == 0
    }

    /// May take requests from the shared queues and rule 4.
    pub(super) fn eligible(&self, i: usize) -> bool {
        self.is_ready(i) && self.procs[i].serves_tx && self.steerable(i)
    }

    pub(super) fn normal_waiting_for(&self, i: usize) -> bool {
        self.procs[i].owned[1].live() > 0 || (self.shared[1].live() > 0 && self.eligible(i))
    }

    pub(super) fn admits(&self, i: usize, lane: Lane) -> bool {
        let p = &self.procs[i];
        self.limits
            .admits(p.slots, lane, self.normal_waiting_for(i), p.held)
    }

    /// The least loaded eligible process that admits `lane` (any, for an uncounted request),
    /// scanning from the cursor so ties rotate.
    pub(super) fn pick(&mut self, lane: Lane, exclude: Option<usize>, counted: bool) -> Pick {
        let n = self.procs.len();
        // Without the excluded one, are all the others cooling? Then cooldowns don't count.
        let excluded_open = exclude.is_some_and(|e| {
            self.is_ready(e) && self.procs[e].serves_tx && !self.procs[e].cool.cooling()
        });
        let ignore_cooling = self.open == usize::from(excluded_open);
        let mut best: Option<(u32, usize)> = None;
        let mut any = false;
        for k in 0..n {
            let i = (self.cursor + k) % n;
            let p = &self.procs[i];
            if Some(i) == exclude
                || !self.is_ready(i)
                || !p.serves_tx
                || (p.cool.cooling() && !ignore_cooling)
            {
                continue;
            }
            any = true;
            if counted && !self.admits(i, lane) {
                continue;
            }
            if best.is_none_or(|(load, _)| p.slots.in_flight < load) {
                best = Some((p.slots.in_flight, i));
            }
        }
        match best {
            Some((_, i)) => {
                self.cursor = (i + 1) % n.max(1);
                Pick::Got(i)
            }
            None if any => Pick::Full,
            None => Pick::NoneReady,
        }
    }

    pub(super) fn any(
        &mut self,
        id: RequestId,
        lane: Lane,
        counted: bool,
        wait: Wait,
        now: Instant,
    ) {
        match self.pick(lane, None, counted) {
            Pick::Got(i) => self.dispatch(id, i, lane, counted, true, false),
            Pick::Full => self.wait(id, lane, Place::Shared, wait, now),
            Pick::NoneReady => self.refuse(id, Refusal::NoProcessReady),
        }
    }

    pub(super) fn wait(&mut self, id: RequestId, lane: Lane, at: Place, wait: Wait, now: Instant) {
        self.wait_as(id, lane, at, wait, now, false);
    }

    /// A request sent once and handed back unsent, with no other process free: it waits in
    /// its lane's shared queue as a newcomer would (DEC-33).
    pub(super) fn wait_retried(&mut self, id: RequestId, lane: Lane, now: Instant) {
        self.wait_as(id, lane, Place::Shared, Wait::Any, now, true);
    }

    fn wait_as(
        &mut self,
        id: RequestId,
        lane: Lane,
        at: Place,
        wait: Wait,
        now: Instant,
        retried: bool,
    ) {
        if self.stopping {
            return self.refuse(id, Refusal::Stopping);
        }
        let length = self.wait_length(wait);
        if length.is_zero() {
            let reason = self.queue_refusal(lane, wait, length, now);
            return self.refuse(id, reason);
        }
        if let Some(reason) = self.refused_early(lane, at, wait, length, now) {
            return self.refuse(id, reason);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queue_mut(at, lane).push(seq, id);
        let until = now.later(length);
        self.requests.insert(
            id,
            Req::Waiting {
                seq,
                lane,
                at,
                wait,
                until,
                retried,
            },
        );
        let kind = match wait {
            Wait::Any => WaitKind::Queue,
            Wait::Unknown | Wait::Owner | Wait::Affinity => WaitKind::Owner,
        };
        self.timers.push_wait(kind, until, seq, id);
    }

    pub(super) fn dispatch(
        &mut self,
        id: RequestId,
        i: usize,
        lane: Lane,
        counted: bool,
        flexible: bool,
        retried: bool,
    ) {
        self.requests.insert(
            id,
            Req::InFlight {
                process: i,
                lane,
                counted,
                flexible,
                retried,
            },
        );
        self.sent(id, i, lane, counted);
    }

    /// The rest of a dispatch, once the request's entry says it is in flight: its slot taken,
    /// the shell told.
    fn sent(&mut self, id: RequestId, i: usize, lane: Lane, counted: bool) {
        if counted {
            self.procs[i].slots.take(lane);
            let since = self.clock;
            self.procs[i].running.push(Running { id, lane, since });
        }
        self.actions.push_back(Action::Dispatch {
            id,
            process: ProcessId(i as u16),
        });
    }

    /// How long a request waits for a slot: `queueSeconds`, or `ownerQueueSeconds` for one
    /// that names a process.
    pub(super) fn wait_length(&self, wait: Wait) -> Duration {
        match wait {
            Wait::Any => self.cfg.queue,
            Wait::Unknown | Wait::Owner | Wait::Affinity => self.cfg.owner_queue,
        }
    }

    pub(super) fn refuse(&mut self, id: RequestId, reason: Refusal) {
        self.actions.push_back(Action::Refuse { id, reason });
    }

    /// A dispatched request's slot frees: when it was sent, if it was counted.
    pub(super) fn free(
        &mut self,
        i: usize,
        id: RequestId,
        lane: Lane,
        counted: bool,
    ) -> Option<Instant> {
        if !counted {
            return None;
        }
        let p = self.procs.get_mut(i)?;
        p.slots.free(lane);
        self.dirty.push(i);
        let at = p.running.iter().position(|r| r.id == id)?;
        p.running.swap_remove(at).since
    }

    pub(super) fn queue_mut(&mut self, at: Place, lane: Lane) -> &mut WaitQueue {
        match at {
            Place::Shared => &mut self.shared[ix(lane)],
            Place::Owned(i) => &mut self.procs[i].owned[ix(lane)],
        }
    }

    /// A live waiting entry left its queue without being popped. When the last normal waiter
    /// goes, the lane's reservation lifts, so the processes it held back are pumped.
    pub(super) fn forget(&mut self, at: Place, lane: Lane) {
        let q = self.queue_mut(at, lane);
        q.forget_one();
        if lane == Lane::Normal && q.live() == 0 {
            match at {
                Place::Shared => self.dirty_all = true,
                Place::Owned(i) => self.dirty.push(i),
            }
        }
    }

    /// Gives process `i` the oldest waiting requests it may take: fast first (LANE-3), oldest
    /// first within a lane (QUEUE-3).
    pub(super) fn pump(&mut self, i: usize) {
        if !self.is_ready(i) || !self.any_waiting_for(i) {
            return;
        }
        loop {
            let mut took = false;
            for lane in LANES {
                // Counts first: whether any of the lane waits for it, and the room; finding the
                // oldest looks requests up (and a process that has just taken one is nearly
                // always full).
                if !self.lane_waiting_for(i, lane) || !self.admits(i, lane) {
                    continue;
                }
                let Some(id) = self.take_oldest(i, lane) else {
                    continue;
                };
                self.sent(id, i, lane, true);
                took = true;
                break;
            }
            if !took {
                return;
            }
        }
    }

    /// Whether any request waits that process `i` might take: nearly always none (a slot frees
    /// as each answer ends, with nobody queued), and then `pump` has nothing to look at. (A
    /// queue with no live entry holds no dead ones either: `WaitQueue` drops them as the last
    /// live one goes.)
    fn any_waiting_for(&self, i: usize) -> bool {
        let own = &self.procs[i].owned;
        own[0].live() > 0
            || own[1].live() > 0
            || (self.procs[i].serves_tx && (self.shared[0].live() > 0 || self.shared[1].live() > 0))
    }

    /// Takes the oldest request of `lane` that process `i` may take out of its queue, its
    /// entry now in flight on `i`. With none of its own waiting (nearly always), only the
    /// shared queue's head can be it: looked up once, to see it still waits and to turn it
    /// into the one in flight, instead of once by `oldest_for` and again to take it.
    fn take_oldest(&mut self, i: usize, lane: Lane) -> Option<RequestId> {
        let from = if self.procs[i].owned[ix(lane)].live() == 0 {
            let shared_ok =
                self.procs[i].serves_tx && (!self.procs[i].cool.cooling() || self.open == 0);
            shared_ok.then_some(Place::Shared)?
        } else {
            self.oldest_for(i, lane)?
        };
        let q = match from {
            Place::Shared => &mut self.shared[ix(lane)],
            Place::Owned(o) => &mut self.procs[o].owned[ix(lane)],
        };
        loop {
            let (seq, id) = q.head(|_, _| true)?;
            let waiting = self
                .requests
                .get_mut(&id)
                .filter(|r| matches!(r, Req::Waiting { seq: s, .. } if *s == seq));
            let Some(req) = waiting else {
                // Dispatched, refused or cancelled meanwhile: dropped, as `head` drops it.
                q.pop_dead_head();
                continue;
            };
            let (flexible, retried) = match req {
                Req::Waiting { wait, retried, .. } => (*wait != Wait::Owner, *retried),
                Req::InFlight { .. } => (false, false),
            };
            *req = Req::InFlight {
                process: i,
                lane,
                counted: true,
                flexible,
                retried,
            };
            q.pop_head();
            if lane == Lane::Normal && q.live() == 0 && from == Place::Shared {
                self.dirty_all = true;
            }
            return Some(id);
        }
    }

    /// Whether any request of `lane` waits that process `i` might take (by the live counts,
    /// as `any_waiting_for`): else `oldest_for` finds none.
    fn lane_waiting_for(&self, i: usize, lane: Lane) -> bool {
        self.procs[i].owned[ix(lane)].live() > 0
            || (self.procs[i].serves_tx && self.shared[ix(lane)].live() > 0)
    }

    /// Which queue holds the oldest request of `lane` that process `i` may take, cleaning
    /// dead heads on the way.
    pub(super) fn oldest_for(&mut self, i: usize, lane: Lane) -> Option<Place> {
        let reqs = &self.requests;
        let own = self.procs[i].owned[ix(lane)].head(|s, id| is_waiting(reqs, s, id));
        let shared_ok =
            self.procs[i].serves_tx && (!self.procs[i].cool.cooling() || self.open == 0);
        let shared = if shared_ok {
            self.shared[ix(lane)].head(|s, id| is_waiting(reqs, s, id))
        } else {
            None
        };
        match (own, shared) {
            (Some((a, _)), Some((b, _))) if b < a => Some(Place::Shared),
            (Some(_), _) => Some(Place::Owned(i)),
            (None, Some(_)) => Some(Place::Shared),
            (None, None) => None,
        }
    }
}
