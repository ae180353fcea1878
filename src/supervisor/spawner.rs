//! The one thread every FHIRsmith process is started from. A child's `PR_SET_PDEATHSIG`
//! (`ipc::channel::prepare_child`) fires when the *thread* that forked it exits, not the
//! process: a child forked from a runtime worker would get `SIGTERM` should that worker end,
//! and `execve` ends every thread but its caller. So every fork happens on one thread that
//! lives as long as the launcher, and the in-place upgrade's `execve` is run there too
//! ([`on_spawner`]): the thread the children are tied to is the one that carries on as the
//! new program. That thread is the process's main thread ([`serve_here`]: the launcher runs its
//! runtime on another), because `execve` makes its caller the main thread of the new program:
//! the children of every program, before and after any number of upgrades, are tied to it.
//! (Without `serve_here`, as in unit tests, a thread of its own is started on first use.)
//!
//! A spawn is a round trip to this thread and back, as long as the fork and exec it waits for
//! (the same wait as forking on the caller's thread).

use std::io;
use std::sync::mpsc::{sync_channel, Sender};
use std::sync::{Mutex, OnceLock};

type Job = Box<dyn FnOnce() + Send>;

static SPAWNER: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();

/// The thread's name (seen in `/proc/<pid>/task/*/comm`).
const NAME: &str = "fhircluster-spawn";

fn sender() -> io::Result<Sender<Job>> {
    if let Some(s) = SPAWNER.get() {
        return Ok(s.lock().unwrap_or_else(|e| e.into_inner()).clone());
    }
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    let started = SPAWNER.set(Mutex::new(tx));
    if started.is_ok() {
        std::thread::Builder::new()
            .name(NAME.into())
            .spawn(move || {
                // Lives as long as the process: the sender is never dropped (a static).
                while let Ok(job) = rx.recv() {
                    job();
                }
            })?;
    }
    // Lost a race to start it: the winner's thread is used.
    let s = SPAWNER
        .get()
        .ok_or_else(|| io::Error::other("no spawner thread"))?;
    Ok(s.lock().unwrap_or_else(|e| e.into_inner()).clone())
}

/// Makes the calling thread (the main thread) the spawner while `work` runs on a thread of its
/// own; returns `work`'s result. Call once, before anything is spawned.
pub(crate) fn serve_here<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> io::Result<T> {
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    if SPAWNER.set(Mutex::new(tx.clone())).is_err() {
        return Ok(work());
    }
    let (done_tx, done_rx) = sync_channel(1);
    std::thread::Builder::new()
        .name("fhircluster".into())
        // As much stack as a main thread has.
        .stack_size(8 << 20)
        .spawn(move || {
            let _ = done_tx.send(work());
            // Wakes the loop below to see it is done.
            let _ = tx.send(Box::new(|| {}));
        })?;
    loop {
        let job = rx
            .recv()
            .map_err(|_| io::Error::other("the spawner's queue has gone"))?;
        job();
        if let Ok(out) = done_rx.try_recv() {
            return Ok(out);
        }
    }
}

/// Runs `job` on the spawner thread and gives its result. Blocks the caller until it is done:
/// keep jobs short (a fork, an exec). Never call it from a job (it would wait for itself).
pub(crate) fn on_spawner<T: Send + 'static>(
    job: impl FnOnce() -> T + Send + 'static,
) -> io::Result<T> {
    let (done_tx, done_rx) = sync_channel(1);
    sender()?
        .send(Box::new(move || {
            let _ = done_tx.send(job());
        }))
        .map_err(|_| io::Error::other("the spawner thread has gone"))?;
    done_rx
        .recv()
        .map_err(|_| io::Error::other("the spawner thread dropped a job (it panicked)"))
}

/// Starts `cmd` from the spawner thread; `cmd` (and so any fd its `pre_exec` holds, such as
/// the child's end of its channel) is dropped there once the child has started.
pub(crate) fn spawn(
    mut cmd: std::process::Command,
    known: impl FnOnce(&mut std::process::Command) -> io::Result<std::process::Child> + Send + 'static,
) -> io::Result<std::process::Child> {
    on_spawner(move || {
        let child = known(&mut cmd);
        drop(cmd);
        child
    })?
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};

    use super::*;

    /// A child that gets SIGTERM when the thread that forked it exits (as every FHIRsmith
    /// process does).
    #[allow(unsafe_code)] // a test's own child
    fn sleeper() -> std::process::Command {
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("30");
        // SAFETY: prctl with integer arguments only, between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGTERM as libc::c_ulong,
                    0,
                    0,
                    0,
                ) == -1
                {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd
    }

    fn gone(child: &mut std::process::Child, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn a_child_started_through_the_spawner_outlives_the_thread_that_asked_for_it() {
        // From a short-lived thread: one child forked there (the control), one through the
        // spawner. Both have PR_SET_PDEATHSIG; the thread then ends.
        let (mut control, mut ours) = std::thread::spawn(|| {
            let control = sleeper().spawn().expect("spawn sleep");
            let ours = spawn(sleeper(), |c| c.spawn()).expect("spawn sleep via the spawner");
            (control, ours)
        })
        .join()
        .expect("thread");
        // The control proves the signal fires on this host when the forking thread ends...
        assert!(
            gone(&mut control, Duration::from_secs(10)),
            "the control child, forked on the ended thread, should have had SIGTERM"
        );
        // ...and by then ours would have had it too, had it been forked there.
        let alive = ours.try_wait().expect("try_wait").is_none();
        let _ = ours.kill();
        let _ = ours.wait();
        assert!(alive, "the child started by the spawner thread was killed");
    }

    #[test]
    fn every_job_runs_on_the_same_named_thread() {
        let a = on_spawner(|| std::thread::current().id()).expect("job");
        let b = std::thread::spawn(|| on_spawner(|| std::thread::current().id()).expect("job"))
            .join()
            .expect("thread");
        assert_eq!(a, b);
        let name = on_spawner(|| std::thread::current().name().map(str::to_string)).expect("job");
        assert_eq!(name.as_deref(), Some(NAME));
    }
}
