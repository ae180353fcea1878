//! This run of the launcher and its processes: the run's mark (what every child's
//! `FHIRCLUSTER_TREE` begins with), the launcher as a subreaper, the guardian, and the sweep at
//! exit. [`start`] comes before any process is started; [`finish`] after the last has stopped.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use tracing::{error, info, warn};

use super::members::{self, Mark, Wanted};
use super::{guardian, subreaper, sweep};
use crate::system::listen;

/// This run's settings, set by [`start`].
#[derive(Debug)]
pub struct Run {
    /// Unique to this run: the launcher's pid and its start time.
    pub mark: String,
    pub kill_after: Duration,
}

static RUN: OnceLock<Run> = OnceLock::new();

/// The run, once [`start`] has been called (never in unit tests of the supervisor).
pub fn current() -> Option<&'static Run> {
    RUN.get()
}

/// Makes the launcher a subreaper and starts its guardian. What can't be done is one log line
/// saying what is then not covered; the launcher runs on.
pub fn start(kill_after: Duration) {
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let run = RUN.get_or_init(|| Run {
        mark: format!("{}.{started}", std::process::id()),
        kill_after,
    });
    if let Err(e) = subreaper::become_subreaper() {
        warn!(
            "cannot become the processes' subreaper ({e}): a process whose parent exits inside \
             the cluster goes to init, out of the launcher's sight"
        );
    }
    match guardian::start(run.kill_after, &run.mark) {
        Ok(pid) => {
            info!("guardian pid {pid}: stops the processes should the launcher be killed (SIGKILL)")
        }
        Err(e) => error!(
            "no guardian ({e}): trying again at once, then backing off; until one runs, a \
             launcher killed with SIGKILL leaves to PR_SET_PDEATHSIG alone to stop its \
             processes (a server under a wrapper shell without exec may outlive it)"
        ),
    }
}

/// This run, taken over in an in-place upgrade: the same mark (the children carry it), the
/// launcher a subreaper again (kept across `execve`, said again so adopted processes are
/// reaped), and the guardian the program before started, over its inherited pipe.
pub(crate) fn resume(
    mark: &str,
    kill_after: Duration,
    guardian_state: Option<(&guardian::GuardianState, std::os::fd::OwnedFd)>,
) {
    let run = RUN.get_or_init(|| Run {
        mark: mark.to_string(),
        kill_after,
    });
    if let Err(e) = subreaper::become_subreaper() {
        warn!("cannot become the processes' subreaper again ({e})");
    }
    match guardian_state {
        Some((s, pipe)) => guardian::resume(s, pipe, run.kill_after, &run.mark),
        // The program before had none (none could be started): this one starts one, or keeps
        // trying.
        None => {
            if let Err(e) = guardian::start(run.kill_after, &run.mark) {
                error!("no guardian ({e}): trying again at once, then backing off");
            }
        }
    }
}

/// After the last process has stopped: anything still below the launcher (a process that left
/// its group and dropped its mark, adopted by the launcher) is ended too, so an exit means
/// nothing is left. Blocks (up to `killSeconds` and a grace) when there is something.
pub fn finish() {
    let Some(run) = current() else { return };
    let me = std::process::id();
    let guardian = guardian::pid();
    let root = Path::new("/");
    let except: Vec<u32> = std::iter::once(me).chain(guardian).collect();
    let own_group = nix::unistd::getpgrp().as_raw() as u32;
    let guardian_group = guardian.unwrap_or(0);
    let groups: BTreeSet<u32> = listen::family(root, me)
        .into_iter()
        .filter(|p| !except.contains(p))
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            members::parse_stat(p, &stat).map(|s| s.pgid)
        })
        // Never the launcher's own group (its parent's too), nor the guardian's.
        .filter(|&g| g != own_group && g != guardian_group && g > 1)
        .collect();
    let wanted = Wanted {
        groups,
        mark: Mark::Run(run.mark.clone()),
        except,
    };
    let swept = sweep::end(&wanted, run.kill_after, false, |pids| {
        warn!(
            "still running after every process stopped: {}; stopping them",
            members::describe(root, pids, 8)
        );
    });
    if !swept.left.is_empty() {
        warn!(
            "still running after SIGKILL, given up: {}",
            members::describe(root, &swept.left, 8)
        );
    }
}
