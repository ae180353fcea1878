//! The property tests' model of the scheduler (`proptests.rs`): what it may do with each event,
//! and the checks after every step: each request ends exactly once, no slot leaks, a dispatch
//! keeps the slot, lane and reservation rules, nothing goes to a process not ready or forbidden,
//! oldest first within a class, and no work is held back while a slot is free.

use super::*;

#[derive(Clone, Copy, Debug, PartialEq)]
enum St {
    Pending,
    InFlight(usize),
    /// `finish(NotSent)` given: a second dispatch or a `Fail` must follow in the same call.
    Retrying(usize),
    /// Sent once, handed back, and waiting for a slot as a newcomer (DEC-33): dispatched once
    /// more, refused, or cancelled.
    Again,
    Done,
}

struct Req {
    target: Target,
    lane: Lane,
    counted: bool,
    st: St,
    order: u64,
    dispatches: u32,
}

pub(super) struct Model {
    s: Scheduler,
    cfg: SchedulerConfig,
    now: Instant,
    ready: Vec<bool>,
    /// Saturated and held to this many normal requests (taken as 1 ..= `normalMinSlots`);
    /// only while ready.
    saturated: Vec<Option<u32>>,
    serves: Vec<bool>,
    in_flight: Vec<u32>,
    normal: Vec<u32>,
    reqs: HashMap<u64, Req>,
    next: u64,
    /// Per class, the submit order of the last request dispatched from it.
    last_in_class: HashMap<(u8, usize, Lane), u64>,
}

impl Model {
    /// `s` has every process in `serves` set ready at `now`.
    pub(super) fn new(
        s: Scheduler,
        cfg: SchedulerConfig,
        now: Instant,
        serves: Vec<bool>,
    ) -> Model {
        let n = serves.len();
        Model {
            s,
            cfg,
            now,
            ready: vec![true; n],
            saturated: vec![None; n],
            serves,
            in_flight: vec![0; n],
            normal: vec![0; n],
            reqs: HashMap::new(),
            next: 0,
            last_in_class: HashMap::new(),
        }
    }

    fn effective(&self, lane: Lane) -> Lane {
        if self.cfg.max_outstanding == 0 || self.cfg.fast_lane_extra == 0 {
            Lane::Normal
        } else {
            lane
        }
    }

    /// Oldest-first classes: shared rule-4 requests by lane, and each owner's own by lane.
    fn class(r: &Req) -> Option<(u8, usize, Lane)> {
        if !r.counted {
            return None;
        }
        match r.target {
            Target::LeastLoaded | Target::UnknownPrefix => Some((0, 0, r.lane)),
            Target::Owner(p) => Some((1, p.index(), r.lane)),
            Target::Affinity(_) => None,
        }
    }

    fn owner_normal_waiting(&self, p: usize) -> bool {
        self.reqs.values().any(|r| {
            r.st == St::Pending
                && r.counted
                && r.lane == Lane::Normal
                && r.target == Target::Owner(ProcessId(p as u16))
        })
    }

    /// The normal requests process `p` may run whatever else is in flight, and the lane's
    /// reservation for them: `normalMinSlots`, or a hold's fewer.
    fn floor(&self, p: usize, min: u32) -> (u32, bool) {
        match self.saturated[p] {
            Some(h) if min > 0 => (h.clamp(1, min), true),
            _ => (min, false),
        }
    }

    fn check_admission(&self, p: usize, lane: Lane) -> Result<(), String> {
        let c = &self.cfg;
        if c.max_outstanding == 0 {
            return Ok(());
        }
        let (max, total) = (c.max_outstanding, c.max_outstanding + c.fast_lane_extra);
        let min = c.normal_min_slots.min(max);
        let (f, n) = (self.in_flight[p], self.normal[p]);
        if f >= total {
            return Err(format!("process {p} full ({f}/{total}) yet dispatched to"));
        }
        let (held_min, held) = self.floor(p, min);
        match lane {
            Lane::Normal if held && n >= held_min => Err(format!(
                "normal sent to saturated {p} with {n} normal running (held to {held_min})"
            )),
            Lane::Normal if f >= max && n >= min => Err(format!(
                "normal past maxOutstanding {max} with {n} normal running (min {min})"
            )),
            Lane::Fast
                if self.owner_normal_waiting(p) && f + 1 + held_min.saturating_sub(n) > total =>
            {
                Err(format!(
                    "cheap request broke the reservation on {p}: {f} in flight, {n} normal"
                ))
            }
            _ => Ok(()),
        }
    }

