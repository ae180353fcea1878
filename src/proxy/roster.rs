//! The roster: which processes are in the cluster now, which are ready, their pids, how many
//! times each has gone down. The supervisor's news (`supervisor::Hooks`, through `Front`), kept
//! where a request reads it without a lock, and what the launcher follows of it
//! ([`RosterNews`], a watch).
//!
//! Its tables are made once, for every process the launcher could run (the worker count may move
//! on reload within that capacity), so a request indexes them by `ProcessId`; `present` says
//! which of them are in the cluster now.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use crate::process::{Ending, ProcessId, ProcessSpec};

/// What the launcher follows of the roster.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RosterNews {
    /// The master is ready (the first time, the launcher opens `server.port`).
    pub master_ready: bool,
    /// The master's process is running, ready or not (systemd's start timeout is extended while
    /// it loads).
    pub master_alive: bool,
    /// Reloads the supervisor has finished (systemd hears `READY=1` after each).
    pub reloads_finished: u64,
}

pub struct Roster {
    processes: Vec<ProcessSpec>,
    /// Which processes are in the cluster now (the rest of the capacity is unused).
    present: Vec<AtomicBool>,
    /// Which processes are ready (for routing by cache-id and `/readyz`).
    ready: Vec<AtomicBool>,
    /// Read by every master request: an atomic, not the watch's lock.
    master_ready: AtomicBool,
    /// Each ready process's pid (0: none), for the saturation watch.
    pids: Vec<AtomicU32>,
    /// How many times each process has gone down, and a wake-up when one does: a request that
    /// failed on a process can tell whether the process died under it.
    downs: Vec<AtomicU64>,
    went_down: Notify,
    /// How each process last exited, with its count of downs then (the run it ended): a
    /// request that failed on it reads whether it may have been the cause (DEC-73).
    endings: Mutex<Vec<Option<(u64, Ending)>>>,
    news: watch::Sender<RosterNews>,
}

fn atomics<T>(n: usize, make: impl Fn(usize) -> T) -> Vec<T> {
    (0..n).map(make).collect()
}

impl Roster {
    /// `processes`: every process the launcher could run; `present` says which are in the
    /// cluster at first.
    pub fn new(processes: Vec<ProcessSpec>, present: impl Fn(ProcessId) -> bool) -> Roster {
        let n = processes.len();
        Roster {
            present: processes
                .iter()
                .map(|p| AtomicBool::new(present(p.id)))
                .collect(),
            processes,
            ready: atomics(n, |_| AtomicBool::new(false)),
            master_ready: AtomicBool::new(false),
            pids: atomics(n, |_| AtomicU32::new(0)),
            downs: atomics(n, |_| AtomicU64::new(0)),
            went_down: Notify::new(),
            endings: Mutex::new(vec![None; n]),
            news: watch::Sender::new(RosterNews::default()),
        }
    }

    /// Every process the launcher could run, present or not (index = `ProcessId`).
    pub fn all(&self) -> &[ProcessSpec] {
        &self.processes
    }

    pub fn spec(&self, id: ProcessId) -> Option<&ProcessSpec> {
        self.processes.get(id.index())
    }

    /// The processes in the cluster now, in order.
    pub fn present(&self) -> impl Iterator<Item = &ProcessSpec> {
        self.processes
            .iter()
            .zip(&self.present)
            .filter(|(_, p)| p.load(Ordering::Acquire))
            .map(|(s, _)| s)
    }

    /// Whether the process is in the cluster now.
    pub fn is_present(&self, id: ProcessId) -> bool {
        flag(&self.present, id)
    }

    pub fn master_ready(&self) -> bool {
        self.master_ready.load(Ordering::Acquire)
    }

    /// Whether the process is ready and taking requests.
    pub fn is_ready(&self, id: ProcessId) -> bool {
        flag(&self.ready, id)
    }

    /// Whether any process that takes ordinary tx requests is ready.
    pub fn any_tx_ready(&self) -> bool {
        self.processes
            .iter()
            .zip(&self.ready)
            .any(|(p, r)| p.serves_tx && r.load(Ordering::Acquire))
    }

