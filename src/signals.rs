//! What each signal means to the launcher, in one place: a pure table from (signal, the phase
//! the launcher is in) to a value the launcher acts on (`Reload`, `Stop`, `StopNow`, `Ignored`).
//! The shell that receives the signals is `signal_stream.rs`; the launcher only matches these
//! values. README's table and `--help` are checked against `TABLE` (`tests/ops_signals.rs`).
//!
//! No common signal may end the launcher by its default action: that would take the children
//! down with no log, no drain and no orderly stop. So every signal whose default is to end the
//! process and that an operator, a terminal or a habit from nginx may send is caught, and either
//! acted on or logged as ignored. `SIGPIPE` is ignored by Rust's runtime before `main`;
//! `SIGTSTP` (Ctrl-Z) keeps its default (the launcher stops in the terminal, its children run
//! on; `fg` resumes it); `SIGKILL` and `SIGSTOP` can't be caught.

use std::fmt;

/// The signals the launcher catches. Public for `tests/ops_signals.rs`, which sends each one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sig {
    Hup,
    Int,
    Quit,
    Term,
    Usr1,
    Usr2,
    Ttin,
    Ttou,
    Winch,
    Alrm,
}

impl Sig {
    pub(crate) const ALL: [Sig; 10] = [
        Sig::Hup,
        Sig::Int,
        Sig::Quit,
        Sig::Term,
        Sig::Usr1,
        Sig::Usr2,
        Sig::Ttin,
        Sig::Ttou,
        Sig::Winch,
        Sig::Alrm,
    ];

    /// `SIGHUP` ...
    pub fn name(self) -> &'static str {
        match self {
            Sig::Hup => "SIGHUP",
            Sig::Int => "SIGINT",
            Sig::Quit => "SIGQUIT",
            Sig::Term => "SIGTERM",
            Sig::Usr1 => "SIGUSR1",
            Sig::Usr2 => "SIGUSR2",
            Sig::Ttin => "SIGTTIN",
            Sig::Ttou => "SIGTTOU",
            Sig::Winch => "SIGWINCH",
            Sig::Alrm => "SIGALRM",
        }
    }

    /// The signal's number on Linux.
    pub fn number(self) -> i32 {
        match self {
            Sig::Hup => 1,
            Sig::Int => 2,
            Sig::Quit => 3,
            Sig::Term => 15,
            Sig::Usr1 => 10,
            Sig::Usr2 => 12,
            Sig::Ttin => 21,
            Sig::Ttou => 22,
            Sig::Winch => 28,
            Sig::Alrm => 14,
        }
    }

    fn stops(self) -> bool {
        matches!(self, Sig::Int | Sig::Quit | Sig::Term)
    }
}

impl fmt::Display for Sig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where the launcher is when a signal arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// The master is starting; nothing listens yet.
    Starting,
    /// Serving clients.
    Serving,
    /// Stopping: still serving, `/readyz` at `503`, for `lameDuckSeconds` before the drain
    /// (DEC-88).
    LameDuck,
    /// Stopping: the drain of requests in progress (`drainSeconds`).
    Draining,
    /// Stopping: the processes are being stopped in order.
    StoppingProcesses,
    /// An in-place upgrade: the drain before the `execve`.
    Upgrading,
}

/// What the launcher does with a signal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Meaning {
    /// Read `config.json` again and take it (`launcher/reloader.rs`).
    Reload,
    /// An upgrade is under way: reload once it is over (in the new program, or in this one
    /// should the upgrade not happen).
    ReloadAfterUpgrade,
    /// The orderly stop: drain, then the processes in order.
    Stop,
    /// A second stop signal during the lame duck: what is left of its wait is skipped and the
    /// drain begins (DEC-88).
    SkipLameDuck,
    /// A second stop signal during the drain: the drain is cut short, then the processes are
    /// stopped (`SIGTERM`, `SIGKILL` after `killSeconds`).
    StopNow,
    /// Reopen the access log's file (logrotate's convention); without one, logged and ignored.
    ReopenAccessLog,
    /// Replace the launcher's program with the binary now at its path, keeping its pid, its
    /// sockets and every process (`launcher/upgrade.rs`).
    Upgrade,
    /// One tx-worker more (`SIGTTIN`, `1`) or fewer (`SIGTTOU`, `-1`), as Unicorn's signals.
    Scale(i64),
    /// Logged and otherwise ignored, with the reason.
    Ignored(&'static str),
}

