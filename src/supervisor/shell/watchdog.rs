//! The hang watchdog's shell (DEC-82): once a second (the upkeep) each ready process's signs of
//! life are read (the front door's bytes heard and the request owed; its channel's lines come
//! through `on_event`), the pure verdict is taken (`supervisor::hang`), and a hung process gets
//! one WARNING and `SIGKILL` (`Lifecycle::hung`): it is then started again as after a crash.

use std::time::Instant;

use tracing::warn;

use super::Shell;
use crate::process::ProcessId;
use crate::settings::{key, paths};
use crate::supervisor::hang::{verdict, Verdict};

impl Shell {
    /// Every ready process looked at: one silent past `hangTimeoutSeconds` while it owes an
    /// answer is killed.
    pub(super) fn watch_hangs(&mut self, now: Instant) {
        let timeout = self.setup.settings.hang_timeout;
        if timeout.is_zero() || self.life.is_stopping() {
            return;
        }
        for i in 0..self.life.slot_count() {
            let id = ProcessId(i as u16);
            if !self.life.is_ready(id) {
                continue;
            }
            let Some((heard, owed)) = self.hooks.liveness(id) else {
                continue;
            };
            self.watch.hang.heard(id, heard, now);
            let last = self.watch.hang.last_activity(id, now);
            // Requests in flight sent before its last sign of life are owed from that sign.
            let in_flight = self.hooks.in_flight(id);
            let oldest = owed
                .as_ref()
                .map(|o| o.sent)
                .or((in_flight > 0).then_some(last));
            let Verdict::Hung(silent) = verdict(last, oldest, now, timeout) else {
                continue;
            };
            if !self.life.hung(id, now) {
                continue;
            }
            let request = match &owed {
                Some(o) => format!("its oldest request {} {}", o.method, o.target),
                None => format!("{in_flight} in flight, sent before its last answer"),
            };
            let detail = format!(
                "silent for {:.0} s owing an answer ({request})",
                silent.as_secs_f64()
            );
            warn!(
                "{}: hung: no byte of any answer and no IPC message for {:.0} s while it owes \
                 an answer ({request}; {} {}); killing it (SIGKILL) to start it again",
                self.code(id),
                silent.as_secs_f64(),
                key(paths::cluster::hang_timeout),
                timeout.as_secs_f64()
            );
            self.keeping.keeper.hung(id, detail);
        }
    }
}
