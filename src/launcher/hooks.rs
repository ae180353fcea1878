//! What the launcher hears from the supervisor: everything goes on to the front door, and the
//! launcher itself learns when the master is first ready, whether its process runs (for systemd's
//! start timeout), and when a reload is over (for systemd's `READY=1`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use crate::ipc::message::FromChild;
use crate::process::ProcessId;
use crate::proxy::front::Front;
use crate::status::keeper::Tally;
use crate::supervisor::Hooks;

/// Tells the launcher when the master is first ready, whether its process is running, and when
/// a reload is over; passes everything on to the front.
pub(super) struct LauncherHooks {
    pub(super) front: Arc<Front>,
    pub(super) master_ready: watch::Sender<bool>,
    pub(super) master_alive: Arc<AtomicBool>,
    pub(super) reloads_finished: watch::Sender<u64>,
}

impl Hooks for LauncherHooks {
    fn up(&self, id: ProcessId, pid: u32) {
        self.front.up(id, pid);
        if id.is_master() {
            self.master_ready.send_replace(true);
        }
    }

    fn down(&self, id: ProcessId) {
        self.front.down(id);
    }

    fn draining(&self, id: ProcessId) {
        self.front.draining(id);
    }

    fn in_flight(&self, id: ProcessId) -> u32 {
        self.front.in_flight(id)
    }

    fn tally(&self) -> Tally {
        self.front.tally()
    }

    fn message(&self, id: ProcessId, msg: &FromChild) {
        self.front.message(id, msg);
    }

    fn added(&self, id: ProcessId) {
        self.front.added(id);
    }

    fn retired(&self, id: ProcessId) {
        self.front.retired(id);
    }

    fn started(&self, id: ProcessId, _pid: u32) {
        if id.is_master() {
            self.master_alive.store(true, Ordering::Release);
        }
    }

    fn exited(&self, id: ProcessId) {
        if id.is_master() {
            self.master_alive.store(false, Ordering::Release);
        }
    }

    fn reload_finished(&self) {
        self.reloads_finished.send_modify(|n| *n += 1);
    }
}