    fn apply_actions(&mut self) -> Result<(), String> {
        while let Some(a) = self.s.poll_action() {
            let id = match a {
                Action::Dispatch { id, .. }
                | Action::Refuse { id, .. }
                | Action::Fail { id, .. } => id,
            };
            let st = self
                .reqs
                .get(&id.0)
                .map(|r| r.st)
                .ok_or("action for an unknown id")?;
            match a {
                Action::Dispatch { process, .. } => {
                    let p = process.index();
                    let r = &self.reqs[&id.0];
                    match st {
                        St::Pending => {}
                        St::Retrying(q) if q != p => {}
                        // Waiting as a newcomer, its own slot on the process it left freed:
                        // that process may take it back (it is still ready).
                        St::Retrying(_) | St::Again
                            if r.dispatches == 1 && !matches!(r.target, Target::Owner(_)) => {}
                        other => return Err(format!("dispatch of {id:?} in state {other:?}")),
                    }
                    if !self.ready.get(p).copied().unwrap_or(false) {
                        return Err(format!("{id:?} dispatched to {p}, not ready"));
                    }
                    let allowed = match r.target {
                        Target::Owner(o) => o.index() == p,
                        Target::Affinity(o) => o.index() == p || self.serves[p],
                        Target::LeastLoaded | Target::UnknownPrefix => self.serves[p],
                    };
                    if !allowed {
                        return Err(format!("{id:?} ({:?}) dispatched to {p}", r.target));
                    }
                    let (lane, counted, order) = (r.lane, r.counted, r.order);
                    if counted {
                        self.check_admission(p, lane)?;
                        self.in_flight[p] += 1;
                        if lane == Lane::Normal {
                            self.normal[p] += 1;
                        }
                    }
                    if st == St::Pending {
                        if let Some(c) = Model::class(&self.reqs[&id.0]) {
                            let last = self.last_in_class.entry(c).or_insert(0);
                            if order < *last {
                                return Err(format!("{id:?} overtaken in its class {c:?}"));
                            }
                            *last = order;
                        }
                    }
                    let r = self.reqs.get_mut(&id.0).ok_or("gone")?;
                    r.st = St::InFlight(p);
                    r.dispatches += 1;
                }
                // A request handed back may be refused as a newcomer would be (no wait, or a
                // forecast) in the same call.
                Action::Refuse { .. }
                    if matches!(st, St::Pending | St::Again | St::Retrying(_)) =>
                {
                    self.reqs.get_mut(&id.0).ok_or("gone")?.st = St::Done;
                }
                Action::Fail { process, .. } if st == St::Retrying(process.index()) => {
                    self.reqs.get_mut(&id.0).ok_or("gone")?.st = St::Done;
                }
                other => return Err(format!("{other:?} for a request in state {st:?}")),
            }
        }
        // Not dispatched nor failed at once: it waits, which only a request sent once that any
        // process may take does.
        for (id, r) in self.reqs.iter_mut() {
            if let St::Retrying(_) = r.st {
                if r.dispatches != 1 || matches!(r.target, Target::Owner(_)) {
                    return Err(format!(
                        "request {id} not sent got neither a retry nor a Fail"
                    ));
                }
                r.st = St::Again;
            }
        }
        for p in 0..self.ready.len() {
            let l = self.s.load(ProcessId(p as u16));
            if l.in_flight != self.in_flight[p] || l.normal_running != self.normal[p] {
                return Err(format!(
                    "process {p}: scheduler {l:?}, model {} / {}",
                    self.in_flight[p], self.normal[p]
                ));
            }
        }
        self.check_work_conserving()
    }

