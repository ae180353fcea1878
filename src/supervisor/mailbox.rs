//! The master's mailbox: what the launcher has for the master (workers' request counts, the
//! keeper's events and history) is held here while the master is down and passed on once it is
//! up again. Held counts from one worker's run are merged into one entry, so a long outage
//! neither loses nor doubles a worker's requests (DEC-18); anything else beyond the cap drops
//! the oldest first (EVENT-16). Pure: the shell does the sending.

use std::collections::VecDeque;

use crate::ipc::message::{RequestCounts, ToChild};

/// Messages for the master held while it is down; the oldest are dropped first (EVENT-16).
const MASTER_MAILBOX: usize = 5000;

#[derive(Debug)]
pub(super) struct MasterMailbox {
    held: VecDeque<ToChild>,
    cap: usize,
}

impl Default for MasterMailbox {
    fn default() -> Self {
        MasterMailbox::with_cap(MASTER_MAILBOX)
    }
}

impl MasterMailbox {
    fn with_cap(cap: usize) -> Self {
        MasterMailbox {
            held: VecDeque::new(),
            cap,
        }
    }

    /// Holds a message for the master. A worker's counts join the ones it has waiting from the
    /// same run (DEC-18: one entry each, none dropped); when full the oldest goes first.
    pub(super) fn post(&mut self, msg: ToChild) {
        let msg = match msg {
            ToChild::WorkerCounts { code, counts } => {
                let waiting = self.held.iter_mut().rev().find_map(|m| match m {
                    ToChild::WorkerCounts {
                        code: c,
                        counts: held,
                    } if *c == code => Some(held),
                    _ => None,
                });
                match waiting {
                    Some(held) if counts.seq > held.seq => {
                        merge_counts(held, counts);
                        return;
                    }
                    _ => ToChild::WorkerCounts { code, counts },
                }
            }
            other => other,
        };
        if self.held.len() >= self.cap {
            self.held.pop_front();
        }
        self.held.push_back(msg);
    }

    /// Holds the keeper's messages as they are: the keeper bounds its own outbox, and these go
    /// out at once (the master is up when they are taken).
    pub(super) fn append(&mut self, msgs: impl IntoIterator<Item = ToChild>) {
        self.held.extend(msgs);
    }

    /// Everything held, oldest first, taken out of the mailbox.
    pub(super) fn take_all(&mut self) -> impl Iterator<Item = ToChild> + '_ {
        self.held.drain(..)
    }
}

/// Adds a later send of a worker's counts (same run) to the one waiting for the master.
fn merge_counts(held: &mut RequestCounts, later: RequestCounts) {
    held.seq = later.seq;
    held.from = held.from.min(later.from);
    held.to = held.to.max(later.to);
    held.total += later.total;
    for (op, n) in later.by_operation {
        *held.by_operation.entry(op).or_default() += n;
    }
    held.last = later.last;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(seq: u64, from: u64, to: u64, total: u64, op: &str) -> RequestCounts {
        RequestCounts {
            seq,
            from,
            to,
            total,
            by_operation: [(op.to_string(), total)].into_iter().collect(),
            last: false,
        }
    }

    fn from(code: &str, c: RequestCounts) -> ToChild {
        ToChild::WorkerCounts {
            code: code.into(),
            counts: c,
        }
    }

    fn taken(m: &mut MasterMailbox) -> Vec<ToChild> {
        m.take_all().collect()
    }

    // spec: DEC-18
    #[test]
    fn a_workers_later_counts_join_the_held_ones() {
        let mut m = MasterMailbox::default();
        m.post(from("tx1", counts(1, 100, 200, 3, "read")));
        let mut later = counts(2, 200, 300, 4, "$lookup");
        later.last = true;
        m.post(from("tx1", later));
        let mut want = counts(2, 100, 300, 7, "read");
        want.by_operation = [("read".to_string(), 3), ("$lookup".to_string(), 4)]
            .into_iter()
            .collect();
        want.last = true;
        assert_eq!(taken(&mut m), vec![from("tx1", want)]);
    }

    #[test]
    fn another_workers_counts_are_held_apart() {
        let mut m = MasterMailbox::default();
        m.post(from("tx1", counts(1, 0, 1, 1, "read")));
        m.post(from("tx2", counts(2, 0, 1, 1, "read")));
        assert_eq!(taken(&mut m).len(), 2);
    }

    /// A new run of the worker starts its `seq` again: not the same run, so not merged.
    #[test]
    fn counts_from_a_new_run_are_not_merged() {
        let mut m = MasterMailbox::default();
        m.post(from("tx1", counts(5, 0, 1, 1, "read")));
        m.post(from("tx1", counts(1, 1, 2, 2, "read")));
        assert_eq!(
            taken(&mut m),
            vec![
                from("tx1", counts(5, 0, 1, 1, "read")),
                from("tx1", counts(1, 1, 2, 2, "read"))
            ]
        );
    }

    // spec: EVENT-16
    #[test]
    fn when_full_the_oldest_is_dropped() {
        let mut m = MasterMailbox::with_cap(2);
        for code in ["tx1", "tx2", "tx3"] {
            m.post(from(code, counts(1, 0, 1, 1, "read")));
        }
        let codes: Vec<String> = taken(&mut m)
            .into_iter()
            .filter_map(|msg| match msg {
                ToChild::WorkerCounts { code, .. } => Some(code),
                _ => None,
            })
            .collect();
        assert_eq!(codes, ["tx2", "tx3"]);
    }

    #[test]
    fn taking_empties_the_mailbox() {
        let mut m = MasterMailbox::default();
        m.append([ToChild::Events { events: vec![] }]);
        assert_eq!(taken(&mut m).len(), 1);
        assert!(taken(&mut m).is_empty());
    }
}