    pub fn code(&self, id: ProcessId) -> &str {
        self.spec(id).map_or("?", |p| p.code.as_str())
    }

    /// The pid of a ready process.
    pub fn pid(&self, id: ProcessId) -> Option<u32> {
        let pid = self.pids.get(id.index())?.load(Ordering::Acquire);
        (pid != 0).then_some(pid)
    }

    /// How many times `id` has gone down so far (for [`Roster::went_down_since`]).
    pub fn downs(&self, id: ProcessId) -> u64 {
        self.downs
            .get(id.index())
            .map_or(0, |d| d.load(Ordering::Acquire))
    }

    /// Whether `id` goes down (or has gone down) after `downs` was read, waiting up to `within`
    /// for the supervisor to hear of an exit that is under way.
    pub async fn went_down_since(&self, id: ProcessId, downs: u64, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            let notified = self.went_down.notified();
            if self.downs(id) > downs {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.downs(id) > downs;
            }
        }
    }

    /// As [`Roster::went_down_since`], with how it ended when it was by exiting in the run
    /// `downs` was read in (`None`: it did not go down within `within`; `Some(None)`: it went
    /// down some other way, stopped by the launcher or its exit not heard).
    pub async fn ending_since(
        &self,
        id: ProcessId,
        downs: u64,
        within: Duration,
    ) -> Option<Option<Ending>> {
        if !self.went_down_since(id, downs, within).await {
            return None;
        }
        let endings = self.endings.lock().unwrap_or_else(|p| p.into_inner());
        let ended = endings.get(id.index()).copied().flatten();
        Some(ended.filter(|(run, _)| *run == downs).map(|(_, e)| e))
    }

    /// The process exited, so (before it is down: an exit while it is up is in its run).
    pub(super) fn ended(&self, id: ProcessId, how: Ending) {
        let run = self.downs(id);
        let mut endings = self.endings.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = endings.get_mut(id.index()) {
            *e = Some((run, how));
        }
    }

    /// What the launcher follows, from now on.
    pub fn news(&self) -> watch::Receiver<RosterNews> {
        self.news.subscribe()
    }

    /// The process is ready, with this pid.
    pub(super) fn up(&self, id: ProcessId, pid: u32) {
        store(&self.pids, id, pid);
        set(&self.ready, id, true);
        if id.is_master() {
            self.master_ready.store(true, Ordering::Release);
            self.news
                .send_if_modified(|n| !std::mem::replace(&mut n.master_ready, true));
        }
    }

    /// The process is gone or stopping: anyone waiting to hear so is woken.
    pub(super) fn down(&self, id: ProcessId) {
        store(&self.pids, id, 0);
        set(&self.ready, id, false);
        if id.is_master() {
            self.master_ready.store(false, Ordering::Release);
            self.news
                .send_if_modified(|n| std::mem::replace(&mut n.master_ready, false));
        }
        if let Some(d) = self.downs.get(id.index()) {
            d.fetch_add(1, Ordering::AcqRel);
        }
        self.went_down.notify_waiters();
    }

    /// The process is being drained: not ready, though its pid is still its own. A draining
    /// master takes no new request on its paths either: those wait for the next one.
    pub(super) fn draining(&self, id: ProcessId) {
        set(&self.ready, id, false);
        if id.is_master() {
            self.master_ready.store(false, Ordering::Release);
            self.news
                .send_if_modified(|n| std::mem::replace(&mut n.master_ready, false));
        }
    }

    /// The process joins the cluster (true) or leaves it (false).
    pub(super) fn set_present(&self, id: ProcessId, present: bool) {
        set(&self.present, id, present);
    }

    /// The process was started (`true`) or has exited (`false`).
    pub(super) fn running(&self, id: ProcessId, running: bool) {
        if id.is_master() {
            self.news
                .send_if_modified(|n| std::mem::replace(&mut n.master_alive, running) != running);
        }
    }

    /// A reload is over (its rolling restart done or stopped by a failure, or none begun).
    pub(super) fn reload_finished(&self) {
        self.news.send_modify(|n| n.reloads_finished += 1);
    }
}

