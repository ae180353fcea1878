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
//! a guardian that stops reading (stopped by a debugger) can never block the launcher: it is
//! killed instead, and replaced. An in-place upgrade that `execve`s the launcher must clear its
//! close-on-exec first so the guardian sees no EOF and the children live on.
//!
//! The launcher is never left without a guardian unawares: its end is watched (`guardian_watch`,
//! by its pidfd) and it is replaced at once, the new one told every group ([`replace`]); one
//! WARNING line says which ended, how, and which replaced it. While the state is being handed to
//! an upgrade, the pipe's fd is named in it, so no replacement (which would close that fd) is
//! made until [`HANDOVER_WINDOW`] has passed: by then the `execve` took place (the new program
//! watches the guardian it was handed, its child still) or failed and this program serves on.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use tracing::warn;

use super::subreaper;

/// The name the guardian runs under (its `argv[0]`), which `main` recognises.
pub const NAME: &str = "fhircluster-guardian";

/// After the state was handed to an upgrade, how long a guardian that ended waits to be
/// replaced: the `execve` follows the handover at once (a few ms); past this it has failed.
pub(crate) const HANDOVER_WINDOW: Duration = Duration::from_secs(2);

/// The guardian that runs: the write end of its pipe, and its pid.
struct Running {
    pipe: File,
    pid: u32,
}

struct Inner {
    /// `None` while none could be started: its watch keeps trying.
    now: Option<Running>,
    /// When it was started (a guardian taken over in an upgrade: when it was taken over).
    started: Instant,
    /// The groups told so far, replayed to a new guardian should this one go.
    groups: BTreeSet<u32>,
    kill_after: Duration,
    run: String,
    /// Guardians started after the first, over every program of the run.
    respawns: u32,
    /// It stopped reading and was killed for it (said when it is replaced).
    stuck: bool,
    /// When the state was handed to an upgrade (its pipe's fd named in it).
    handed: Option<Instant>,
}

static GUARDIAN: OnceLock<Mutex<Inner>> = OnceLock::new();

