//! The hang watchdog's kill (DEC-82): the shell found a ready process silent past
//! `hangTimeoutSeconds` while it owed an answer (`supervisor::hang`). It is taken out of
//! rotation at once and killed; its exit then goes the way of any crash (`exited`): its restart
//! policy's wait, counted as `hung`, never as a planned restart.

use std::time::Instant;

use super::{Action, Lifecycle, State};
use crate::process::ProcessId;

impl Lifecycle {
    /// Kill the hung process `id`: false (nothing done) unless it is ready and not already being
    /// killed, and the cluster is not stopping (the stop's own SIGKILL deadline holds then).
    pub(crate) fn hung(&mut self, id: ProcessId, _now: Instant) -> bool {
        if self.is_stopping() {
            return false;
        }
        let Some(slot) = self.slots.get_mut(id.index()) else {
            return false;
        };
        if slot.hung || !matches!(slot.state, State::Ready { .. }) {
            return false;
        }
        slot.hung = true;
        self.down(id);
        self.actions.push_back(Action::KillHung(id));
        true
    }

    /// Whether `id`'s current process is being killed for hanging: its exit is then a death the
    /// request it owed may have caused (DEC-73).
    pub(crate) fn killed_hung(&self, id: ProcessId) -> bool {
        self.slots.get(id.index()).is_some_and(|s| s.hung)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::Exit;
    use crate::status::restarts::RestartReason;
    use crate::supervisor::lifecycle::test_support::*;
    use crate::supervisor::lifecycle::Aftermath;

    #[test]
    fn a_hung_process_is_killed_once_and_restarted_as_a_crash_counted_hung() {
        // spec: DEC-82, DEC-84
        let t = Instant::now();
        let mut l = running(1, t);
        assert!(l.hung(T1, t));
        assert_eq!(drain(&mut l), vec![Action::Down(T1), Action::KillHung(T1)]);
        assert!(!l.hung(T1, t), "once");
        assert!(drain(&mut l).is_empty());
        let after = l.exited(T1, Exit::Signal(9), t + secs(120));
        assert_eq!(after, Aftermath::Restart { asked: false });
        let by = l.restarts_by(T1);
        assert_eq!(
            (by.get(RestartReason::Hung), by.get(RestartReason::Crash)),
            (1, 0)
        );
        // Its next exit, a crash of its own, is a crash.
        l.handle_timeout(t + secs(200));
        l.ready(T1, t + secs(201));
        l.exited(T1, Exit::Code(1), t + secs(400));
        assert_eq!(l.restarts_by(T1).get(RestartReason::Crash), 1);
    }

    #[test]
    fn only_a_ready_process_is_killed_for_a_hang_and_never_while_stopping() {
        // spec: DEC-82
        let t = Instant::now();
        let mut l = running(1, t);
        l.stop(t);
        drain(&mut l);
        assert!(!l.hung(T1, t));
        let mut l = running(2, t);
        assert!(l.recycle(T2, secs(30), t));
        drain(&mut l);
        assert!(!l.hung(T2, t), "draining: its drain's deadline holds");
        assert!(l.hung(M, t), "the master is watched too");
    }
}
