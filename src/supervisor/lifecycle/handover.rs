//! The lifecycle as data, for an in-place upgrade (`upgrade::state`): every process's state,
//! restart policy, restart count, start time and whether the proxy routes to it, the phase,
//! the rolling restart and the recycle under way. Pure: [`Lifecycle::capture`] and
//! [`Lifecycle::resume`] take the instant the state is read at, and every time in it is
//! milliseconds from that instant (negative: before it), so a backoff deadline or a drain's
//! bound falls where it fell (the monotonic clock goes on across `execve`; the shell gives the
//! new program the capture's instant on its own clock).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::rolling::Rolling;
use super::{Lifecycle, Phase, Slot, State};
use crate::process::ProcessId;
use crate::status::restarts::{RestartCounts, RestartReason};
use crate::supervisor::restart::RestartPolicy;

/// The lifecycle, handed over.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LifecycleState {
    slots: Vec<SlotState>,
    workers: usize,
    phase: PhaseState,
    max_start_failures: u32,
    kill_after_ms: u64,
    gave_up: Option<u32>,
    rolling: Option<RollingState>,
    recycling: Option<u16>,
    all_ready_said: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlotState {
    state: ProcessState,
    /// The restart policy: failing exits in a row, and whether it was ever ready.
    failures: u32,
    ever_ready: bool,
    restarts: u32,
    /// By reason, the four every program of the format knows (crash, rolling, recycle, scale;
    /// a program before this field hands over none: all zero).
    #[serde(default)]
    restarts_by: [u32; 4],
    /// Hang kills (DEC-82): apart, so that an earlier program of the format still reads the
    /// four above (absent: none).
    #[serde(default)]
    restarts_hung: u32,
    started_ms: Option<i64>,
    up: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "is", rename_all = "camelCase")]
enum ProcessState {
    Idle,
    #[serde(rename_all = "camelCase")]
    Starting {
        since_ms: i64,
    },
    #[serde(rename_all = "camelCase")]
    Ready {
        since_ms: i64,
    },
    #[serde(rename_all = "camelCase")]
    Waiting {
        until_ms: i64,
    },
    #[serde(rename_all = "camelCase")]
    Draining {
        until_ms: i64,
        restart: bool,
    },
    #[serde(rename_all = "camelCase")]
    Stopping {
        kill_at_ms: i64,
        killed: bool,
        restart: bool,
    },
    Stopped,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "is", rename_all = "camelCase")]
enum PhaseState {
    StartingMaster,
    Sizing,
    Running,
    StoppingWorkers,
    #[serde(rename_all = "camelCase")]
    Flushing {
        until_ms: i64,
    },
    StoppingMaster,
    Done,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RollingState {
    queue: Vec<u16>,
    current: Option<u16>,
    drain_ms: u64,
    step: usize,
    of: usize,
}

/// Why a lifecycle can't be handed over or taken over.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum HandoverError {
    ActionsPending(usize),
    NoMaster,
}

impl std::fmt::Display for HandoverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandoverError::ActionsPending(n) => {
                write!(f, "the supervisor has {n} actions not yet carried out")
            }
            HandoverError::NoMaster => f.write_str("the handed-over lifecycle has no master"),
        }
    }
}

/// `t` as milliseconds from `at` (negative: before it).
fn from(at: Instant, t: Instant) -> i64 {
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    match t.checked_duration_since(at) {
        Some(after) => ms(after),
        None => -ms(at.saturating_duration_since(t)),
    }
}

