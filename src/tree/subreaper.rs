//! The launcher as a child subreaper (`PR_SET_CHILD_SUBREAPER`): a process whose parent exits
//! inside the cluster (a server under a wrapper shell that died, a helper a crashed server
//! started) is re-parented to the launcher instead of to init, so it stays in the launcher's tree
//! where the launcher can find and end it.
//!
//! A subreaper must reap what it adopts, or the adopted stay zombies. Tokio reaps the children it
//! started (by pid), so reaping with `waitpid(-1)` would steal their exit statuses. Instead the
//! launcher's own children are registered as they are spawned ([`spawn_known`], which holds the
//! registry across the fork so a scan can't see a child before it is registered), and
//! [`reap_adopted`] waits, by pid, only for the children that aren't registered.

use std::collections::BTreeSet;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;

use crate::system::listen;

/// The launcher's own children (started by it, waited for by their owners).
static KNOWN: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());
/// Set once this process is a subreaper: only then is anything adopted (and reaped).
static ADOPTING: AtomicBool = AtomicBool::new(false);

/// Makes this process a child subreaper. Kept across `execve`; not inherited by children.
pub fn become_subreaper() -> io::Result<()> {
    crate::system::ffi::set_child_subreaper()?;
    ADOPTING.store(true, Ordering::Release);
    Ok(())
}

/// Runs `spawn` (which starts one child and gives its pid) with the registry held, and registers
/// the pid, so [`reap_adopted`] never takes the child for an adopted one.
pub fn spawn_known<T>(spawn: impl FnOnce() -> io::Result<(T, u32)>) -> io::Result<T> {
    let mut known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    let (child, pid) = spawn()?;
    known.insert(pid);
    Ok(child)
}

/// `pid` is one of the launcher's own children (one taken over in an in-place upgrade).
pub fn known(pid: u32) {
    KNOWN.lock().unwrap_or_else(|e| e.into_inner()).insert(pid);
}

/// The child `pid` has been waited for by its owner.
pub fn forget(pid: u32) {
    KNOWN.lock().unwrap_or_else(|e| e.into_inner()).remove(&pid);
}

/// Reaps every adopted child that has exited; returns how many. A no-op unless this process is
/// a subreaper (a test process's children are its tests' own).
pub fn reap_adopted() -> usize {
    if !ADOPTING.load(Ordering::Acquire) {
        return 0;
    }
    let known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    let mut reaped = 0;
    for pid in listen::children(Path::new("/"), std::process::id()) {
        if known.contains(&pid) {
            continue;
        }
        let Ok(p) = i32::try_from(pid) else { continue };
        match waitpid(Pid::from_raw(p), Some(WaitPidFlag::WNOHANG)) {
            Ok(nix::sys::wait::WaitStatus::StillAlive) | Err(_) => {}
            Ok(_) => reaped += 1,
        }
    }
    reaped
}

/// Reaps adopted children each time one of this process's children changes state (`SIGCHLD`),
/// for as long as the runtime runs. Call once, inside the runtime.
pub fn reap_on_sigchld() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut sigchld) = signal(SignalKind::child()) else {
        return;
    };
    tokio::spawn(async move {
        while sigchld.recv().await.is_some() {
            let _ = tokio::task::spawn_blocking(reap_adopted).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_reaped_by_a_process_that_is_not_a_subreaper() {
        // The unit tests' process never becomes one: its children are its tests' own.
        assert!(!ADOPTING.load(Ordering::Acquire));
        assert_eq!(reap_adopted(), 0);
    }

    #[test]
    fn a_known_child_is_registered_until_forgotten() {
        let child = spawn_known(|| {
            let c = std::process::Command::new("true").spawn()?;
            let pid = c.id();
            Ok((c, pid))
        })
        .expect("spawn true");
        let pid = child.id();
        assert!(KNOWN.lock().expect("registry").contains(&pid));
        let mut child = child;
        let _ = child.wait();
        forget(pid);
        assert!(!KNOWN.lock().expect("registry").contains(&pid));
    }
}
