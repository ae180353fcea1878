//! The shell's side of the replacement before the retirement (DEC-78) and of a rolling restart
//! stopped by its replacement (DEC-79): is there room for one more process (a spare port in
//! DEC-21's range, memory read now), the replacement started beside the place's process on
//! that port, its events, the switch (the place's process and port swapped, the front door's
//! requests moved to it), the old one drained by its open connections and stopped; and the one
//! ERROR when a replacement does not come.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tracing::{debug, error, info, warn};

use super::Shell;
use crate::clock::now_std;
use crate::ipc::message::{FromChild, ToChild};
use crate::process::{Exit, ProcessId};
use crate::supervisor::child::{ChildEvent, Tagged};
use crate::supervisor::lifecycle::Failed;

impl Shell {
    /// `AskRoom`: a spare port and the memory for one more process, or today's order with one
    /// line saying why not.
    pub(super) fn ask_room(&mut self, id: ProcessId, step: usize, of: usize) {
        let now = now_std();
        let code = self.code(id).to_string();
        match self.room_beside() {
            Ok(spare) => {
                self.roll.borrowed[id.index()] = Some(spare);
                info!(
                    "rolling restart {step}/{of}: {code}: starting its replacement beside it on \
                     port {}; {code} serves on until the replacement is ready",
                    self.places.ports.of(spare)
                );
                self.life.room(id, true, now);
            }
            Err(why) => {
                self.roll.renew[id.index()] = true;
                warn!(
                    "rolling restart {step}/{of}: {code}: no room for its replacement beside it \
                     ({why}); out of rotation, draining (up to {} s), then started again",
                    self.setup.settings.drain.as_secs_f64()
                );
                self.life.room(id, false, now);
            }
        }
    }

    /// A memory recycle (DEC-94): with room for one more process now (a spare port, memory
    /// read now) its replacement starts beside it and it serves on until the replacement is
    /// ready; else today's order, out of rotation first, the one line saying why.
    pub(super) fn recycle(&mut self, id: ProcessId, reason: &str, now: Instant) {
        let code = self.code(id).to_string();
        let drain = self.setup.settings.drain;
        let recycled = match self.room_beside() {
            Ok(spare) if self.life.recycle_beside(id, drain, now) => {
                self.roll.borrowed[id.index()] = Some(spare);
                warn!(
                    "{code}: recycling: {reason}; its replacement starts beside it on port {}, \
                     {code} serves on until the replacement is ready",
                    self.places.ports.of(spare)
                );
                true
            }
            Ok(_) => false,
            Err(why) => {
                let recycled = self.life.recycle(id, drain, now);
                if recycled {
                    warn!(
                        "{code}: recycling: {reason}; no room for its replacement beside it \
                         ({why}); out of rotation, draining (up to {} s), then started again",
                        drain.as_secs_f64()
                    );
                }
                recycled
            }
        };
        if recycled {
            self.keeping.keeper.recycling(id, reason);
        }
    }

    /// The place whose port a replacement may take (one beyond the worker count, not running,
    /// its port not lent), if memory allows one more process.
    fn room_beside(&mut self) -> Result<usize, String> {
        let places = self.setup.processes.len();
        // The first spare place whose port nothing holds now (another program may).
        let bind = self.spec(ProcessId::MASTER).bind_address.clone();
        let spare = (self.life.workers() + 1..places).find(|&k| {
            let id = ProcessId(k as u16);
            !self.life.is_running(id)
                && self.places.children[k].is_none()
                && self.roll.second[k].is_none()
                && !self.roll.borrowed.contains(&Some(k))
                && std::net::TcpListener::bind((bind.as_str(), self.places.ports.of(k))).is_ok()
        });
        let Some(spare) = spare else {
            let spares = places.saturating_sub(self.life.workers() + 1);
            return Err(format!(
                "no spare port: the internalPort range has {places} ports for this run, the \
                 master and {} worker(s) hold {}, and the other {spares} are in use, 1 short \
                 (DEC-21)",
                self.life.workers(),
                self.life.workers() + 1
            ));
        };
        if let Some(pid) = self.pid(ProcessId::MASTER) {
            if let Some(short) =
                (self.setup.scale.memory)(pid).and_then(|m| m.short_of(1, "process"))
            {
                return Err(short);
            }
        }
        Ok(spare)
    }