/// Milliseconds from `at` back to an instant (one the clock can't hold is `at` itself).
fn to(at: Instant, ms: i64) -> Instant {
    let d = Duration::from_millis(ms.unsigned_abs());
    let t = if ms >= 0 {
        at.checked_add(d)
    } else {
        at.checked_sub(d)
    };
    t.unwrap_or(at)
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Lifecycle {
    /// The limits of the settings in force (a new program's, after an upgrade).
    pub(crate) fn set_limits(&mut self, max_start_failures: u32, kill_after: Duration) {
        self.max_start_failures = max_start_failures;
        self.kill_after = kill_after;
    }

    /// The lifecycle as data, its times from `at`. Refused while actions wait to be carried out
    /// (the shell carries every one out before it waits, so it never captures then).
    pub(crate) fn capture(&self, at: Instant) -> Result<LifecycleState, HandoverError> {
        if !self.actions.is_empty() {
            return Err(HandoverError::ActionsPending(self.actions.len()));
        }
        let state = |s: &State| match *s {
            State::Idle => ProcessState::Idle,
            State::Starting { since } => ProcessState::Starting {
                since_ms: from(at, since),
            },
            State::Ready { since } => ProcessState::Ready {
                since_ms: from(at, since),
            },
            State::Waiting { until } => ProcessState::Waiting {
                until_ms: from(at, until),
            },
            State::Draining { until, restart } => ProcessState::Draining {
                until_ms: from(at, until),
                restart,
            },
            State::Stopping {
                kill_at,
                killed,
                restart,
            } => ProcessState::Stopping {
                kill_at_ms: from(at, kill_at),
                killed,
                restart,
            },
            State::Stopped => ProcessState::Stopped,
        };
        let phase = match self.phase {
            Phase::StartingMaster => PhaseState::StartingMaster,
            Phase::Sizing => PhaseState::Sizing,
            Phase::Running => PhaseState::Running,
            Phase::StoppingWorkers => PhaseState::StoppingWorkers,
            Phase::Flushing { until } => PhaseState::Flushing {
                until_ms: from(at, until),
            },
            Phase::StoppingMaster => PhaseState::StoppingMaster,
            Phase::Done => PhaseState::Done,
        };
        Ok(LifecycleState {
            slots: self
                .slots
                .iter()
                .map(|s| SlotState {
                    state: state(&s.state),
                    failures: s.policy.failures(),
                    ever_ready: s.policy.ever_ready(),
                    restarts: s.restarts,
                    restarts_by: {
                        let [crash, rolling, recycle, scale, _] = s.restarts_by.0;
                        [crash, rolling, recycle, scale]
                    },
                    restarts_hung: s.restarts_by.get(RestartReason::Hung),
                    started_ms: s.started.map(|t| from(at, t)),
                    up: s.up,
                })
                .collect(),
            workers: self.workers,
            phase,
            max_start_failures: self.max_start_failures,
            kill_after_ms: duration_ms(self.kill_after),
            gave_up: self.gave_up,
            rolling: self.rolling.as_ref().map(|r| RollingState {
                queue: r.queue.iter().map(|p| p.0).collect(),
                current: r.current.map(|p| p.0),
                drain_ms: duration_ms(r.drain),
                step: r.step,
                of: r.of,
            }),
            recycling: self.recycling.map(|p| p.0),
            all_ready_said: self.all_ready_said,
        })
    }

    /// The lifecycle handed over, its times from `at` (the capture's instant on this
    /// program's clock). It carries on where the old one was: no action is asked for.
    pub(crate) fn resume(s: &LifecycleState, at: Instant) -> Result<Lifecycle, HandoverError> {
        if s.slots.is_empty() {
            return Err(HandoverError::NoMaster);
        }
        let state = |p: &ProcessState| match *p {
            ProcessState::Idle => State::Idle,
            ProcessState::Starting { since_ms } => State::Starting {
                since: to(at, since_ms),
            },
            ProcessState::Ready { since_ms } => State::Ready {
                since: to(at, since_ms),
            },
            ProcessState::Waiting { until_ms } => State::Waiting {
                until: to(at, until_ms),
            },
            ProcessState::Draining { until_ms, restart } => State::Draining {
                until: to(at, until_ms),
                restart,
            },
            ProcessState::Stopping {
                kill_at_ms,
                killed,
                restart,
            } => State::Stopping {
                kill_at: to(at, kill_at_ms),
                killed,
                restart,
            },
            ProcessState::Stopped => State::Stopped,
        };
        let phase = match s.phase {
            PhaseState::StartingMaster => Phase::StartingMaster,
            PhaseState::Sizing => Phase::Sizing,
            PhaseState::Running => Phase::Running,
            PhaseState::StoppingWorkers => Phase::StoppingWorkers,
            PhaseState::Flushing { until_ms } => Phase::Flushing {
                until: to(at, until_ms),
            },
            PhaseState::StoppingMaster => Phase::StoppingMaster,
            PhaseState::Done => Phase::Done,
        };
        let slots: Vec<Slot> = s
            .slots
            .iter()
            .map(|x| Slot {
                state: state(&x.state),
                policy: RestartPolicy::resume(x.failures, x.ever_ready),
                restarts: x.restarts,
                restarts_by: {
                    let [crash, rolling, recycle, scale] = x.restarts_by;
                    RestartCounts([crash, rolling, recycle, scale, x.restarts_hung])
                },
                started: x.started_ms.map(|ms| to(at, ms)),
                up: x.up,
                hung: false,
                last_why: None,
                second: None,
                second_started: None,
                took: None,
            })
            .collect();
        Ok(Lifecycle {
            workers: s.workers.min(slots.len() - 1),
            slots,
            phase,
            max_start_failures: s.max_start_failures,
            kill_after: Duration::from_millis(s.kill_after_ms),
            gave_up: s.gave_up,
            actions: VecDeque::new(),
            rolling: s.rolling.as_ref().map(|r| Rolling {
                queue: r.queue.iter().copied().map(ProcessId).collect(),
                current: r.current.map(ProcessId),
                drain: Duration::from_millis(r.drain_ms),
                step: r.step,
                of: r.of,
                asking: false,
                halted: false,
            }),
            recycling: s.recycling.map(ProcessId),
            all_ready_said: s.all_ready_said,
            beside_first: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_keep_their_place_around_the_capture_instant() {
        let at = Instant::now() + Duration::from_secs(100);
        for ms in [-90_000i64, -1, 0, 1, 3_600_000] {
            assert_eq!(from(at, to(at, ms)), ms);
        }
        // The new program's clock reads later: a deadline still falls where it fell.
        let later = at + Duration::from_millis(250);
        assert_eq!(to(at, 1000), later + Duration::from_millis(750));
    }

    #[test]
    fn a_lifecycle_with_actions_pending_is_not_captured() {
        let now = Instant::now();
        let mut l = Lifecycle::new(2, 3, Duration::from_secs(30));
        l.start(now);
        assert_eq!(l.capture(now), Err(HandoverError::ActionsPending(1)));
        let _ = l.poll_action();
        assert!(l.capture(now).is_ok());
    }

    #[test]
    fn the_handed_over_form_reads_as_json_with_named_states() {
        let now = Instant::now();
        let mut l = Lifecycle::new(1, 3, Duration::from_secs(30));
        l.start(now);
        while l.poll_action().is_some() {}
        l.ready(ProcessId::MASTER, now);
        while l.poll_action().is_some() {}
        let json = serde_json::to_value(l.capture(now).expect("capture")).expect("json");
        assert_eq!(json["phase"]["is"], "sizing");
        assert_eq!(json["slots"][0]["state"]["is"], "ready");
        assert_eq!(json["slots"][0]["state"]["sinceMs"], 0);
        assert_eq!(json["slots"][0]["up"], true);
        assert_eq!(json["killAfterMs"], 30_000);
    }
}
