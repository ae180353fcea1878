//! A request that may have killed its process (DEC-73): whether a request whose process closed
//! on it unanswered goes to another process (DEC-33), judged from how the process ended. An exit
//! says its code or signal, never who sent it, so what can be told apart is a process that
//! ended by itself (an exit code, a crash signal, the OOM killer, the launcher's kill of a hung
//! process: any of them may be the request's doing) from one ended from outside (`SIGKILL` or
//! `SIGTERM` from an operator or a test, the launcher's own stop): a query that kills its
//! process would kill the next one too, so one that may have is not sent on, while one whose
//! process was shot from outside is.

pub(crate) use crate::process::Ending;
use crate::process::Exit;

/// Who ended it, as far as can be told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Blame {
    /// It ended by itself: a request in flight may be the cause.
    Itself,
    /// Something outside ended it: no request is suspect.
    Outside,
}

/// Who ended a process that ended so.
pub(crate) fn blame(ending: Ending) -> Blame {
    match ending {
        Ending::KilledHung => Blame::Itself,
        // A failing exit code: an uncaught exception (1), `process.exit(n)`, Node's own
        // aborts. 0 is a stop someone asked for (a `SIGTERM` it handled).
        Ending::Exited {
            exit: Exit::Code(code),
            ..
        } if code != 0 => Blame::Itself,
        Ending::Exited {
            exit: Exit::Code(_),
            ..
        } => Blame::Outside,
        Ending::Exited {
            exit: Exit::Signal(sig),
            oom_kills_rose,
        } => match sig {
            libc::SIGSEGV
            | libc::SIGABRT
            | libc::SIGBUS
            | libc::SIGILL
            | libc::SIGFPE
            | libc::SIGSYS
            | libc::SIGTRAP => Blame::Itself,
            libc::SIGKILL if oom_kills_rose => Blame::Itself,
            _ => Blame::Outside,
        },
        Ending::Exited {
            exit: Exit::SpawnFailed,
            ..
        } => Blame::Outside,
    }
}

/// Whether a GET, HEAD or OPTIONS its process closed on unanswered is sent to another process:
/// `ended`, how the process ended if it did within the wait for its exit (`None`: it did not,
/// so it lives and nothing is suspect; DEC-33's keep-alive race, say).
pub(crate) fn send_again(ended: Option<Ending>) -> bool {
    ended.is_none_or(|e| blame(e) == Blame::Outside)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn signal(sig: i32, oom: bool) -> Ending {
        Ending::Exited {
            exit: Exit::Signal(sig),
            oom_kills_rose: oom,
        }
    }

    #[test]
    fn a_process_that_ended_by_itself_keeps_its_request() {
        // spec: DEC-73
        for sig in [
            libc::SIGSEGV,
            libc::SIGABRT,
            libc::SIGBUS,
            libc::SIGILL,
            libc::SIGFPE,
        ] {
            assert!(!send_again(Some(signal(sig, false))), "signal {sig}");
        }
        assert!(!send_again(Some(signal(libc::SIGKILL, true))), "OOM kill");
        assert!(!send_again(Some(Ending::KilledHung)), "the hang watchdog");
        for code in [1, 3, 134] {
            let e = Ending::Exited {
                exit: Exit::Code(code),
                oom_kills_rose: false,
            };
            assert!(!send_again(Some(e)), "exit code {code}");
        }
    }

    #[test]
    fn a_process_ended_from_outside_or_alive_sends_it_on() {
        // spec: DEC-33, DEC-73 (a SIGKILL without the OOM count rising is no evidence)
        for sig in [libc::SIGKILL, libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            assert!(send_again(Some(signal(sig, false))), "signal {sig}");
        }
        let clean = Ending::Exited {
            exit: Exit::Code(0),
            oom_kills_rose: false,
        };
        assert!(send_again(Some(clean)), "a clean exit: a stop asked for");
        assert!(send_again(None), "it did not end");
    }

    proptest! {
        #[test]
        fn the_oom_count_only_ever_blames_a_sigkill(sig in 1i32..65) {
            // spec: DEC-73
            let without = blame(signal(sig, false));
            let with = blame(signal(sig, true));
            prop_assert_eq!(with != without, sig == libc::SIGKILL);
        }
    }
}
