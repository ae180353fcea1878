//! The hang watchdog's decision (DEC-82): a process that owes an answer and has written nothing
//! for `hangTimeoutSeconds` is hung. Pure: the times in, the verdict out; the shell reads the
//! front door's liveness (`proxy::forward::liveness`) and the channel, keeps the times here
//! ([`Watch`]) and kills (`Lifecycle::hung`).
//!
//! * Its sign of life is any byte of any answer on any of its connections, or any line on its
//!   IPC channel: a process that is merely slow (streaming a byte now and then, or sending its
//!   `status` every `statusSeconds`) is never hung.
//! * It owes an answer from the oldest request sent to it since its last sign of life. The
//!   `504` that ends such a request at `upstreamTimeoutSeconds` (time to first byte) and the
//!   cooldown after it end the client's wait, not the debt: the clock runs on. A request still
//!   in flight that was sent before the last sign of life is owed from that sign (a process that
//!   answered one request and then stuck on the next one it already had is hung too).
//! * The watchdog looks once a second (the shell's upkeep) and timestamps a change in the bytes
//!   heard itself, so it sees a sign of life up to a second late: always in the process's favour.

use std::time::{Duration, Instant};

use crate::process::ProcessId;

/// The oldest request sent to a process since it last wrote a byte of an answer.
#[derive(Clone, Debug)]
pub struct Owed {
    pub sent: std::time::Instant,
    /// `proxy::forward::liveness`'s `heard` when it was sent: a later reading that differs means the process
    /// wrote something since.
    pub heard: u64,
    pub method: http::Method,
    pub target: http::Uri,
}

/// What the watchdog makes of a process now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It owes nothing.
    Quiet,
    /// It owes an answer and has been silent this long, within the timeout.
    Silent(Duration),
    /// It owes an answer and has been silent this long, the timeout or more: kill it.
    Hung(Duration),
}

/// `last_activity`: its last sign of life (or its start); `oldest_request`: when the oldest
/// request it owes an answer to was sent, if any; `timeout` zero: never hung.
pub(crate) fn verdict(
    last_activity: Instant,
    oldest_request: Option<Instant>,
    now: Instant,
    timeout: Duration,
) -> Verdict {
    let Some(oldest) = oldest_request else {
        return Verdict::Quiet;
    };
    let silent = now.saturating_duration_since(oldest.max(last_activity));
    if !timeout.is_zero() && silent >= timeout {
        Verdict::Hung(silent)
    } else {
        Verdict::Silent(silent)
    }
}

/// The last sign of life of each process, as the watchdog has seen it.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    seen: Vec<Seen>,
}

#[derive(Clone, Copy, Debug)]
struct Seen {
    /// The front door's count of reads that brought bytes, as last looked at.
    heard: u64,
    at: Option<Instant>,
}

impl Watch {
    fn slot(&mut self, id: ProcessId) -> &mut Seen {
        let i = id.index();
        if self.seen.len() <= i {
            self.seen.resize(i + 1, Seen { heard: 0, at: None });
        }
        &mut self.seen[i]
    }

    /// The process was started, or became ready: its clock starts afresh.
    pub(crate) fn started(&mut self, id: ProcessId, now: Instant) {
        self.slot(id).at = Some(now);
    }

    /// A line on its IPC channel.
    pub(crate) fn spoke(&mut self, id: ProcessId, now: Instant) {
        self.slot(id).at = Some(now);
    }

    /// The front door's count of reads that brought bytes from it, looked at `now`: a change
    /// is a sign of life.
    pub(crate) fn heard(&mut self, id: ProcessId, count: u64, now: Instant) {
        let s = self.slot(id);
        if s.heard != count {
            s.heard = count;
            s.at = Some(now);
        }
    }

    /// Its last sign of life (`now` if none was ever seen: the clock starts at the first look).
    pub(crate) fn last_activity(&mut self, id: ProcessId, now: Instant) -> Instant {
        *self.slot(id).at.get_or_insert(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_process_owing_nothing_is_never_hung() {
        // spec: DEC-82
        let t = Instant::now();
        assert_eq!(verdict(t, None, t + secs(3600), secs(10)), Verdict::Quiet);
    }

    #[test]
    fn the_clock_runs_from_the_oldest_request_since_the_last_sign_of_life() {
        // spec: DEC-82
        let t = Instant::now();
        let sent = t + secs(5);
        assert_eq!(
            verdict(t, Some(sent), t + secs(14), secs(10)),
            Verdict::Silent(secs(9))
        );
        assert_eq!(
            verdict(t, Some(sent), t + secs(15), secs(10)),
            Verdict::Hung(secs(10))
        );
        // A request sent before the last sign of life is owed from that sign.
        assert_eq!(
            verdict(t + secs(8), Some(sent), t + secs(15), secs(10)),
            Verdict::Silent(secs(7))
        );
    }

    #[test]
    fn a_zero_timeout_never_kills() {
        // spec: DEC-82
        let t = Instant::now();
        assert_eq!(
            verdict(t, Some(t), t + secs(1_000_000), Duration::ZERO),
            Verdict::Silent(secs(1_000_000))
        );
    }

    #[test]
    fn a_slow_process_that_keeps_writing_or_talking_is_never_hung() {
        // spec: DEC-82: a byte a second, or a channel message, for longer than the timeout.
        let t = Instant::now();
        let mut w = Watch::default();
        let p = ProcessId(1);
        w.started(p, t);
        for s in 1..=90 {
            let now = t + secs(s);
            if s % 2 == 0 {
                w.heard(p, s, now);
            } else {
                w.spoke(p, now);
            }
            let v = verdict(w.last_activity(p, now), Some(t), now, secs(5));
            assert_eq!(v, Verdict::Silent(Duration::ZERO), "at {s} s");
        }
        // Then silence: hung 5 s after the last sign.
        let last = t + secs(90);
        let v = verdict(
            w.last_activity(p, last + secs(5)),
            Some(t),
            last + secs(5),
            secs(5),
        );
        assert_eq!(v, Verdict::Hung(secs(5)));
        // The same count looked at again is no sign of life.
        w.heard(p, 90, last + secs(6));
        assert_eq!(w.last_activity(p, last + secs(6)), last);
    }

    #[test]
    fn a_process_the_watchdog_never_saw_starts_its_clock_at_the_first_look() {
        let t = Instant::now();
        let mut w = Watch::default();
        assert_eq!(w.last_activity(ProcessId(3), t), t);
        assert_eq!(w.last_activity(ProcessId(3), t + secs(9)), t);
    }
}
