//! The events waiting for the master (EVENT-15..17, DEC-18): what the launcher has not yet seen
//! delivered. Pure: the outbox (`outbox.rs`) mirrors each change into SQLite.
//!
//! Theory of operation. An event leaves only when it is *delivered*: the master acknowledged it
//! (`eventsReceived`, protocol 1.1) or, for a master that doesn't acknowledge, its channel write
//! succeeded. Being queued for the channel is not delivery: a master alive but not reading, or a
//! launcher killed with events queued, would lose them. So each event is in one of three states,
//! all of them still here until delivered:
//!
//! * **unsent**, id above `sent_up_to`: goes out at the next chance, oldest first;
//! * **sent**, at or below `sent_up_to`: on its way to this master; not sent again to it, and
//!   sent again to the next master should this one end first (`resend`);
//! * **on disk only** (`beyond`): with a database, memory holds a window of the oldest
//!   [`MAX_HELD`] events and the rest wait on disk, read back as the window empties. The disk
//!   holds at most [`MAX_ON_DISK`] (DEC-32): beyond, the oldest event is dropped, counted, so a
//!   master that never reads costs a bounded file. Without a database (a disk that can't be
//!   written) memory is all there is, and beyond the cap the oldest event is dropped (EVENT-16,
//!   cluster.js's own limit), counted. Either way the drops are logged once a minute
//!   ([`Pending::take_dropped`]).
//!
//! A `counts` event is merged into the one waiting, if that one was never sent (DEC-18: one
//! entry while they wait; a sent one may be at the master already, and merging it would count
//! it twice). The merged event takes the new id, so it stays the newest.

use std::collections::VecDeque;

use super::events::{Event, EventBody};

/// Events held in memory at most (EVENT-16): beyond, on disk only (or, with no disk, dropped).
pub const MAX_HELD: usize = 5000;
/// Events held at most with a database, memory and disk together (DEC-32): beyond, the oldest
/// is dropped. A day of a crash-looping cluster's events is far fewer; 100,000 events are a few
/// tens of MB on disk.
pub const MAX_ON_DISK: usize = 100_000;

/// What holding an event did, so a copy (the outbox's database) can follow.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Held {
    /// Ids gone: a counts event merged into the new one, or (with no disk) the oldest dropped.
    pub removed: Vec<u64>,
    /// The event as held (a counts event merged with the one that was waiting), to write.
    pub held: Option<Event>,
}

/// The events waiting for the master, oldest first.
#[derive(Clone, Debug, PartialEq)]
pub struct Pending {
    /// The window in memory, oldest first, ids increasing.
    events: VecDeque<Event>,
    cap: usize,
    /// With a database: events held at most, window and disk together (DEC-32).
    disk_cap: usize,
    /// True with a database: beyond the cap, events wait on disk instead of being dropped.
    spill: bool,
    /// Events waiting on disk only, newer than every event in the window.
    beyond: u64,
    /// The never-sent counts event among those on disk only, kept so the next merges into it.
    counts_beyond: Option<Event>,
    /// The highest id ever put in the window: anything newer on disk is not in memory.
    frontier: u64,
    /// Ids up to this one were handed to the current master's channel.
    sent_up_to: u64,
    /// Ids up to this one were handed to some master (never reset): never merged again.
    ever_sent: u64,
    dropped: u64,
    /// Of those, not yet taken for the once-a-minute log line.
    dropped_unlogged: u64,
}

impl Default for Pending {
    fn default() -> Pending {
        Pending::new()
    }
}

impl Pending {
    /// Memory only: at most [`MAX_HELD`] events, the oldest dropped beyond (EVENT-16).
    pub fn new() -> Pending {
        Pending::with_cap(MAX_HELD, false)
    }

    /// `spill`: events beyond `cap` wait on disk (the outbox has a database).
    pub fn with_cap(cap: usize, spill: bool) -> Pending {
        Pending::with_caps(cap, MAX_ON_DISK, spill)
    }

    /// `disk_cap`: with `spill`, events held at most in memory and on disk together (taken as
    /// at least `cap`).
    pub fn with_caps(cap: usize, disk_cap: usize, spill: bool) -> Pending {
        let cap = cap.max(1);
        Pending {
            events: VecDeque::new(),
            cap,
            disk_cap: disk_cap.max(cap),
            spill,
            beyond: 0,
            counts_beyond: None,
            frontier: 0,
            sent_up_to: 0,
            ever_sent: 0,
            dropped: 0,
            dropped_unlogged: 0,
        }
    }

    /// The database was lost: from now on memory is all there is. What waited on disk only
    /// can't be read back any more (the outbox logs that).
    pub fn stop_spilling(&mut self) -> u64 {
        self.spill = false;
        self.counts_beyond = None;
        std::mem::take(&mut self.beyond)
    }

    /// Holds an event until the master has it.
    pub fn hold(&mut self, mut ev: Event) -> Held {
        let mut removed = Vec::new();
        self.merge_counts(&mut ev, &mut removed);
        self.place(ev, removed)
    }

    /// Takes back an event as it was kept (read from disk): no merging, it is already there.
    pub fn restore(&mut self, ev: Event) -> Held {
        self.place(ev, Vec::new())
    }

