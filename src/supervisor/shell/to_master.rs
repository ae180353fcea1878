//! What goes to the master, for the shell: the keeper's history changes and events, and the
//! workers' counts held in the master's mailbox. Nothing is dropped on the way: what the
//! master's full queue won't take waits (the mailbox, the outbox) and is tried again each turn of
//! the loop; an event leaves the outbox only once delivered (`Written` from a master that doesn't
//! acknowledge, `eventsReceived` from one that does). The stop's flush waits for both.

use tracing::{info, warn};

use super::Shell;
use crate::clock::now_std;
use crate::ipc::message::ToChild;
use crate::process::ProcessId;

impl Shell {
    /// Passes what the keeper has for the master (history changes, events) while it is up.
    pub(super) fn deliver_keeper(&mut self) {
        // The master's exit is seen a step before its `Down`: with no master to write to, the
        // events stay in the outbox (taken out, they would count as delivered and be lost with
        // the launcher).
        if !self.life.is_up(ProcessId::MASTER) || self.places.children[0].is_none() {
            return;
        }
        let changes = self.keeping.keeper.history_for_master();
        let keeper = &mut self.keeping.keeper;
        self.master
            .mailbox
            .append_history(changes, || keeper.whole_history_for_master());
        self.deliver_to_master();
        // Events leave the outbox only when delivered (`Written` or `eventsReceived`): queued
        // for the channel they are still waiting, and a full queue just means later.
        while let Some((msg, last)) = self.keeping.keeper.events_to_send() {
            let queued = self.places.children[0]
                .as_ref()
                .is_some_and(|m| m.send_tracked(msg, last));
            if !queued {
                self.stalled(true);
                return;
            }
            self.stalled(false);
            self.keeping.keeper.events_sent(last);
        }
    }

    /// Passes a message to the master, or holds it while the master is down.
    pub(super) fn mail_master(&mut self, msg: ToChild) {
        self.master.mailbox.post(msg);
        if self.life.is_up(ProcessId::MASTER) {
            self.deliver_to_master();
        }
    }

    /// Passes what the mailbox holds to the master's channel, oldest first; what its full
    /// queue won't take stays held (nothing is dropped) and goes at the next chance.
    pub(super) fn deliver_to_master(&mut self) {
        let Some(master) = &self.places.children[0] else {
            return;
        };
        let mut took = false;
        while let Some(msg) = self.master.mailbox.next() {
            if !master.send(msg.clone()) {
                self.stalled(true);
                return;
            }
            self.master.mailbox.sent();
            took = true;
        }
        if took {
            self.stalled(false);
        }
    }

    /// The master's queue was full (`true`) or took everything (`false`): said once each way.
    pub(super) fn stalled(&mut self, full: bool) {
        if full == self.master.stalled {
            return;
        }
        self.master.stalled = full;
        if full {
            warn!(
                "the master is not reading its IPC channel (its queue is full); what is \
                 for it is held until it reads again"
            );
        } else {
            info!("the master reads its IPC channel again; what was held for it is on its way");
        }
    }

    /// The master has written everything queued: the stop goes on once it has also
    /// acknowledged every event sent to it (a master that acknowledges), or at the flush's cap.
    pub(super) fn flushed_if_confirmed(&mut self) {
        if self.master.flushing || !self.life.is_flushing() {
            return;
        }
        if self.master.acks && self.keeping.keeper.events_on_their_way() {
            return;
        }
        self.life.master_flushed(now_std());
    }

    pub(super) fn flush_master(&mut self) {
        // The last minute's counts go with the workers' last request counts.
        self.keeping.keeper.minute(self.hooks.tally());
        self.deliver_keeper();
        self.deliver_to_master();
        match &self.places.children[0] {
            Some(master) if self.life.is_up(ProcessId::MASTER) && master.flush() => {
                self.master.flushing = true
            }
            _ => self.life.master_flushed(now_std()),
        }
    }

    /// Called each turn of the loop: what waits for an up master (held counts, events) is
    /// retried, so a master that reads again gets it without waiting for something new.
    pub(super) fn retry_master(&mut self) {
        if self.life.is_up(ProcessId::MASTER) && !self.master.mailbox.is_empty() {
            self.deliver_to_master();
        }
    }
}
