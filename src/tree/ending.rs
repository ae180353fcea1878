//! How what a process leaves behind is ended: `SIGTERM`, then `SIGKILL` once `killSeconds` have
//! passed (the orderly stop's own rule), sent again to any newcomer until everything is gone, and
//! given up [`KILL_GRACE`] after the first `SIGKILL` (a process stuck in the kernel, or one the
//! launcher may not signal). Pure: fed with `now` and whether anything is left after each look.

use std::time::{Duration, Instant};

/// How long after the first `SIGKILL` the ending gives up waiting.
pub const KILL_GRACE: Duration = Duration::from_secs(5);
/// The first wait between looks, doubled after each up to [`MAX_POLL`], and again from the start
/// after each signal (a signalled process usually goes within milliseconds).
pub const FIRST_POLL: Duration = Duration::from_millis(20);
pub const MAX_POLL: Duration = Duration::from_millis(500);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sig {
    Term,
    Kill,
}

impl Sig {
    pub fn signal(self) -> nix::sys::signal::Signal {
        match self {
            Sig::Term => nix::sys::signal::Signal::SIGTERM,
            Sig::Kill => nix::sys::signal::Signal::SIGKILL,
        }
    }
}

/// What to do after a look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing is left.
    Done,
    /// Send this to what is left, then look again after the wait.
    Signal(Sig, Duration),
    /// Look again after this long.
    Wait(Duration),
    /// Still there [`KILL_GRACE`] after `SIGKILL`: stop waiting.
    GaveUp,
}

#[derive(Clone, Debug)]
pub struct Ending {
    kill_after: Duration,
    termed: Option<Instant>,
    killed: Option<Instant>,
    poll: Duration,
}

impl Ending {
    /// Nothing has been sent yet: the first look that finds something sends `SIGTERM`.
    pub fn new(kill_after: Duration) -> Ending {
        Ending {
            kill_after,
            termed: None,
            killed: None,
            poll: FIRST_POLL,
        }
    }

    /// `SIGTERM` has been sent already (an orderly stop signals the whole group): `SIGKILL`
    /// `kill_after` from `now`, no second `SIGTERM` (some servers read a second one as "now").
    pub fn after_term(now: Instant, kill_after: Duration) -> Ending {
        Ending {
            termed: Some(now),
            ..Ending::new(kill_after)
        }
    }

    /// What to do after a look at `now` that found something `left` (or not).
    pub fn step(&mut self, now: Instant, left: bool) -> Step {
        if !left {
            return Step::Done;
        }
        match (self.termed, self.killed) {
            (None, _) => {
                self.termed = Some(now);
                self.poll = FIRST_POLL;
                Step::Signal(Sig::Term, self.poll.min(self.kill_after))
            }
            (Some(termed), None) => match termed.checked_add(self.kill_after) {
                Some(due) if now >= due => {
                    self.killed = Some(now);
                    self.poll = FIRST_POLL;
                    Step::Signal(Sig::Kill, self.poll)
                }
                Some(due) => Step::Wait(self.next_poll().min(due - now)),
                None => Step::Wait(self.next_poll()),
            },
            (Some(_), Some(killed)) if now >= killed + KILL_GRACE => Step::GaveUp,
            // Whatever is still there (or has just been forked) gets SIGKILL too.
            (Some(_), Some(_)) => Step::Signal(Sig::Kill, self.next_poll()),
        }
    }

    fn next_poll(&mut self) -> Duration {
        let p = self.poll;
        self.poll = (p * 2).min(MAX_POLL);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KILL: Duration = Duration::from_secs(3);

    /// Drives an ending whose processes go at `gone_at` (if ever), from `t0`, following its
    /// waits; returns every step.
    fn drive(mut e: Ending, t0: Instant, gone_at: Option<Duration>) -> Vec<(Duration, Step)> {
        let mut now = t0;
        let mut steps = Vec::new();
        for _ in 0..1000 {
            let left = gone_at.is_none_or(|g| now < t0 + g);
            let step = e.step(now, left);
            steps.push((now - t0, step));
            match step {
                Step::Done | Step::GaveUp => return steps,
                Step::Signal(_, d) | Step::Wait(d) => {
                    assert!(d > Duration::ZERO && d <= MAX_POLL, "{d:?}");
                    now += d;
                }
            }
        }
        panic!("never ended: {steps:?}");
    }

    fn signals(steps: &[(Duration, Step)]) -> Vec<(Duration, Sig)> {
        steps
            .iter()
            .filter_map(|&(t, s)| match s {
                Step::Signal(sig, _) => Some((t, sig)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn nothing_left_is_done_at_once_with_no_signal() {
        let t0 = Instant::now();
        assert_eq!(
            drive(Ending::new(KILL), t0, Some(Duration::ZERO)),
            [(Duration::ZERO, Step::Done)]
        );
    }

    #[test]
    fn what_goes_at_sigterm_gets_nothing_more() {
        let t0 = Instant::now();
        let steps = drive(Ending::new(KILL), t0, Some(Duration::from_millis(100)));
        assert_eq!(signals(&steps), [(Duration::ZERO, Sig::Term)]);
        let (end, last) = steps[steps.len() - 1];
        assert_eq!(last, Step::Done);
        assert!(end < Duration::from_millis(200), "seen gone soon: {end:?}");
    }

    #[test]
    fn what_stays_gets_sigkill_at_kill_seconds_then_is_given_up_after_the_grace() {
        let t0 = Instant::now();
        let steps = drive(Ending::new(KILL), t0, None);
        let sent = signals(&steps);
        assert_eq!(sent[0], (Duration::ZERO, Sig::Term));
        assert_eq!(sent[1], (KILL, Sig::Kill), "SIGKILL exactly at killSeconds");
        assert!(
            sent[2..].iter().all(|&(_, s)| s == Sig::Kill),
            "SIGKILL again, never SIGTERM"
        );
        let (end, last) = steps[steps.len() - 1];
        assert_eq!(last, Step::GaveUp);
        assert!(
            end >= KILL + KILL_GRACE && end <= KILL + KILL_GRACE + MAX_POLL,
            "{end:?}"
        );
    }

    #[test]
    fn after_an_orderly_sigterm_no_second_one_is_sent() {
        let t0 = Instant::now();
        // Gone a moment after SIGKILL: that one SIGKILL is all it got.
        let steps = drive(
            Ending::after_term(t0, KILL),
            t0,
            Some(KILL + Duration::from_millis(10)),
        );
        assert_eq!(signals(&steps), [(KILL, Sig::Kill)]);
    }

    #[test]
    fn a_huge_kill_seconds_waits_without_overflow() {
        let t0 = Instant::now();
        let mut e = Ending::new(Duration::MAX);
        assert!(matches!(e.step(t0, true), Step::Signal(Sig::Term, _)));
        for i in 1..100 {
            assert!(matches!(
                e.step(t0 + Duration::from_secs(i), true),
                Step::Wait(_)
            ));
        }
    }
}