    /// A counts event takes in the one waiting, never sent (DEC-18).
    fn merge_counts(&mut self, ev: &mut Event, removed: &mut Vec<u64>) {
        if let EventBody::Counts(new) = &mut ev.body {
            let ever_sent = self.ever_sent;
            let waiting = self
                .events
                .iter()
                .position(|e| e.is_counts() && e.id > ever_sent);
            let old = match waiting {
                Some(i) => self.events.remove(i),
                None => self.counts_beyond.take().inspect(|_| self.beyond -= 1),
            };
            if let Some(old) = old {
                if let EventBody::Counts(c) = &old.body {
                    new.merge(c);
                }
                removed.push(old.id);
            }
        }
    }

    fn place(&mut self, ev: Event, mut removed: Vec<u64>) -> Held {
        if self.spill && self.events.len() as u64 + self.beyond >= self.disk_cap as u64 {
            // The disk is full (DEC-32): the oldest goes (from the window, which holds the
            // oldest; the counts entry last), and the window reads the next back from disk.
            if let Some(old) = self.drop_oldest() {
                removed.push(old);
            }
        }
        if self.spill && (self.beyond > 0 || self.events.len() >= self.cap) {
            self.beyond += 1;
            if ev.is_counts() {
                self.counts_beyond = Some(ev.clone());
            }
            return Held {
                removed,
                held: Some(ev),
            };
        }
        self.frontier = self.frontier.max(ev.id);
        self.events.push_back(ev.clone());
        let mut held = Some(ev);
        while self.events.len() > self.cap {
            // No disk: the oldest goes, the counts entry last (the cap is on events, DEC-18).
            let Some(old) = self.drop_oldest() else {
                break;
            };
            if held.as_ref().is_some_and(|h| h.id == old) {
                held = None;
            }
            removed.push(old);
        }
        Held { removed, held }
    }

    /// Drops the oldest event in the window, the counts entry last (the cap is on events,
    /// DEC-18), counted; its id.
    fn drop_oldest(&mut self) -> Option<u64> {
        let i = self.events.iter().position(|e| !e.is_counts()).unwrap_or(0);
        let old = self.events.remove(i)?;
        self.dropped += 1;
        self.dropped_unlogged += 1;
        Some(old.id)
    }

    /// Events dropped for a cap since the last call (for the once-a-minute log line).
    pub fn take_dropped(&mut self) -> u64 {
        std::mem::take(&mut self.dropped_unlogged)
    }

    /// Events dropped before this queue was made (the database was over its cap when opened).
    pub fn dropped_before(&mut self, n: u64) {
        self.dropped += n;
        self.dropped_unlogged += n;
    }

    /// What memory and disk hold together at most with a database.
    pub fn disk_cap(&self) -> usize {
        self.disk_cap
    }

    /// How many events the window has room for while some wait on disk only (0 otherwise),
    /// and the id after which to read them.
    pub fn room(&self) -> (usize, u64) {
        if self.beyond == 0 {
            return (0, self.frontier);
        }
        (self.cap.saturating_sub(self.events.len()), self.frontier)
    }

    /// Events read back from disk (ids above `room().1`, oldest first); `complete` when the
    /// read found fewer than asked, so nothing else waits on disk.
    pub fn refill(&mut self, read: Vec<Event>, complete: bool) {
        for ev in read {
            if ev.id <= self.frontier {
                continue;
            }
            if self.counts_beyond.as_ref().is_some_and(|c| c.id == ev.id) {
                self.counts_beyond = None;
            }
            self.frontier = ev.id;
            self.beyond = self.beyond.saturating_sub(1);
            self.events.push_back(ev);
        }
        if complete {
            self.beyond = 0;
            self.counts_beyond = None;
        }
    }

    /// Sets the count of events on disk only, as found when the outbox is opened.
    pub fn set_beyond(&mut self, n: u64) {
        self.beyond = if self.spill { n } else { 0 };
    }

    /// The next events to send the current master, oldest first, at most `max` (EVENT-13,
    /// EVENT-17); none while earlier ones are on their way.
    pub fn to_send(&self, max: usize) -> Vec<Event> {
        self.events
            .iter()
            .filter(|e| e.id > self.sent_up_to)
            .take(max)
            .cloned()
            .collect()
    }

    /// The events up to `id` were handed to the master's channel.
    pub fn sent(&mut self, id: u64) {
        self.sent_up_to = self.sent_up_to.max(id);
        self.ever_sent = self.ever_sent.max(id);
    }

    /// Whether events were handed to the current master's channel and not yet delivered.
    pub fn on_their_way(&self) -> bool {
        self.events.front().is_some_and(|e| e.id <= self.sent_up_to)
    }

    /// A new master: everything not delivered is sent again, with the same ids (the master
    /// can tell a repeat).
    pub fn resend(&mut self) {
        self.sent_up_to = 0;
    }

    /// The master has every event up to `id`: they go. Returns the ids removed.
    pub fn delivered(&mut self, id: u64) -> Vec<u64> {
        let gone: Vec<u64> = self
            .events
            .iter()
            .filter(|e| e.id <= id)
            .map(|e| e.id)
            .collect();
        self.events.retain(|e| e.id > id);
        gone
    }

    /// Everything in memory, oldest first.
    #[cfg(test)]
    pub fn waiting(&self) -> Vec<Event> {
        self.events.iter().cloned().collect()
    }

    /// Events waiting, in memory and on disk.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.events.len() + self.beyond as usize
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Events dropped for the cap with no disk, since this queue was made (for a log line).
    #[cfg(test)]
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The highest id held in memory, if any.
    pub fn last_id(&self) -> Option<u64> {
        self.events.back().map(|e| e.id)
    }
}

#[cfg(test)]
mod tests;
