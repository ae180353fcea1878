//! One wait queue: request ids in arrival order (by sequence number), removed lazily.
//!
//! Cancelling or refusing a waiting request only forgets it in the scheduler's request map; its
//! entry here is dropped when it reaches the head. A live count says whether anything really
//! waits, so neither check nor removal scans the queue.

use std::collections::VecDeque;

use super::types::RequestId;

#[derive(Clone, Debug, Default)]
pub(crate) struct WaitQueue {
    entries: VecDeque<(u64, RequestId)>,
    live: usize,
}

impl WaitQueue {
    /// Requests really waiting.
    pub fn live(&self) -> usize {
        self.live
    }

    /// A new arrival: its `seq` is above every other's.
    pub fn push(&mut self, seq: u64, id: RequestId) {
        self.entries.push_back((seq, id));
        self.live += 1;
    }

    /// An older request moved here from another queue: placed by its `seq`, so the queue stays
    /// oldest first. Costs a shift; only done when a process goes away.
    pub fn insert_by_seq(&mut self, seq: u64, id: RequestId) {
        let at = self.entries.partition_point(|&(s, _)| s < seq);
        self.entries.insert(at, (seq, id));
        self.live += 1;
    }

    /// One of the live entries has left (dispatched, refused, cancelled, moved).
    pub fn forget_one(&mut self) {
        self.live = self.live.saturating_sub(1);
        self.drop_dead_if_none_live();
    }

    /// The oldest live entry, dropping dead ones at the head. `alive` says whether an entry is
    /// still waiting here.
    pub fn head(&mut self, alive: impl Fn(u64, RequestId) -> bool) -> Option<(u64, RequestId)> {
        while let Some(&(seq, id)) = self.entries.front() {
            if alive(seq, id) {
                return Some((seq, id));
            }
            self.entries.pop_front();
        }
        None
    }

    /// Drops the head, found dead (not waiting here any more) by the caller.
    pub fn pop_dead_head(&mut self) {
        self.entries.pop_front();
    }

    /// Removes the head (after `head` returned it, and the caller took it).
    pub fn pop_head(&mut self) {
        if self.entries.pop_front().is_some() {
            self.live = self.live.saturating_sub(1);
            self.drop_dead_if_none_live();
        }
    }

    /// With no live entry left, every one still here is dead: dropped now, so an idle queue
    /// holds nothing (and a look at it by its live count alone misses nothing).
    fn drop_dead_if_none_live(&mut self) {
        if self.live == 0 {
            self.entries.clear();
        }
    }

    /// Every entry, live or dead, oldest first, without taking any.
    pub fn iter(&self) -> impl Iterator<Item = (u64, RequestId)> + '_ {
        self.entries.iter().copied()
    }

    /// Every entry, live or dead, emptying the queue.
    pub fn drain(&mut self) -> impl Iterator<Item = (u64, RequestId)> + '_ {
        self.live = 0;
        self.entries.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_whose_last_live_entry_goes_holds_no_dead_ones() {
        // What lets `pump` skip a process by the live counts alone (nothing to clean).
        let mut q = WaitQueue::default();
        for seq in 0..3 {
            q.push(seq, RequestId(seq));
        }
        // Cancelled or timed out while waiting: forgotten, their entries dead.
        q.forget_one();
        q.forget_one();
        assert_eq!(q.iter().count(), 3, "dead entries stay while one is live");
        q.forget_one();
        assert_eq!(q.live(), 0);
        assert_eq!(q.iter().count(), 0);
        // The same when the last one is taken from the head.
        q.push(7, RequestId(7));
        q.push(8, RequestId(8));
        q.forget_one();
        assert_eq!(q.head(|s, _| s == 8), Some((8, RequestId(8))));
        q.pop_head();
        assert_eq!(q.iter().count(), 0);
    }
}
