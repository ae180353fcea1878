//! Ends what belongs to a process the launcher started (its [`Wanted`]): looks in `/proc`, sends
//! what [`Ending`] says to the process groups and to each marked process outside them, and
//! looks again until nothing is left or the ending gives up. The shell around `Ending`, used at a
//! child's end, at the launcher's exit and by the guardian.

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::kill;
use nix::unistd::Pid;

use super::ending::{Ending, Sig, Step};
use super::members::{scan, Stat, Wanted};
use super::subreaper;

/// How an ending went: what was found left at first (empty: nothing, no signal sent), whether it
/// took `SIGKILL`, and what was still there when it gave up.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Swept {
    pub found: Vec<u32>,
    pub killed: bool,
    pub left: Vec<u32>,
}

/// Ends what `wanted` finds. `termed`: its groups have had `SIGTERM` already (counted from now).
/// `found` is called once, with the pids, when something is first found (before any signal).
/// Blocks for up to `kill_after` + [`super::ending::KILL_GRACE`]: call it off the runtime.
pub fn end(
    wanted: &Wanted,
    kill_after: Duration,
    termed: bool,
    mut found: impl FnMut(&[u32]),
) -> Swept {
    let root = Path::new("/");
    let mut ending = if termed {
        Ending::after_term(Instant::now(), kill_after)
    } else {
        Ending::new(kill_after)
    };
    let mut swept = Swept::default();
    loop {
        // Members whose parent has gone are the launcher's now (a subreaper): reaped, they
        // stop counting; a zombie holds nothing but its pid.
        subreaper::reap_adopted();
        let members = scan(root, wanted);
        let pids: Vec<u32> = members.iter().map(|m| m.pid).collect();
        if swept.found.is_empty() && !pids.is_empty() {
            found(&pids);
            swept.found = pids.clone();
        }
        match ending.step(Instant::now(), !pids.is_empty()) {
            Step::Done => return swept,
            Step::GaveUp => {
                swept.left = pids;
                return swept;
            }
            Step::Signal(sig, wait) => {
                swept.killed |= sig == Sig::Kill;
                send(wanted, &members, sig);
                std::thread::sleep(wait);
            }
            Step::Wait(wait) => std::thread::sleep(wait),
        }
    }
}

/// `sig` to each group with a member left, and to each member outside the groups.
fn send(wanted: &Wanted, members: &[Stat], sig: Sig) {
    let signal = sig.signal();
    for &group in &wanted.groups {
        if members.iter().any(|m| m.pgid == group) {
            if let Ok(g) = i32::try_from(group) {
                // ESRCH: the group emptied since the look; nothing to do.
                let _ = kill(Pid::from_raw(-g), signal);
            }
        }
    }
    for m in members.iter().filter(|m| !wanted.groups.contains(&m.pgid)) {
        if let Ok(p) = i32::try_from(m.pid) {
            let _ = kill(Pid::from_raw(p), signal);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::members::Mark;
    use std::collections::BTreeSet;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    /// A real process group: `sh` leading it and a `sleep` inside, both ended by one sweep.
    #[test]
    fn a_group_is_ended_with_sigterm_and_nothing_else_is_touched() {
        let mut leader = Command::new("sh")
            .args(["-c", "sleep 300 & wait"])
            .process_group(0)
            .spawn()
            .expect("sh");
        let mut bystander = Command::new("sleep")
            .arg("300")
            .process_group(0)
            .spawn()
            .expect("sleep");
        let wanted = Wanted {
            groups: BTreeSet::from([leader.id()]),
            mark: Mark::None,
            except: vec![],
        };
        // The group has its two members once sh has forked.
        let t0 = Instant::now();
        while scan(Path::new("/"), &wanted).len() < 2 {
            assert!(t0.elapsed() < Duration::from_secs(10), "sh never forked");
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut seen = Vec::new();
        let swept = end(&wanted, Duration::from_secs(10), false, |p| {
            seen = p.to_vec()
        });
        // sh was the test's child: reap it here (the sweep reaps only adopted ones).
        let _ = leader.wait();
        assert_eq!(swept.found.len(), 2, "{swept:?}");
        assert_eq!(seen, swept.found);
        assert!(!swept.killed, "SIGTERM was enough: {swept:?}");
        assert!(swept.left.is_empty());
        assert!(scan(Path::new("/"), &wanted).is_empty());
        assert_eq!(
            bystander.try_wait().ok().flatten(),
            None,
            "another group is left alone"
        );
        let _ = bystander.kill();
        let _ = bystander.wait();
    }
}