    /// No request waits while a process it may use has room for it.
    fn check_work_conserving(&self) -> Result<(), String> {
        let c = &self.cfg;
        if c.max_outstanding == 0 {
            return match self
                .reqs
                .iter()
                .find(|(_, r)| r.st == St::Pending && r.counted)
            {
                Some((id, _)) => Err(format!("request {id} waits with no limit")),
                None => Ok(()),
            };
        }
        let (max, total) = (c.max_outstanding, c.max_outstanding + c.fast_lane_extra);
        let min = c.normal_min_slots.min(max);
        let n = self.ready.len();
        let cooling: Vec<bool> = (0..n)
            .map(|p| self.s.load(ProcessId(p as u16)).cooling)
            .collect();
        let all_cooling = !(0..n).any(|p| self.ready[p] && self.serves[p] && !cooling[p]);
        let eligible = |p: usize| self.ready[p] && self.serves[p] && (!cooling[p] || all_cooling);
        let normal_pending = self.reqs.values().any(|r| {
            matches!(r.st, St::Pending | St::Again) && r.counted && r.lane == Lane::Normal
        });
        let room = |p: usize, lane: Lane| {
            let (f, k) = (self.in_flight[p], self.normal[p]);
            let (held_min, held) = self.floor(p, min);
            match lane {
                Lane::Normal if held => f < total && k < held_min,
                Lane::Normal => f < max || (f < total && k < min),
                Lane::Fast => !normal_pending && f < total,
            }
        };
        for (id, r) in &self.reqs {
            if !matches!(r.st, St::Pending | St::Again) || !r.counted {
                continue;
            }
            let free = match r.target {
                _ if r.st == St::Again => (0..n).any(|p| eligible(p) && room(p, r.lane)),
                Target::Owner(o) => self.ready[o.index()] && room(o.index(), r.lane),
                Target::LeastLoaded | Target::UnknownPrefix => {
                    (0..n).any(|p| eligible(p) && room(p, r.lane))
                }
                Target::Affinity(_) => false,
            };
            if free {
                return Err(format!(
                    "request {id} ({:?}, {:?}) waits while there is room",
                    r.target, r.lane
                ));
            }
        }
        Ok(())
    }

    /// The event's `pick` among the requests in a matching state, in submit order (ids are
    /// given in order), so a run replays the same; None when there is none.
    fn pick(&self, pick: usize, wanted: impl Fn(&St) -> bool) -> Option<u64> {
        let mut live: Vec<u64> = self
            .reqs
            .iter()
            .filter(|(_, r)| wanted(&r.st))
            .map(|(k, _)| *k)
            .collect();
        live.sort();
        (!live.is_empty()).then(|| live[pick % live.len()])
    }

    fn release(&mut self, id: u64) {
        if let Some(r) = self.reqs.get(&id) {
            if let (St::InFlight(p), true) = (r.st, r.counted) {
                self.in_flight[p] -= 1;
                if r.lane == Lane::Normal {
                    self.normal[p] -= 1;
                }
            }
        }
    }