fn lock() -> Option<std::sync::MutexGuard<'static, Inner>> {
    Some(GUARDIAN.get()?.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Starts the guardian for this run (`run`, the run's mark); returns its pid. Should it fail,
/// its watch (`guardian_watch`) keeps trying, from the runtime's start.
pub fn start(kill_after: Duration, run: &str) -> io::Result<u32> {
    let (now, started) = match spawn_unless_refused(kill_after, run) {
        Ok((pipe, pid)) => (Some(Running { pipe, pid }), Ok(pid)),
        Err(e) => (None, Err(e)),
    };
    let inner = Inner {
        now,
        started: crate::clock::now_std(),
        groups: BTreeSet::new(),
        kill_after,
        run: run.to_string(),
        respawns: 0,
        stuck: false,
        handed: None,
    };
    GUARDIAN
        .set(Mutex::new(inner))
        .map_err(|_| io::Error::other("the guardian was started already"))?;
    started
}

fn spawn_unless_refused(kill_after: Duration, run: &str) -> io::Result<(File, u32)> {
    match crate::test_hooks::guardian_refusal() {
        Some(e) => Err(e),
        None => spawn(kill_after, run),
    }
}

/// A guardian started: the write end of its pipe, and its pid (registered with the subreaper:
/// its exit is `guardian_watch`'s to reap, by pid).
fn spawn(kill_after: Duration, run: &str) -> io::Result<(File, u32)> {
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
    for var in crate::tree::members::NOTIFY_ENV {
        cmd.env_remove(var);
    }
    // Waited for by pid (`guardian_watch`), like a guardian taken over in an upgrade; dropping
    // the `Child` neither kills nor waits.
    let pid = subreaper::spawn_known(|| {
        let c = cmd.spawn()?;
        let pid = c.id();
        Ok((pid, pid))
    })?;
    Ok((File::from(write), pid))
}

/// The guardian's pid (`None` without one).
pub fn pid() -> Option<u32> {
    lock()?.now.as_ref().map(|r| r.pid)
}

/// The guardian to watch: its pid (`None`: none could be started) and when it was started;
/// `None` when this launcher has none to keep (it was never started).
pub(crate) fn current() -> Option<(Option<u32>, Instant)> {
    lock().map(|g| (g.now.as_ref().map(|r| r.pid), g.started))
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

/// The state for an upgrade; from now until [`HANDOVER_WINDOW`] has passed the guardian is not
/// replaced here (its fd must stay the one the state names).
pub(crate) fn hand_over() -> Option<GuardianState> {
    let mut g = lock()?;
    g.handed = Some(crate::clock::now_std());
    let r = g.now.as_ref()?;
    Some(GuardianState {
        pid: r.pid,
        fd: r.pipe.as_raw_fd(),
        groups: g.groups.iter().copied().collect(),
        respawns: g.respawns,
    })
}

/// Takes over the guardian the program before started (`pipe`: its inherited write end). It is
/// this process's child still: its exit is watched and reaped by pid, not by the subreaper.
pub(crate) fn resume(
    s: &GuardianState,
    pipe: std::os::fd::OwnedFd,
    kill_after: Duration,
    run: &str,
) {
    subreaper::known(s.pid);
    let inner = Inner {
        now: Some(Running {
            pipe: File::from(pipe),
            pid: s.pid,
        }),
        started: crate::clock::now_std(),
        groups: s.groups.iter().copied().collect(),
        kill_after,
        run: run.to_string(),
        respawns: s.respawns,
        stuck: false,
        handed: None,
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
    let Some(mut g) = lock() else { return };
    if add {
        g.groups.insert(pgid);
    } else {
        g.groups.remove(&pgid);
    }
    let stuck = g.stuck;
    // None running: its watch starts one and tells it every group.
    let Some(r) = g.now.as_mut() else { return };
    let line = format!("{}{pgid}\n", if add { '+' } else { '-' });
    // Shorter than PIPE_BUF: written whole or not at all.
    match r.pipe.write_all(line.as_bytes()) {
        Ok(()) => {}
        // Its pipe is full: it has stopped reading (stopped, or stuck). Killed, it is replaced
        // by its watch like any guardian that ends, and the new one is told every group.
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            if !stuck {
                if let Ok(p) = i32::try_from(r.pid) {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(p),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                g.stuck = true;
            }
        }
        // It has gone (EPIPE): its watch replaces it and tells the new one every group, this
        // one included.
        Err(_) => {}
    }
}

/// How [`replace`] went.
#[derive(Debug)]
pub(crate) enum Replaced {
    /// Another guardian runs, told every group (or `old` had been replaced already).
    Done,
    /// Not now: the state was handed to an upgrade; ask again after this long.
    Later(Duration),
    /// No guardian could be started.
    Failed(io::Error),
}

/// The guardian `old` has ended (`end`: how, as `process::Exit` says it), or none could be
/// started (`old` `None`): another is started and told every group, and one WARNING line says
/// so.
pub(crate) fn replace(old: Option<u32>, end: &str, now: Instant) -> Replaced {
    let Some(mut g) = lock() else {
        return Replaced::Done;
    };
    if g.now.as_ref().map(|r| r.pid) != old {
        return Replaced::Done;
    }
    if let Some(at) = g.handed {
        let until = at + HANDOVER_WINDOW;
        if now < until {
            return Replaced::Later(until - now);
        }
        // The `execve` did not take place: this program serves on and may replace it.
        g.handed = None;
    }
    let (mut pipe, pid) = match spawn_unless_refused(g.kill_after, &g.run) {
        Ok(started) => started,
        Err(e) => return Replaced::Failed(e),
    };
    let replay: String = g.groups.iter().map(|p| format!("+{p}\n")).collect();
    // A new pipe holds 64 KiB, some 8,000 groups: this is written whole. Should it not be, the
    // next `tell` finds the guardian not reading and it is replaced again.
    let told = pipe.write_all(replay.as_bytes());
    let why = if std::mem::take(&mut g.stuck) {
        ", killed: it had stopped reading"
    } else {
        ""
    };
    g.now = Some(Running { pipe, pid });
    g.started = now;
    g.respawns = g.respawns.saturating_add(1);
    let groups = g.groups.len();
    let gone = match old {
        Some(old) => format!("the guardian (pid {old}) is gone ({end}{why}); started another"),
        None => "no guardian could be started before; started one".to_string(),
    };
    match told {
        Ok(()) => warn!("{gone} (pid {pid}), told every process group ({groups})"),
        Err(e) => {
            warn!("{gone} (pid {pid}), but telling it every process group ({groups}) failed ({e})")
        }
    }
    Replaced::Done
}