    /// `SpawnBeside`: the replacement, with the place's inputs now, on the borrowed port.
    pub(super) fn spawn_beside(&mut self, id: ProcessId) {
        let i = id.index();
        let Some(spare) = self.roll.borrowed[i] else {
            self.life.second_exited(id, Exit::SpawnFailed, now_std());
            return;
        };
        // A recycle's replacement runs what the process runs (its place may keep its last
        // good inputs, DEC-79); a rolling restart's, the place's inputs now.
        let inputs = match &self.places.started_spec[i] {
            Some(running) if self.life.is_recycling(id) => running.clone(),
            _ => self.spec(id).clone(),
        };
        let spec = inputs.on_port(self.places.ports.of(spare));
        match self.start_child(&spec) {
            Ok(handle) => {
                info!(
                    "{}: its replacement started, {} (pid {}) on {}:{}",
                    spec.code, spec.role, handle.pid, spec.bind_address, spec.port
                );
                self.roll.second_spoke[i] = false;
                self.roll.second_spec[i] = Some(inputs);
                self.roll.second[i] = Some(handle);
            }
            Err(e) => {
                error!(
                    "{}: could not start its replacement {:?}: {e}",
                    spec.code,
                    spec.argv.first().map(String::as_str).unwrap_or("")
                );
                self.roll.borrowed[i] = None;
                self.life.second_exited(id, Exit::SpawnFailed, now_std());
            }
        }
    }

    /// `Switch`: the replacement is the place's process from now on, on its port; the old one
    /// (if it still runs) is the second, draining, its requests in flight left to finish.
    pub(super) fn switch(&mut self, id: ProcessId, old_runs: bool) {
        let i = id.index();
        std::mem::swap(&mut self.places.children[i], &mut self.roll.second[i]);
        std::mem::swap(&mut self.places.spoke[i], &mut self.roll.second_spoke[i]);
        std::mem::swap(
            &mut self.places.started_spec[i],
            &mut self.roll.second_spec[i],
        );
        if let Some(spare) = self.roll.borrowed[i].take() {
            self.places.ports.swap(i, spare);
        }
        self.places.started_with[i] = self.places.started_spec[i].as_ref().map(|s| s.inputs());
        self.places.last_good[i] = self.places.started_spec[i].clone();
        let pid = self.pid(id).unwrap_or(0);
        let addr = self.spec(id).on_port(self.places.ports.of(i)).connect_addr;
        self.hooks.moved(id, addr, pid);
        self.hooks.started(id, pid);
        self.keeping.keeper.started(id);
        self.keeping.keeper.ready(id);
        self.watch
            .recycle
            .ready(id, Some(pid), &self.keeping.readings);
        let old = self.roll.second[i].as_ref().map(|c| c.pid);
        match (old_runs, old) {
            (true, Some(old)) => info!(
                "{}: switched to its replacement (pid {pid}) on port {}; the old process (pid \
                 {old}) gets no new requests and finishes those it has (up to {} s)",
                self.code(id),
                addr.port(),
                self.setup.settings.drain.as_secs_f64()
            ),
            _ => info!(
                "{}: switched to its replacement (pid {pid}) on port {}",
                self.code(id),
                addr.port()
            ),
        }
    }

    pub(super) fn signal_second(&self, id: ProcessId, sig: Signal) {
        if let Some(c) = &self.roll.second[id.index()] {
            c.signal(sig);
        }
    }

