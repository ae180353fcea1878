//! The host's readiness and weight as a balancer in front of many hosts asks for them: `/readyz`
//! (`admin.rs`) and HAProxy's agent line (`agent.rs`, DEC-89), both from one reading of the
//! front door (`HostState`), decided here without a clock or a socket so each case is tested.

use crate::proxy::front::Front;

/// What the host's readiness and weight are made of, read at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostState {
    /// The drain of a stop has begun: nothing new is accepted.
    pub draining: bool,
    /// A stop's lame duck (`lameDuckSeconds`, DEC-88): still serving, leaving the balancers.
    pub lame_duck: bool,
    pub master_ready: bool,
    /// At least one ready process takes ordinary tx requests.
    pub tx_ready: bool,
    /// The tx slots of the ready tx processes (`maxOutstanding + fastLaneExtra` each); `None`:
    /// one has no limit (`maxOutstanding` 0).
    pub slots: Option<u64>,
    /// Tx requests in flight on them and waiting for one.
    pub busy: u64,
}

impl HostState {
    /// The front door's figures now.
    pub fn of(front: &Front) -> HostState {
        let mut slots = Some(0u64);
        let mut busy = 0u64;
        for p in front.roster.present() {
            if !p.serves_tx || !front.roster.is_ready(p.id) {
                continue;
            }
            let l = front.admission.load(p.id);
            busy += u64::from(l.in_flight);
            slots = slots.zip(l.slots).map(|(a, b)| a + u64::from(b));
        }
        HostState {
            draining: front.admission.is_stopping(),
            lame_duck: front.is_lame_duck(),
            master_ready: front.roster.master_ready(),
            tx_ready: front.roster.any_tx_ready(),
            slots,
            busy: busy + front.admission.queued() as u64,
        }
    }
}

/// Ready (`/readyz` `200`): the master and at least one tx process, and no stop begun.
pub fn readiness(h: &HostState) -> Result<(), &'static str> {
    if h.draining {
        Err("draining: the launcher is stopping")
    } else if h.lame_duck {
        Err("lame duck: the launcher is stopping (lameDuckSeconds), still serving until the drain")
    } else if !h.master_ready {
        Err("the master is not ready")
    } else if !h.tx_ready {
        Err("no tx process is ready")
    } else {
        Ok(())
    }
}

/// The share of the host's tx slots that is free, in percent: 1..=100 (never 0 while ready:
/// HAProxy takes a server at weight 0 out of its balancing, so with every host full it would
/// answer its own `503` where the hosts' queues would serve), 100 with no limit.
pub fn free_percent(h: &HostState) -> u64 {
    match h.slots {
        None => 100,
        Some(0) => 1,
        Some(slots) => {
            let free = slots.saturating_sub(h.busy);
            (free * 100 / slots).clamp(1, 100)
        }
    }
}

/// HAProxy's agent-check answer (one line): `up ready 35%` while ready (`ready` lifts a `drain`
/// an earlier answer set, as after a restart), `drain` once a stop has begun (the lame duck or
/// the drain: no new sessions, those it has go on), `down` when it is not ready otherwise.
pub fn agent_line(h: &HostState) -> String {
    if h.draining || h.lame_duck {
        return "drain\n".to_string();
    }
    match readiness(h) {
        Ok(()) => format!("up ready {}%\n", free_percent(h)),
        Err(_) => "down\n".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(slots: Option<u64>, busy: u64) -> HostState {
        HostState {
            master_ready: true,
            tx_ready: true,
            slots,
            busy,
            ..HostState::default()
        }
    }

    #[test]
    fn readiness_names_the_first_reason_and_the_lame_duck_is_one() {
        // spec: DEC-88
        assert_eq!(readiness(&ready(Some(20), 0)), Ok(()));
        let duck = HostState {
            lame_duck: true,
            ..ready(Some(20), 0)
        };
        assert!(readiness(&duck).is_err_and(|r| r.contains("lame duck")));
        let draining = HostState {
            draining: true,
            ..duck
        };
        assert!(readiness(&draining).is_err_and(|r| r.starts_with("draining")));
        let starting = HostState::default();
        assert_eq!(readiness(&starting), Err("the master is not ready"));
        let no_tx = HostState {
            master_ready: true,
            ..starting
        };
        assert_eq!(readiness(&no_tx), Err("no tx process is ready"));
    }

    #[test]
    fn the_weight_is_the_free_share_of_the_slots_never_0_while_ready() {
        // spec: DEC-89
        assert_eq!(agent_line(&ready(Some(20), 0)), "up ready 100%\n");
        assert_eq!(agent_line(&ready(Some(20), 13)), "up ready 35%\n");
        assert_eq!(agent_line(&ready(Some(20), 20)), "up ready 1%\n");
        // Queued beyond the slots: still 1%, never 0.
        assert_eq!(agent_line(&ready(Some(20), 90)), "up ready 1%\n");
        assert_eq!(agent_line(&ready(Some(0), 0)), "up ready 1%\n");
        assert_eq!(agent_line(&ready(None, 500)), "up ready 100%\n", "no limit");
        assert_eq!(
            agent_line(&ready(Some(3), 1)),
            "up ready 66%\n",
            "rounded down"
        );
    }

    #[test]
    fn a_stop_drains_and_a_host_not_ready_is_down() {
        // spec: DEC-89, DEC-88
        let duck = HostState {
            lame_duck: true,
            ..ready(Some(20), 0)
        };
        assert_eq!(agent_line(&duck), "drain\n");
        let draining = HostState {
            draining: true,
            ..HostState::default()
        };
        assert_eq!(agent_line(&draining), "drain\n");
        assert_eq!(agent_line(&HostState::default()), "down\n");
        let no_tx = HostState {
            master_ready: true,
            ..HostState::default()
        };
        assert_eq!(agent_line(&no_tx), "down\n");
    }
}
