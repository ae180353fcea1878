//! A process's slots and the fast lane (LANE-1..6, LANE-15, QUEUE-1, CONF-12, CONF-20..22).
//!
//! A process has `maxOutstanding` + `fastLaneExtra` slots. A cheap request may take any free
//! one, except that while normal requests wait for the process it leaves enough free for
//! `normalMinSlots` normal ones to run. A normal request may take one while fewer than
//! `maxOutstanding` are in flight, or any free one while fewer than `normalMinSlots` normal ones
//! run. `maxOutstanding` 0: no limit at all.
//!
//! Beyond the spec: while a process is *saturated* (its event loop wants the CPU all the time,
//! see `proxy::saturation`), it is *held*: a normal request takes a slot only while fewer than
//! the hold's limit run (at least 1, at most `normalMinSlots`; the meter adapts it). A loop that
//! is already busy all the time answers heavy work no sooner for having more of it at once;
//! each one more only adds a turn that every cheap request waits behind. The lane's own rule is
//! unchanged.

use super::config::SchedulerConfig;
use crate::proxy::lane::Lane;

/// The admission rule, from the config.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// 0: no limit.
    max: u64,
    extra: u64,
    min_normal: u64,
}

/// What a process has in flight (counted requests only).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Slots {
    pub in_flight: u32,
    pub normal_running: u32,
}

impl Limits {
    pub fn new(cfg: &SchedulerConfig) -> Limits {
        let max = u64::from(cfg.max_outstanding);
        Limits {
            max,
            extra: u64::from(cfg.fast_lane_extra),
            min_normal: u64::from(cfg.normal_min_slots).min(max),
        }
    }

    /// Slots per process; `None`: no limit.
    pub fn slots(&self) -> Option<u32> {
        (self.max > 0).then(|| u32::try_from(self.max + self.extra).unwrap_or(u32::MAX))
    }

    /// The lane a request really uses: with no fast lane (or no limit) every request is normal.
    pub fn effective(&self, lane: Lane) -> Lane {
        if self.extra == 0 || self.max == 0 {
            Lane::Normal
        } else {
            lane
        }
    }

    /// Whether a process with `s` in flight may take one more request of `lane` (already
    /// effective). `normal_waiting`: normal requests are waiting that this process could take.
    /// `held`: the process's event loop is saturated and normal requests are held to this many
    /// (taken as at least 1 and at most `normalMinSlots`; with `normalMinSlots` 0 it changes
    /// nothing).
    pub fn admits(&self, s: Slots, lane: Lane, normal_waiting: bool, held: Option<u32>) -> bool {
        if self.max == 0 {
            return true;
        }
        let total = self.max + self.extra;
        let in_flight = u64::from(s.in_flight);
        let normal = u64::from(s.normal_running);
        if in_flight >= total {
            return false;
        }
        // What the lane leaves room for: `normalMinSlots`, or a hold's fewer (more would
        // reserve slots no normal request may take).
        let held = held
            .filter(|_| self.min_normal > 0)
            .map(|n| u64::from(n).clamp(1, self.min_normal));
        let min_normal = held.unwrap_or(self.min_normal);
        match lane {
            Lane::Normal if held.is_some() => normal < min_normal,
            Lane::Normal => in_flight < self.max || normal < min_normal,
            Lane::Fast => {
                let reserve = if normal_waiting {
                    min_normal.saturating_sub(normal)
                } else {
                    0
                };
                in_flight + 1 + reserve <= total
            }
        }
    }
}

impl Limits {
    /// Whether a hold is what keeps a normal request off a process with `s` in flight: then
    /// only a normal request's end lets one in.
    pub fn holds(&self, s: Slots, lane: Lane, held: Option<u32>) -> bool {
        lane == Lane::Normal
            && self.max > 0
            && self.min_normal > 0
            && held.is_some_and(|n| {
                u64::from(s.normal_running) >= u64::from(n).clamp(1, self.min_normal)
            })
    }
}