fn flag(flags: &[AtomicBool], id: ProcessId) -> bool {
    flags
        .get(id.index())
        .is_some_and(|f| f.load(Ordering::Acquire))
}

fn set(flags: &[AtomicBool], id: ProcessId, on: bool) {
    if let Some(f) = flags.get(id.index()) {
        f.store(on, Ordering::Release);
    }
}

fn store(values: &[AtomicU32], id: ProcessId, v: u32) {
    if let Some(a) = values.get(id.index()) {
        a.store(v, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::front::test_front;
    use crate::supervisor::Hooks;

    const M0: ProcessId = ProcessId::MASTER;
    const TX1: ProcessId = ProcessId(1);

    #[test]
    fn the_launcher_follows_the_master_and_the_reloads_through_the_news() {
        let front = test_front(1);
        let mut news = front.roster.news();
        front.started(M0, 10);
        assert!(news.has_changed().unwrap());
        assert_eq!(
            *news.borrow_and_update(),
            RosterNews {
                master_alive: true,
                ..RosterNews::default()
            }
        );
        front.up(TX1, 11);
        assert!(!news.has_changed().unwrap(), "a worker is no news");
        assert!(front.roster.any_tx_ready() && !front.roster.master_ready());
        front.up(M0, 10);
        assert!(news.borrow_and_update().master_ready);
        assert!(front.roster.master_ready());
        front.reload_finished();
        assert_eq!(news.borrow_and_update().reloads_finished, 1);
        front.down(M0);
        front.exited(M0, Ending::KilledHung);
        let n = *news.borrow_and_update();
        assert!(!n.master_ready && !n.master_alive);
        assert_eq!(front.roster.pid(M0), None);
        assert_eq!(front.roster.pid(TX1), Some(11));
    }

    #[test]
    fn draining_is_not_ready_and_a_retired_worker_is_not_present() {
        let front = test_front(2);
        front.up(TX1, 11);
        front.draining(TX1);
        assert!(!front.roster.is_ready(TX1));
        assert_eq!(front.roster.pid(TX1), Some(11), "its pid is still its own");
        front.retired(ProcessId(2));
        let present: Vec<ProcessId> = front.roster.present().map(|p| p.id).collect();
        assert_eq!(present, [M0, TX1]);
        front.added(ProcessId(2));
        assert!(front.roster.is_present(ProcessId(2)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_hears_how_its_process_ended_in_the_run_it_was_sent_to() {
        // spec: DEC-73
        let front = test_front(1);
        front.up(TX1, 11);
        let grace = Duration::from_secs(1);
        let segv = Ending::Exited {
            exit: crate::process::Exit::Signal(libc::SIGSEGV),
            oom_kills_rose: false,
        };
        let downs = front.roster.downs(TX1);
        assert_eq!(front.roster.ending_since(TX1, downs, grace).await, None);
        front.exited(TX1, segv);
        front.down(TX1);
        assert_eq!(
            front.roster.ending_since(TX1, downs, grace).await,
            Some(Some(segv))
        );
        // Stopped by the launcher (down first, its exit after): no ending of that run.
        front.up(TX1, 12);
        let downs = front.roster.downs(TX1);
        front.down(TX1);
        front.exited(TX1, segv);
        assert_eq!(
            front.roster.ending_since(TX1, downs, grace).await,
            Some(None)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_hears_whether_its_process_went_down_within_the_grace() {
        let front = test_front(1);
        front.up(TX1, 11);
        let downs = front.roster.downs(TX1);
        let grace = Duration::from_secs(1);
        assert!(
            !front.roster.went_down_since(TX1, downs, grace).await,
            "still up after the grace"
        );
        let later = {
            let front = front.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                front.down(TX1);
            })
        };
        let started = Instant::now();
        assert!(front.roster.went_down_since(TX1, downs, grace).await);
        assert_eq!(
            started.elapsed(),
            Duration::from_millis(300),
            "woken, not polled"
        );
        later.await.unwrap();
        assert!(front.roster.went_down_since(TX1, downs, grace).await);
    }
}
