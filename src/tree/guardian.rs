//! The launcher's side of its guardian: a small process (this binary, run as
//! `fhircluster-guardian`) that ends the cluster's processes should the launcher die without
//! stopping them — killed with `SIGKILL`, by the OOM killer, or by a crash. It holds the read end
//! of a pipe whose write end only the launcher has: the kernel closes that end however the
//! launcher dies, and the guardian's read then ends. It needs nothing from the children and
//! nothing from the host (no cgroup, no systemd), so it works the same everywhere.
//!
//! The launcher tells it each process group as a child starts (`+<pgid>`) and once that child's
//! group has ended (`-<pgid>`), one line each; the guardian also finds what carries the run's
//! mark (`members`). The write end is close-on-exec and non-blocking: no child inherits it, and
//! a guardian that stops reading (stopped by a debugger) can never block the launcher. An
//! in-place upgrade that `execve`s the launcher must clear its close-on-exec first ([`fd`]) so
//! the guardian sees no EOF and the children live on.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use tracing::warn;

use super::subreaper;

/// The name the guardian runs under (its `argv[0]`), which `main` recognises.
pub const NAME: &str = "fhircluster-guardian";

struct Inner {
    pipe: File,
    /// `None` for a guardian taken over in an in-place upgrade (started by the program before;
    /// still this process's child, reaped by the subreaper when it ends).
    child: Option<Child>,
    pid: u32,
    /// The groups told so far, replayed to a new guardian should this one go.
    groups: BTreeSet<u32>,
    kill_after: Duration,
    run: String,
    /// Guardians started after the first; past [`MAX_RESPAWNS`] there is none.
    respawns: u32,
}

/// A guardian that keeps going at once is not started again and again.
const MAX_RESPAWNS: u32 = 3;

static GUARDIAN: OnceLock<Mutex<Inner>> = OnceLock::new();

/// Starts the guardian for this run (`run`, the run's mark); returns its pid.
pub fn start(kill_after: Duration, run: &str) -> io::Result<u32> {
    let (pipe, child) = spawn(kill_after, run)?;
    let pid = child.id();
    let inner = Inner {
        pipe,
        child: Some(child),
        pid,
        groups: BTreeSet::new(),
        kill_after,
        run: run.to_string(),
        respawns: 0,
    };
    GUARDIAN
        .set(Mutex::new(inner))
        .map_err(|_| io::Error::other("the guardian was started already"))?;
    Ok(pid)
}

fn spawn(kill_after: Duration, run: &str) -> io::Result<(File, Child)> {
    // Its own path when it still exists; /proc/self/exe when the binary was replaced on disk.
    let exe = std::env::current_exe()
        .ok()
        .filter(|p| p.exists())
        .unwrap_or_else(|| "/proc/self/exe".into());
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(io::Error::from)?;
    let flags = OFlag::from_bits_truncate(fcntl(write.as_raw_fd(), FcntlArg::F_GETFL)?);
    fcntl(
        write.as_raw_fd(),
        FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK),
    )?;
    let mut cmd = Command::new(exe);
    cmd.arg0(NAME)
        .arg(std::process::id().to_string())
        .arg(kill_after.as_millis().min(u128::from(u64::MAX)).to_string())
        .arg(run)
        .stdin(Stdio::from(read))
        .stdout(Stdio::null())
        // Its own group: a Ctrl-C, or a signal to the launcher's group, doesn't reach it.
        .process_group(0);
    for var in crate::ops::notify::NOTIFY_ENV {
        cmd.env_remove(var);
    }
    let child = subreaper::spawn_known(|| {
        let c = cmd.spawn()?;
        let pid = c.id();
        Ok((c, pid))
    })?;
    Ok((File::from(write), child))
}

/// The guardian's pid (`None` without one).
pub fn pid() -> Option<u32> {
    let g = GUARDIAN.get()?.lock().unwrap_or_else(|e| e.into_inner());
    Some(g.pid)
}

/// The guardian as an in-place upgrade hands it over: its pid, the fd of its pipe (kept open
/// here until the `execve`) and the groups it was told.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GuardianState {
    pub pid: u32,
    pub fd: i32,
    pub groups: Vec<u32>,
    pub respawns: u32,
}

pub(crate) fn hand_over() -> Option<GuardianState> {
    let g = GUARDIAN.get()?.lock().unwrap_or_else(|e| e.into_inner());
    Some(GuardianState {
        pid: g.pid,
        fd: g.pipe.as_raw_fd(),
        groups: g.groups.iter().copied().collect(),
        respawns: g.respawns,
    })
}

/// Takes over the guardian the program before started (`pipe`: its inherited write end).
pub(crate) fn resume(
    s: &GuardianState,
    pipe: std::os::fd::OwnedFd,
    kill_after: Duration,
    run: &str,
) {
    let inner = Inner {
        pipe: File::from(pipe),
        child: None,
        pid: s.pid,
        groups: s.groups.iter().copied().collect(),
        kill_after,
        run: run.to_string(),
        respawns: s.respawns,
    };
    let _ = GUARDIAN.set(Mutex::new(inner));
}

/// A child leading process group `pgid` has started.
pub fn watch(pgid: u32) {
    tell(pgid, true);
}

/// The group `pgid` has ended.
pub fn unwatch(pgid: u32) {
    tell(pgid, false);
}

fn tell(pgid: u32, add: bool) {
    let Some(g) = GUARDIAN.get() else { return };
    let mut g = g.lock().unwrap_or_else(|e| e.into_inner());
    if add {
        g.groups.insert(pgid);
    } else {
        g.groups.remove(&pgid);
    }
    if g.respawns > MAX_RESPAWNS {
        return;
    }
    let line = format!("{}{pgid}\n", if add { '+' } else { '-' });
    // Shorter than PIPE_BUF: written whole or not at all.
    if g.pipe.write_all(line.as_bytes()).is_ok() {
        return;
    }
    respawn(&mut g);
}

/// The guardian has gone (or stopped reading): start another and tell it every group.
fn respawn(g: &mut Inner) {
    let old = g.pid;
    let status = match g.child.as_mut().map(Child::try_wait) {
        Some(Ok(Some(s))) => s.to_string(),
        Some(_) => "not reading".to_string(),
        None => "gone or not reading".to_string(),
    };
    g.respawns += 1;
    if g.respawns > MAX_RESPAWNS {
        warn!(
            "the guardian (pid {old}) is gone ({status}), the {}th time: no guardian any more; \
             a launcher killed with SIGKILL may now leave processes behind",
            g.respawns
        );
        return;
    }
    match spawn(g.kill_after, &g.run) {
        Ok((pipe, child)) => {
            let replay: String = g.groups.iter().map(|p| format!("+{p}\n")).collect();
            let mut pipe = pipe;
            let _ = pipe.write_all(replay.as_bytes());
            g.pid = child.id();
            let old_child = g.child.replace(child);
            g.pipe = pipe;
            warn!(
                "the guardian (pid {old}) is gone ({status}); started another (pid {})",
                g.pid
            );
            if let Some(old_child) = old_child {
                reap_later(old_child);
            }
        }
        Err(e) => warn!(
            "the guardian (pid {old}) is gone ({status}) and cannot be started again ({e}): \
             a launcher killed with SIGKILL may now leave processes behind"
        ),
    }
}

/// The old guardian is waited for (so it leaves no zombie) off the caller's thread: one that
/// stopped reading may take its time.
fn reap_later(mut old: Child) {
    let pid = old.id();
    let _ = old.kill();
    std::thread::spawn(move || {
        let _ = old.wait();
        subreaper::forget(pid);
    });
}