impl Slots {
    pub fn take(&mut self, lane: Lane) {
        self.in_flight += 1;
        if lane == Lane::Normal {
            self.normal_running += 1;
        }
    }

    pub fn free(&mut self, lane: Lane) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if lane == Lane::Normal {
            self.normal_running = self.normal_running.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max: u32, extra: u32, min: u32) -> Limits {
        Limits::new(&SchedulerConfig {
            max_outstanding: max,
            fast_lane_extra: extra,
            normal_min_slots: min,
            ..SchedulerConfig::default()
        })
    }

    fn s(in_flight: u32, normal_running: u32) -> Slots {
        Slots {
            in_flight,
            normal_running,
        }
    }

    #[test]
    fn a_process_has_max_plus_extra_slots_and_cheap_may_use_any() {
        // spec: LANE-1, LANE-2, LANE-15
        let l = limits(16, 4, 4);
        assert_eq!(l.slots(), Some(20));
        assert!(l.admits(s(19, 16), Lane::Fast, false, None));
        assert!(!l.admits(s(20, 16), Lane::Fast, false, None));
        assert!(!l.admits(s(20, 0), Lane::Fast, false, None));
    }

    #[test]
    fn normal_uses_up_to_max_or_more_while_few_normal_run() {
        // spec: LANE-4, LANE-5, QUEUE-1 (the saturation hold off: `held` None, DEC-29)
        let l = limits(16, 4, 4);
        assert!(l.admits(s(15, 15), Lane::Normal, true, None));
        assert!(!l.admits(s(16, 16), Lane::Normal, true, None));
        assert!(!l.admits(s(16, 4), Lane::Normal, true, None));
        assert!(l.admits(s(16, 3), Lane::Normal, true, None));
        assert!(l.admits(s(19, 0), Lane::Normal, true, None));
        assert!(!l.admits(s(20, 0), Lane::Normal, true, None));
    }

    #[test]
    fn cheap_requests_leave_room_for_min_normal_while_normal_wait() {
        // spec: LANE-6 (the saturation hold off: `held` None, DEC-29)
        let l = limits(16, 4, 4);
        // 2 normal running: 2 more must stay free while normal requests wait
        assert!(l.admits(s(17, 2), Lane::Fast, true, None));
        assert!(!l.admits(s(18, 2), Lane::Fast, true, None));
        assert!(l.admits(s(18, 2), Lane::Fast, false, None));
        // 4 normal running: no reservation left to keep
        assert!(l.admits(s(19, 4), Lane::Fast, true, None));
        // whenever cheap is held back for the reservation, a normal one may go
        for in_flight in 0..20 {
            for normal in 0..=in_flight {
                if !l.admits(s(in_flight, normal), Lane::Fast, true, None) {
                    assert!(l.admits(s(in_flight, normal), Lane::Normal, true, None));
                }
            }
        }
    }

    #[test]
    fn zero_settings_mean_what_the_spec_says() {
        // spec: CONF-12, CONF-20, CONF-21, CONF-22
        let none = limits(0, 4, 4);
        assert_eq!(none.slots(), None);
        assert!(none.admits(s(100_000, 100_000), Lane::Normal, true, None));
        let no_lane = limits(16, 0, 4);
        assert_eq!(no_lane.effective(Lane::Fast), Lane::Normal);
        assert_eq!(no_lane.slots(), Some(16));
        assert!(!no_lane.admits(s(16, 0), Lane::Normal, true, None));
        let no_min = limits(16, 4, 0);
        assert!(!no_min.admits(s(16, 0), Lane::Normal, true, None));
        assert!(no_min.admits(s(19, 0), Lane::Fast, true, None));
        let clamped = limits(2, 4, 10);
        assert!(clamped.admits(s(5, 1), Lane::Normal, true, None));
        assert!(!clamped.admits(s(5, 2), Lane::Normal, true, None));
    }