    /// An event of a place's second process (the events of neither process are dropped).
    pub(super) fn on_second_event(&mut self, ev: Tagged) {
        let (id, i) = (ev.id, ev.id.index());
        let ours = self.roll.second[i]
            .as_ref()
            .is_some_and(|c| c.generation == ev.generation);
        if !ours {
            return;
        }
        if let ChildEvent::Message(_) | ChildEvent::Unknown { .. } = &ev.event {
            if !std::mem::replace(&mut self.roll.second_spoke[i], true) {
                if let Some(c) = &self.roll.second[i] {
                    c.stop_watching();
                }
            }
        }
        match ev.event {
            ChildEvent::Message(FromChild::Ready { .. }) => {
                self.second_ready(id, "said so on its channel")
            }
            ChildEvent::ListeningSeen if !self.roll.second_spoke[i] => {
                self.second_ready(id, "its listening socket was seen")
            }
            // The old process's last counts still reach the master.
            ChildEvent::Message(FromChild::RequestCounts(counts)) => {
                self.hooks
                    .message(id, &FromChild::RequestCounts(counts.clone()));
                let code = self.code(id).to_string();
                self.mail_master(ToChild::WorkerCounts { code, counts });
            }
            ChildEvent::Exited(exit) => {
                let pid = self.roll.second[i].take().map(|c| c.pid);
                self.roll.second_spec[i] = None;
                self.roll.borrowed[i] = None;
                debug!(
                    "{}: its second process (pid {pid:?}) exited ({exit})",
                    self.code(id)
                );
                self.life.second_exited(id, exit, now_std());
            }
            _ => {}
        }
    }

    fn second_ready(&mut self, id: ProcessId, how: &str) {
        info!("{}: its replacement is ready ({how})", self.code(id));
        self.life.second_ready(id, now_std());
    }

    /// Every second: an old process whose requests have all ended is stopped.
    pub(super) fn seconds_drained(&mut self, now: Instant) {
        for i in 0..self.life.slot_count() {
            let id = ProcessId(i as u16);
            if self.life.is_second_draining(id) && self.hooks.outgoing_in_flight(id) == 0 {
                self.life.second_drained(id, now);
            }
        }
    }

    /// The code of a place whose second process runs (it holds a spare place's port).
    pub(super) fn second_holding_a_port(&self) -> Option<String> {
        (0..self.life.slot_count())
            .map(|i| ProcessId(i as u16))
            .find(|&id| self.life.has_second(id))
            .map(|id| self.code(id).to_string())
    }

    /// The port place `id`'s process listens on, when not its place's own (for the handover).
    pub(super) fn moved_port(&self, id: ProcessId) -> Option<u16> {
        let port = self.places.ports.of(id.index());
        (port != self.spec(id).port).then_some(port)
    }

    /// The rolling restart stopped at `id`, whose replacement did not come (DEC-79): one
    /// ERROR with how it ended and its last lines on stderr; `restart` and the status say so
    /// until the next reload or restart.
    pub(super) fn rolling_aborted(&mut self, id: ProcessId, how: Failed) {
        let code = self.code(id).to_string();
        let why = if id.is_master() {
            format!("{code}'s replacement {how}; it starts again with what it ran before")
        } else {
            format!(
                "{code}'s replacement {how}; {code} serves on (or, replaced in place, starts \
                 again) with what it ran before, the processes after it are untouched and the \
                 master is not restarted"
            )
        };
        self.keeping.keeper.rolling_stopped(Some(why.clone()));
        self.hooks.reload_finished();
        self.rolling_ended(Err(format!("rolling restart stopped: {why}")));
        let output = self.output.clone();
        tokio::spawn(async move {
            let tail = output.stderr_tail(&code, Duration::from_secs(1)).await;
            let said = super::give_up::said_on_stderr(tail.lines());
            error!("rolling restart stopped: {why}{said}");
        });
    }
}