/// The meaning of `sig` in `phase`.
pub(crate) fn meaning(sig: Sig, phase: Phase) -> Meaning {
    use Phase::*;
    match (sig, phase) {
        (s, Starting | Serving) if s.stops() => Meaning::Stop,
        (s, LameDuck) if s.stops() => Meaning::SkipLameDuck,
        (s, Draining) if s.stops() => Meaning::StopNow,
        // The upgrade is given up and the launcher stops as usual.
        (s, Upgrading) if s.stops() => Meaning::Stop,
        (s, StoppingProcesses) if s.stops() => Meaning::Ignored(
            "already stopping the processes (each gets SIGKILL killSeconds after its SIGTERM)",
        ),
        (Sig::Hup, Serving) => Meaning::Reload,
        (Sig::Hup, Starting) => Meaning::Ignored(
            "the master is not ready yet; send it again once it is (nothing would be reloaded)",
        ),
        (Sig::Hup, Upgrading) => Meaning::ReloadAfterUpgrade,
        (Sig::Hup, _) => Meaning::Ignored("stopping"),
        (Sig::Usr1, _) => Meaning::ReopenAccessLog,
        (Sig::Usr2, Serving) => Meaning::Upgrade,
        (Sig::Usr2, Starting) => Meaning::Ignored(
            "the master is not ready yet; send it again once it is (nothing to upgrade in place)",
        ),
        (Sig::Usr2, Upgrading) => Meaning::Ignored("an upgrade is already under way"),
        (Sig::Usr2, _) => Meaning::Ignored("stopping"),
        (Sig::Ttin | Sig::Ttou, Serving) => Meaning::Scale(if sig == Sig::Ttin { 1 } else { -1 }),
        (Sig::Ttin | Sig::Ttou, Starting) => Meaning::Ignored(
            "the master is not ready yet: the worker count is being decided; send it again once it is",
        ),
        // DEC-49: refused, not deferred: the upgrade hands over a steady cluster.
        (Sig::Ttin | Sig::Ttou, Upgrading) => Meaning::Ignored(
            "an upgrade is under way: the worker count stays; send it again once it is over",
        ),
        (Sig::Ttin | Sig::Ttou, _) => Meaning::Ignored("stopping"),
        // A terminal resize sends it: never a worker count change (Unicorn's WINCH is not).
        (Sig::Winch, _) => Meaning::Ignored("nothing to resize (a terminal's resize sends it)"),
        (Sig::Alrm, _) => Meaning::Ignored("no timer of the launcher's uses it"),
        // The stop signals are all matched above; the compiler can't see that.
        (_, _) => Meaning::Ignored("not used"),
    }
}

/// README's and `--help`'s table: each signal and what it does, as operators read it. Public
/// for `tests/ops_signals.rs`.
pub const TABLE: &[(&str, &str)] = &[
    (
        "HUP",
        "use the new config.json: apply what can be applied at once, upgrade in place for what needs the launcher's own restart, restart in turn the processes whose inputs changed (ignored while the master starts; during an upgrade, carried out once it is over)",
    ),
    (
        "TERM, INT",
        "stop: /readyz 503 while serving on for lameDuckSeconds (0 by default), then drain the requests in progress (drainSeconds), then the processes in order",
    ),
    ("QUIT", "the same as TERM (nginx's graceful stop)"),
    (
        "a 2nd TERM/INT/QUIT",
        "during the lame duck: the drain begins at once; during the drain: stop now (the drain is cut short; then SIGTERM, SIGKILL after killSeconds)",
    ),
    (
        "USR1",
        "reopen the access log file (accessLogPath), as logrotate expects; without one, ignored, logged",
    ),
    (
        "USR2",
        "upgrade in place: run the binary now at the launcher's path, same pid, same processes (ignored while the master starts)",
    ),
    (
        "TTIN",
        "one tx-worker more, started and joining once ready (refused, logged, when the internalPort range or the memory fit would not hold it)",
    ),
    (
        "TTOU",
        "one tx-worker fewer: the highest-numbered, drained as a recycle is (never the last one)",
    ),
    ("WINCH, ALRM", "ignored, logged (WINCH: a terminal's resize)"),
    ("PIPE", "ignored"),
    (
        "TSTP (Ctrl-Z)",
        "default: the launcher pauses, its processes run on",
    ),
];

