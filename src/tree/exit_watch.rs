//! Waiting for a child's exit by its pid alone, so it works the same for a child this program
//! forked and for one it took over from the program it replaced (an in-place upgrade keeps the
//! FHIRsmith processes, which then have no `Child` handle here). A `pidfd` (Linux 5.3+) becomes
//! readable when the process exits; without one, each `SIGCHLD` (and a slow tick, should one be
//! missed) triggers a `waitpid(pid, WNOHANG)`. Either way the child is reaped here, by pid, and
//! only here: the subreaper (`tree::subreaper`) leaves the launcher's own children alone.

use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use tokio::io::unix::AsyncFd;

use crate::process::Exit;

/// Without a pidfd: how often to look even when no `SIGCHLD` came (they coalesce).
const FALLBACK_TICK: Duration = Duration::from_secs(1);

/// Waits until child `pid` (of this process) has exited, and reaps it.
pub(crate) async fn exited(pid: u32) -> Exit {
    let Ok(raw) = i32::try_from(pid) else {
        return Exit::Code(-1);
    };
    match pidfd_open(raw).and_then(watch) {
        Ok(fd) => loop {
            if let Some(exit) = reap(raw) {
                return exit;
            }
            match fd.readable().await {
                Ok(mut guard) => guard.clear_ready(),
                // The reactor can't watch it: look by signal instead.
                Err(_) => return by_sigchld(raw).await,
            }
        },
        Err(_) => by_sigchld(raw).await,
    }
}

async fn by_sigchld(pid: i32) -> Exit {
    use tokio::signal::unix::{signal, SignalKind};
    let mut sigchld = signal(SignalKind::child()).ok();
    let mut tick = tokio::time::interval(FALLBACK_TICK);
    loop {
        if let Some(exit) = reap(pid) {
            return exit;
        }
        match sigchld.as_mut() {
            Some(s) => {
                tokio::select! {
                    _ = s.recv() => {}
                    _ = tick.tick() => {}
                }
            }
            None => {
                tick.tick().await;
            }
        }
    }
}

/// `Some` once `pid` has exited (and is now reaped); `None` while it runs.
fn reap(pid: i32) -> Option<Exit> {
    match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::Exited(_, code)) => Some(Exit::Code(code)),
        Ok(WaitStatus::Signaled(_, sig, _)) => Some(Exit::Signal(sig as i32)),
        Ok(_) => None,
        Err(nix::errno::Errno::EINTR) => None,
        // Not our child (any more): nothing to wait for; how it ended is unknown.
        Err(_) => Some(Exit::Code(-1)),
    }
}

fn watch(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    crate::system::ffi::watch_readable(fd)
}

fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    crate::system::ffi::pidfd_open(pid)
}

/// Whether child `pid` has exited, without reaping it (`WNOWAIT`: its exit stays for
/// [`exited`] to take). Not a child of this process (any more) counts as ended.
pub(crate) fn has_ended(pid: u32) -> bool {
    match crate::system::ffi::child_has_exited(pid) {
        Ok(exited) => exited,
        Err(e) => e.raw_os_error() != Some(libc::EINTR),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(script: &str) -> u32 {
        std::process::Command::new("sh")
            .args(["-c", script])
            .spawn()
            .expect("spawn sh")
            .id()
    }

    #[tokio::test]
    async fn an_exit_code_and_a_signal_are_told_apart() {
        assert_eq!(exited(start("exit 3")).await, Exit::Code(3));
        assert_eq!(exited(start("kill -TERM $$")).await, Exit::Signal(15));
    }

    #[tokio::test]
    async fn without_a_pidfd_the_exit_is_found_by_sigchld() {
        let pid = start("sleep 0.2; exit 4");
        let exit = tokio::time::timeout(Duration::from_secs(20), by_sigchld(pid as i32))
            .await
            .expect("the exit was not seen within 20 s");
        assert_eq!(exit, Exit::Code(4));
    }

    #[tokio::test]
    async fn has_ended_looks_without_reaping() {
        // #25: the upgrade's last look at each process must leave its exit to be reported.
        let pid = start("exec sleep 30");
        assert!(!has_ended(pid), "a running child");
        let _ = kill(pid, libc::SIGKILL);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !has_ended(pid) {
            assert!(std::time::Instant::now() < deadline, "never seen to end");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(has_ended(pid), "still ended: not reaped by looking");
        assert_eq!(exited(pid).await, Exit::Signal(libc::SIGKILL));
        assert!(has_ended(pid), "reaped: not a child any more");
    }

    #[allow(unsafe_code)] // a test's own child
    fn kill(pid: u32, sig: i32) -> i32 {
        // SAFETY: a plain kill(2) on this test's own child.
        unsafe { libc::kill(pid as i32, sig) }
    }

    #[tokio::test]
    async fn a_pid_that_is_not_a_child_ends_the_wait_at_once() {
        // pid 1 is never this test's child.
        assert_eq!(exited(1).await, Exit::Code(-1));
    }
}