    pub(super) fn step(&mut self, e: &Event) -> Result<(), String> {
        let n = self.ready.len();
        match e {
            Event::Submit {
                kind,
                p,
                fast,
                counted,
            } => {
                let p = ProcessId(*p);
                let target = match kind {
                    0 => Target::LeastLoaded,
                    1 => Target::Owner(p),
                    2 => Target::UnknownPrefix,
                    _ => Target::Affinity(p),
                };
                let lane = if *fast { Lane::Fast } else { Lane::Normal };
                self.next += 1;
                let id = self.next;
                let eff = self.effective(lane);
                self.reqs.insert(
                    id,
                    Req {
                        target,
                        lane: eff,
                        counted: *counted,
                        st: St::Pending,
                        order: id,
                        dispatches: 0,
                    },
                );
                self.s.submit(
                    RequestId(id),
                    &TxDemand {
                        target,
                        lane,
                        counted: *counted,
                    },
                    self.now,
                );
            }
            Event::Finish { pick, outcome } => {
                let Some(id) = self.pick(*pick, |st| matches!(st, St::InFlight(_))) else {
                    return Ok(());
                };
                let outcome = match outcome {
                    0 | 1 => Finish::Responded { status: 200 },
                    2 => Finish::Responded { status: 503 },
                    3 => Finish::TimedOut,
                    4 => Finish::NotSent,
                    _ => Finish::Failed,
                };
                let St::InFlight(p) = self.reqs[&id].st else {
                    return Ok(());
                };
                self.release(id);
                let r = self.reqs.get_mut(&id).ok_or("gone")?;
                r.st = if outcome == Finish::NotSent {
                    St::Retrying(p)
                } else {
                    St::Done
                };
                self.s.finish(RequestId(id), outcome, self.now);
            }
            Event::Cancel { pick } => {
                let Some(id) = self.pick(*pick, |st| {
                    matches!(st, St::InFlight(_) | St::Pending | St::Again)
                }) else {
                    return Ok(());
                };
                self.release(id);
                self.reqs.get_mut(&id).ok_or("gone")?.st = St::Done;
                self.s.cancel(RequestId(id), self.now);
            }
            Event::SetProcess { p, state } => {
                let i = usize::from(*p) % n;
                let state = [
                    ProcessState::Down,
                    ProcessState::Ready,
                    ProcessState::Draining,
                ][usize::from(*state)];
                self.ready[i] = state == ProcessState::Ready;
                self.saturated[i] = self.saturated[i].filter(|_| self.ready[i]);
                self.s.set_process(ProcessId(i as u16), state, self.now);
            }
            Event::SetSaturated { p, held } => {
                let i = usize::from(*p) % n;
                self.saturated[i] = held.filter(|_| self.ready[i]);
                self.s.set_saturated(ProcessId(i as u16), *held, self.now);
            }
            Event::Advance { millis } => {
                self.now += Duration::from_millis(*millis);
                if let Some(t) = self.s.poll_timeout() {
                    if t < self.now - Duration::from_millis(*millis) {
                        return Err("poll_timeout in the past".into());
                    }
                }
                self.s.handle_timeout(self.now);
            }
            Event::Reload { cfg } => {
                self.cfg = cfg.clone();
                self.s.set_config(cfg.clone(), self.now);
            }
        }
        self.apply_actions()
    }

    /// Ends everything: finish what is in flight, let every wait run out.
    pub(super) fn drain(&mut self) -> Result<(), String> {
        for _ in 0..200 {
            let live: Vec<u64> = self
                .reqs
                .iter()
                .filter(|(_, r)| matches!(r.st, St::InFlight(_)))
                .map(|(k, _)| *k)
                .collect();
            for id in live {
                self.release(id);
                self.reqs.get_mut(&id).ok_or("gone")?.st = St::Done;
                self.s
                    .finish(RequestId(id), Finish::Responded { status: 200 }, self.now);
                self.apply_actions()?;
            }
            self.now += Duration::from_secs(31);
            self.s.handle_timeout(self.now);
            self.apply_actions()?;
            if self.reqs.values().all(|r| r.st == St::Done) {
                break;
            }
        }
        if let Some((id, r)) = self.reqs.iter().find(|(_, r)| r.st != St::Done) {
            return Err(format!("request {id} never ended: {:?}", r.st));
        }
        if let Some((id, _)) = self.reqs.iter().find(|(_, r)| r.dispatches > 2) {
            return Err(format!("request {id} dispatched more than twice"));
        }
        if self.s.queued() != 0 {
            return Err(format!("{} still queued", self.s.queued()));
        }
        for p in 0..self.ready.len() {
            let l = self.s.load(ProcessId(p as u16));
            if l.in_flight != 0 || l.normal_running != 0 {
                return Err(format!("slot leak on {p}: {l:?}"));
            }
        }
        Ok(())
    }
}