    #[test]
    fn a_saturated_process_takes_normal_requests_only_up_to_min_normal() {
        // spec: DEC-29 (the hold; the lane's rule is the same either way)
        let l = limits(16, 4, 4);
        assert!(l.admits(s(10, 3), Lane::Normal, true, Some(4)));
        assert!(!l.admits(s(4, 4), Lane::Normal, true, Some(4)));
        assert!(!l.admits(s(4, 4), Lane::Normal, false, Some(4)));
        assert!(l.admits(s(4, 4), Lane::Normal, true, None));
        assert!(!l.admits(s(20, 3), Lane::Normal, true, Some(4)));
        for in_flight in 0..22 {
            for normal in 0..=in_flight {
                let at = s(in_flight, normal);
                for waiting in [false, true] {
                    assert_eq!(
                        l.admits(at, Lane::Fast, waiting, Some(4)),
                        l.admits(at, Lane::Fast, waiting, None)
                    );
                    // Saturation only ever takes admissions away.
                    if l.admits(at, Lane::Normal, waiting, Some(4)) {
                        assert!(l.admits(at, Lane::Normal, waiting, None));
                    }
                }
            }
        }
        // With no minimum, saturation changes nothing; with no limit, nothing is held.
        let no_min = limits(16, 4, 0);
        assert!(no_min.admits(s(15, 15), Lane::Normal, true, Some(4)));
        assert!(limits(0, 4, 4).admits(s(100, 100), Lane::Normal, true, Some(4)));
    }

    #[test]
    fn a_hold_below_min_normal_admits_that_many_and_the_lane_reserves_no_more() {
        // spec: DEC-29 (the adaptive hold: 1 ..= normalMinSlots, whatever the meter says)
        let l = limits(16, 4, 4);
        assert!(l.admits(s(0, 0), Lane::Normal, true, Some(1)));
        assert!(!l.admits(s(1, 1), Lane::Normal, true, Some(1)));
        assert!(l.admits(s(9, 1), Lane::Normal, true, Some(2)));
        assert!(!l.admits(s(2, 2), Lane::Normal, true, Some(2)));
        // 0 is taken as 1 (a held process still does heavy work), more than the minimum as it
        assert!(l.admits(s(0, 0), Lane::Normal, true, Some(0)));
        assert!(!l.admits(s(1, 1), Lane::Normal, true, Some(0)));
        assert!(!l.admits(s(4, 4), Lane::Normal, true, Some(9)));
        // held to 1 with one running, the lane may use every other slot while heavy ones wait
        assert!(l.admits(s(19, 1), Lane::Fast, true, Some(1)));
        // held to 2 with one running, it leaves one free
        assert!(!l.admits(s(19, 1), Lane::Fast, true, Some(2)));
        assert!(l.admits(s(18, 1), Lane::Fast, true, Some(2)));
        for hold in 0..6 {
            for in_flight in 0..22 {
                for normal in 0..=in_flight {
                    let at = s(in_flight, normal);
                    for waiting in [false, true] {
                        // A lower hold only ever takes heavy admissions away, and a hold never
                        // takes a slot from the lane.
                        if l.admits(at, Lane::Normal, waiting, Some(hold)) {
                            assert!(l.admits(at, Lane::Normal, waiting, Some(hold + 1)));
                            assert!(l.admits(at, Lane::Normal, waiting, None));
                        }
                        if l.admits(at, Lane::Fast, waiting, None) {
                            assert!(l.admits(at, Lane::Fast, waiting, Some(hold)));
                        }
                        // whenever cheap is held back for the reservation, a normal one may go
                        if !l.admits(at, Lane::Fast, true, Some(hold)) && in_flight < 20 {
                            assert!(l.admits(at, Lane::Normal, true, Some(hold)));
                        }
                    }
                }
            }
        }
    }
}