/// The table as `--help` prints it.
pub(crate) fn help_text() -> String {
    let width = TABLE.iter().map(|(s, _)| s.len()).max().unwrap_or(0);
    let mut out = String::from("Signals:\n");
    for (sig, what) in TABLE {
        out.push_str(&format!("  {sig:<width$}  {what}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_signals_stop_then_stop_now_during_the_drain_then_are_ignored() {
        for s in [Sig::Term, Sig::Int, Sig::Quit] {
            assert_eq!(meaning(s, Phase::Starting), Meaning::Stop, "{s}");
            assert_eq!(meaning(s, Phase::Serving), Meaning::Stop, "{s}");
            assert_eq!(meaning(s, Phase::Draining), Meaning::StopNow, "{s}");
            assert!(
                matches!(
                    meaning(s, Phase::StoppingProcesses),
                    Meaning::Ignored(why) if why.contains("already stopping")
                ),
                "{s}"
            );
        }
    }

    #[test]
    fn a_second_stop_signal_in_the_lame_duck_skips_to_the_drain_and_nothing_else_acts() {
        // spec: DEC-88
        for s in [Sig::Term, Sig::Int, Sig::Quit] {
            assert_eq!(meaning(s, Phase::LameDuck), Meaning::SkipLameDuck, "{s}");
        }
        for s in [Sig::Hup, Sig::Usr2, Sig::Ttin, Sig::Ttou, Sig::Winch] {
            assert!(
                matches!(meaning(s, Phase::LameDuck), Meaning::Ignored(_)),
                "{s}"
            );
        }
        assert_eq!(
            meaning(Sig::Usr1, Phase::LameDuck),
            Meaning::ReopenAccessLog
        );
    }

    #[test]
    fn hup_reloads_only_while_serving() {
        assert_eq!(meaning(Sig::Hup, Phase::Serving), Meaning::Reload);
        for p in [Phase::Starting, Phase::Draining, Phase::StoppingProcesses] {
            assert!(matches!(meaning(Sig::Hup, p), Meaning::Ignored(_)), "{p:?}");
        }
    }

    #[test]
    fn the_others_are_ignored_in_every_phase_with_a_reason() {
        for s in [Sig::Winch, Sig::Alrm] {
            for p in [
                Phase::Starting,
                Phase::Serving,
                Phase::Draining,
                Phase::StoppingProcesses,
                Phase::Upgrading,
            ] {
                assert!(
                    matches!(meaning(s, p), Meaning::Ignored(why) if !why.is_empty()),
                    "{s} {p:?}"
                );
            }
        }
        assert_eq!(
            meaning(Sig::Usr1, Phase::Draining),
            Meaning::ReopenAccessLog
        );
    }

    #[test]
    fn usr2_upgrades_only_while_serving_and_a_stop_ends_an_upgrade() {
        assert_eq!(meaning(Sig::Usr2, Phase::Serving), Meaning::Upgrade);
        for p in [
            Phase::Starting,
            Phase::Draining,
            Phase::StoppingProcesses,
            Phase::Upgrading,
        ] {
            assert!(
                matches!(meaning(Sig::Usr2, p), Meaning::Ignored(_)),
                "{p:?}"
            );
        }
        assert!(matches!(
            meaning(Sig::Usr2, Phase::Upgrading),
            Meaning::Ignored(why) if why.contains("already under way")
        ));
        for s in [Sig::Term, Sig::Int, Sig::Quit] {
            assert_eq!(meaning(s, Phase::Upgrading), Meaning::Stop, "{s}");
        }
        // #25: a SIGHUP during an upgrade is deferred, never dropped.
        assert_eq!(
            meaning(Sig::Hup, Phase::Upgrading),
            Meaning::ReloadAfterUpgrade
        );
    }

    #[test]
    fn names_and_numbers_are_linux_s() {
        assert_eq!(Sig::Usr1.number(), libc::SIGUSR1);
        assert_eq!(Sig::Usr2.number(), libc::SIGUSR2);
        assert_eq!(Sig::Winch.number(), libc::SIGWINCH);
        assert_eq!(Sig::Alrm.number(), libc::SIGALRM);
        assert_eq!(Sig::Ttin.number(), libc::SIGTTIN);
        assert_eq!(Sig::Ttou.number(), libc::SIGTTOU);
        assert_eq!(Sig::Quit.number(), libc::SIGQUIT);
        assert_eq!(Sig::Hup.number(), libc::SIGHUP);
        assert_eq!(Sig::Int.number(), libc::SIGINT);
        assert_eq!(Sig::Term.number(), libc::SIGTERM);
        assert!(Sig::ALL.iter().all(|s| s.name().starts_with("SIG")));
    }

    #[test]
    fn ttin_and_ttou_scale_only_while_serving_and_winch_never() {
        // DEC-49: not while the master starts or during an upgrade (refused with the reason).
        assert_eq!(meaning(Sig::Ttin, Phase::Serving), Meaning::Scale(1));
        assert_eq!(meaning(Sig::Ttou, Phase::Serving), Meaning::Scale(-1));
        for s in [Sig::Ttin, Sig::Ttou] {
            for p in [
                Phase::Starting,
                Phase::Upgrading,
                Phase::Draining,
                Phase::StoppingProcesses,
            ] {
                assert!(
                    matches!(meaning(s, p), Meaning::Ignored(why) if !why.is_empty()),
                    "{s} {p:?}"
                );
            }
        }
        assert!(matches!(
            meaning(Sig::Ttin, Phase::Upgrading),
            Meaning::Ignored(why) if why.contains("upgrade")
        ));
        assert!(matches!(
            meaning(Sig::Winch, Phase::Serving),
            Meaning::Ignored(_)
        ));
    }

    #[test]
    fn the_help_text_lists_every_row() {
        let h = help_text();
        for (sig, what) in TABLE {
            assert!(h.contains(sig) && h.contains(what), "{h}");
        }
    }
}
