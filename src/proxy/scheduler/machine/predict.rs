//! `predictiveAdmission` (DEC-50) in the scheduler: the slots a waiting request could take, as
//! streams of expected frees (`forecast.rs`), from each process's measured service times and
//! how long each request in flight has run. A rule-4 request (`queueSeconds`) that cannot be
//! admitted in time is refused as it arrives, and the queue's `503`s carry a `Retry-After` from
//! the same forecast. Off, or before every process that could take the request has an estimate
//! for its lane (a cold start, a process just restarted), nothing changes: the request waits its
//! whole wait and its `503` says `Retry-After: 5`, as the spec's rule alone.
//!
//! What the forecast cannot see, it leaves out, and each can only make a slot come sooner than
//! forecast: a process becoming ready, a hold loosening (the saturation watch, DEC-29), a
//! reload raising the limits, a client leaving. They are taken as they stand (the hold is
//! itself the measure of what a saturated process can take), so one of them in the very
//! second after an early refusal can mean the queue would have admitted that request; "never
//! refused early when the estimates are right" is for a cluster that stays as it is.

use std::time::{Duration, Instant};

use super::super::forecast::{certainly_late, horizon, retry_after, slot, Slot, Stream};
use super::*;

/// A counted request in flight on a process, with when it was sent.
#[derive(Copy, Clone, Debug)]
pub(super) struct Running {
    pub id: RequestId,
    pub lane: Lane,
    /// `None` when dispatched before the shell gave any `now`.
    pub since: Option<Instant>,
}

impl Scheduler {
    /// A process's estimate for a lane (for tests: what it has measured).
    #[cfg(test)]
    pub(crate) fn estimate(&self, p: ProcessId, lane: Lane) -> Option<Duration> {
        self.procs.get(p.index())?.service[ix(lane)].get()
    }

    /// When a newcomer of `lane` that may wait `wait` in the shared queue can expect a slot.
    pub(super) fn forecast(&self, lane: Lane, wait: Duration, now: Instant) -> Slot {
        let Some(streams) = self.streams(lane, now) else {
            return Slot::Unknown;
        };
        let reqs = &self.requests;
        let ahead = self.shared[ix(lane)]
            .iter()
            .filter_map(|(seq, id)| match reqs.get(&id) {
                Some(Req::Waiting { seq: s, until, .. }) if *s == seq => {
                    Some(until.saturating_duration_since(now))
                }
                _ => None,
            });
        slot(&streams, ahead, horizon(wait))
    }

    /// The streams of frees that could admit a newcomer of `lane` waiting in the shared queue;
    /// `None` when nothing can be said.
    fn streams(&self, lane: Lane, now: Instant) -> Option<Vec<Stream>> {
        // A cheap request may also get in without a free: when the last normal request stops
        // waiting, the lane's reservation lifts (LANE-6). Not predicted.
        let normal_waits =
            self.shared[1].live() > 0 || self.procs.iter().any(|p| p.owned[1].live() > 0);
        if lane == Lane::Fast && normal_waits {
            return None;
        }
        // A normal request takes a slot only below the normal limit, and a cheap request's end
        // may free just a fast-lane slot (or be taken by a cheap one waiting): while cheap
        // requests run or wait, which end lets a normal one in is not known. Counting it would
        // give those ahead in the line a slot they may never get, and the newcomer a later one
        // than it gets (a false refusal the property test found), so nothing is forecast.
        // (Under a hold a cheap request's end is no free for a normal one, and is left out
        // below, so only the cheap requests of a process not held count here.)
        if lane == Lane::Normal {
            let cheap_waits =
                self.shared[0].live() > 0 || self.procs.iter().any(|p| p.owned[0].live() > 0);
            let cheap_runs = self.procs.iter().any(|p| {
                !self.limits.holds(p.slots, lane, p.held)
                    && p.running.iter().any(|r| r.lane != Lane::Normal)
            });
            if cheap_waits || cheap_runs {
                return None;
            }
        }
        let total = self.limits.slots()?;
        let mut streams = Vec::new();
        for (i, p) in self.procs.iter().enumerate() {
            if !self.is_ready(i) || !p.serves_tx {
                continue;
            }
            // When it may take a shared request: now, or when its cooldown ends.
            let opens = if self.steerable(i) {
                Duration::ZERO
            } else {
                p.cool.until()?.saturating_duration_since(now)
            };
            let period = p.service[ix(lane)].get()?;
            let held = self.limits.holds(p.slots, lane, p.held);
            for r in &p.running {
                if held && r.lane != Lane::Normal {
                    continue; // a cheap request's end lets no normal one past a hold
                }
                let left = match (p.service[ix(r.lane)].get(), r.since) {
                    (Some(e), Some(since)) => {
                        e.saturating_sub(now.saturating_duration_since(since))
                    }
                    // Not known: it may end at once.
                    _ => Duration::ZERO,
                };
                streams.push(Stream {
                    first: left.max(opens),
                    period,
                });
            }
            if !opens.is_zero() {
                // A cooling process's free slots each take one as its cooldown ends.
                let free = total.saturating_sub(p.slots.in_flight);
                streams.extend((0..free).map(|_| Stream {
                    first: opens,
                    period,
                }));
            }
        }
        Some(streams)
    }

    /// A rule-4 request about to wait `length` in the shared queue that cannot be admitted
    /// within it: its refusal, at once.
    pub(super) fn refused_early(
        &self,
        lane: Lane,
        at: Place,
        wait: Wait,
        length: Duration,
        now: Instant,
    ) -> Option<Refusal> {
        if !self.cfg.predictive || wait != Wait::Any || at != Place::Shared {
            return None;
        }
        let slot = self.forecast(lane, length, now);
        certainly_late(slot, length).then(|| Refusal::Forecast {
            waited: length,
            retry_after: retry_after(slot),
            early: true,
        })
    }

    /// The refusal of a request that waited its whole wait (`waited`): the spec's, or with
    /// `predictiveAdmission` and a forecast, the same with a `Retry-After` for a newcomer now.
    pub(super) fn queue_refusal(
        &self,
        lane: Lane,
        wait: Wait,
        waited: Duration,
        now: Instant,
    ) -> Refusal {
        if !self.cfg.predictive || wait != Wait::Any {
            return Refusal::QueueTimeout { waited };
        }
        match self.forecast(lane, self.cfg.queue, now) {
            Slot::Unknown => Refusal::QueueTimeout { waited },
            slot => Refusal::Forecast {
                waited,
                retry_after: retry_after(slot),
                early: false,
            },
        }
    }
}
