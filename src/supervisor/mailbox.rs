//! The master's mailbox: what the launcher has for the master (workers' request counts, the
//! graph history) is held here while the master is down, or while its channel's queue is full
//! (a master alive but not reading), and passed on once it takes messages again. Counts are
//! never dropped (DEC-18): a worker's later counts from the same run join the ones it has
//! waiting (one entry each); past [`MASTER_MAILBOX`] entries, a worker's two oldest runs are
//! merged into one, so memory stays bounded by the number of workers and nothing is lost. The
//! graph history's changes are bounded too (DEC-32): past [`MAX_HISTORY_HELD`] of them waiting,
//! they are all replaced by one whole history (which holds every point they carried), so a
//! master alive but not reading for hours costs a bounded mailbox. (The 5,000 cap on events is
//! the outbox's, `status/pending.rs`; snapshots are never held, a newer one follows.) Pure: the
//! shell does the sending.

use std::collections::VecDeque;

use crate::ipc::message::{RequestCounts, ToChild};

/// Entries held before a worker's runs are merged to make room (never dropped).
const MASTER_MAILBOX: usize = 5000;
/// History changes held before they are replaced by the whole history (DEC-32): a minute of a
/// 16-worker cluster's samples at 1 s, and a whole history is a few MB at most.
const MAX_HISTORY_HELD: usize = 1000;

#[derive(Debug)]
pub(super) struct MasterMailbox {
    held: VecDeque<ToChild>,
    cap: usize,
    /// How many of `held` are `History` messages.
    history_held: usize,
    history_cap: usize,
}

fn is_history(m: &ToChild) -> bool {
    matches!(m, ToChild::History { .. })
}

/// A history message that replaces what the master has (`append: false`, DEC-17), not a change.
fn is_whole_history(m: &ToChild) -> bool {
    matches!(m, ToChild::History { history } if history.get("append") == Some(&serde_json::Value::Bool(false)))
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
            history_held: 0,
            history_cap: MAX_HISTORY_HELD,
        }
    }

    /// Holds a message for the master. A worker's counts join the ones it has waiting from the
    /// same run (DEC-18: one entry each, none dropped); when full, a worker's two oldest runs
    /// become one.
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
            self.make_room();
        }
        self.push(msg);
    }

    fn push(&mut self, msg: ToChild) {
        if is_whole_history(&msg) {
            // The whole history supersedes every change held before it.
            self.drop_history();
        }
        if is_history(&msg) {
            self.history_held += 1;
        }
        self.held.push_back(msg);
    }

    fn drop_history(&mut self) {
        self.held.retain(|m| !is_history(m));
        self.history_held = 0;
    }

    /// Merges the oldest held counts of a worker that has two runs waiting into its next, so
    /// the mailbox shrinks by one; with no such worker it grows instead (nothing is dropped).
    fn make_room(&mut self) {
        let code_of = |m: &ToChild| match m {
            ToChild::WorkerCounts { code, .. } => Some(code.clone()),
            _ => None,
        };
        for i in 0..self.held.len() {
            let Some(code) = code_of(&self.held[i]) else {
                continue;
            };
            let Some(j) =
                (i + 1..self.held.len()).find(|&j| code_of(&self.held[j]).as_ref() == Some(&code))
            else {
                continue;
            };
            let (Some(ToChild::WorkerCounts { counts: older, .. }), Some(newer)) =
                (self.held.remove(i), self.held.get_mut(j - 1))
            else {
                return;
            };
            if let ToChild::WorkerCounts { counts, .. } = newer {
                let mut merged = older;
                merge_counts(&mut merged, std::mem::take(counts));
                *counts = merged;
            }
            return;
        }
    }

    /// Holds the keeper's messages as they are (the master is up when they come); a whole
    /// history takes the place of the changes held before it.
    pub(super) fn append(&mut self, msgs: impl IntoIterator<Item = ToChild>) {
        for msg in msgs {
            self.push(msg);
        }
    }

    /// Holds the graph history's changes; past [`MAX_HISTORY_HELD`] waiting (a master that
    /// does not read), all of them give way to `whole()`, the whole history (DEC-32), so the
    /// mailbox stays bounded and the master, when it reads again, has every point.
    pub(super) fn append_history(
        &mut self,
        changes: Vec<ToChild>,
        whole: impl FnOnce() -> ToChild,
    ) {
        if self.history_held + changes.len() > self.history_cap {
            self.drop_history();
            self.push(whole());
        } else {
            self.append(changes);
        }
    }

    /// The oldest message held, to try to send; [`MasterMailbox::sent`] once it went.
    pub(super) fn next(&self) -> Option<&ToChild> {
        self.held.front()
    }

    /// The oldest message was queued for the master.
    pub(super) fn sent(&mut self) {
        if self.held.pop_front().as_ref().is_some_and(is_history) {
            self.history_held = self.history_held.saturating_sub(1);
        }
    }

    /// Messages held (for a bound's test).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.held.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    #[cfg(test)]
    fn take_all(&mut self) -> impl Iterator<Item = ToChild> + '_ {
        self.history_held = 0;
        self.held.drain(..)
    }

    /// Everything held, oldest first (an in-place upgrade carries a copy: should it fail,
    /// the mailbox is as it was).
    pub(super) fn copied(&self) -> Vec<ToChild> {
        self.held.iter().cloned().collect()
    }

    /// The mailbox as the program before an in-place upgrade left it.
    pub(super) fn resumed(held: Vec<ToChild>) -> MasterMailbox {
        let mut m = MasterMailbox::default();
        m.append(held);
        m
    }
}

/// Adds a later send of a worker's counts to the one waiting for the master (the same run, or,
/// to make room, the next run: the later `seq` and `last` are kept).
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

    fn totals(msgs: &[ToChild]) -> std::collections::BTreeMap<String, u64> {
        let mut t = std::collections::BTreeMap::new();
        for msg in msgs {
            if let ToChild::WorkerCounts { code, counts } = msg {
                *t.entry(code.clone()).or_default() += counts.total;
            }
        }
        t
    }

    // spec: DEC-18 (counts are never dropped: the cap is on events)
    #[test]
    fn when_full_no_counts_are_dropped_a_workers_runs_are_merged() {
        let mut m = MasterMailbox::with_cap(2);
        // Three workers each with one run: nothing can merge, so the mailbox grows.
        for code in ["tx1", "tx2", "tx3"] {
            m.post(from(code, counts(1, 0, 1, 1, "read")));
        }
        // tx1 crash-loops while the master is down: a new run (seq from 1) each time.
        for run in 0..50u64 {
            m.post(from("tx1", counts(1, 10 + run, 11 + run, 2, "$lookup")));
        }
        let held = taken(&mut m);
        assert!(held.len() <= 4, "{} entries held", held.len());
        let want: std::collections::BTreeMap<String, u64> =
            [("tx1".into(), 101), ("tx2".into(), 1), ("tx3".into(), 1)].into();
        assert_eq!(totals(&held), want, "every request counted once");
        let tx1: Vec<&RequestCounts> = held
            .iter()
            .filter_map(|msg| match msg {
                ToChild::WorkerCounts { code, counts } if code == "tx1" => Some(counts),
                _ => None,
            })
            .collect();
        assert_eq!(tx1.first().map(|c| c.from), Some(0));
        assert_eq!(tx1.last().map(|c| c.to), Some(60));
        assert_eq!(
            tx1.iter()
                .map(|c| c.by_operation.values().sum::<u64>())
                .sum::<u64>(),
            101
        );
    }

    #[test]
    fn a_message_not_taken_stays_first() {
        let mut m = MasterMailbox::default();
        m.post(from("tx1", counts(1, 0, 1, 1, "read")));
        m.post(from("tx2", counts(1, 0, 1, 1, "read")));
        assert!(matches!(m.next(), Some(ToChild::WorkerCounts { code, .. }) if code == "tx1"));
        // Not sent (the master's queue is full): still there, still first.
        assert!(matches!(m.next(), Some(ToChild::WorkerCounts { code, .. }) if code == "tx1"));
        m.sent();
        assert!(matches!(m.next(), Some(ToChild::WorkerCounts { code, .. }) if code == "tx2"));
        m.sent();
        assert!(m.is_empty());
    }

    #[test]
    fn taking_empties_the_mailbox() {
        let mut m = MasterMailbox::default();
        m.append([ToChild::Events { events: vec![] }]);
        assert_eq!(taken(&mut m).len(), 1);
        assert!(taken(&mut m).is_empty());
    }

    fn change(code: &str, at: u64) -> ToChild {
        ToChild::History {
            history: serde_json::json!({"append": true, "processes": [{"code": code, "at": at}]}),
        }
    }

    fn whole(at: u64) -> ToChild {
        ToChild::History {
            history: serde_json::json!({"append": false, "at": at}),
        }
    }

    // spec: DEC-32 (what waits for a master alive but not reading is bounded: counts merged,
    // history changes replaced by the whole history)
    #[test]
    fn a_master_that_stops_reading_for_an_hour_costs_a_bounded_mailbox_and_loses_no_count() {
        let mut m = MasterMailbox::default();
        let workers: Vec<String> = (1..=16).map(|i| format!("tx{i}")).collect();
        let mut want = std::collections::BTreeMap::<String, u64>::new();
        let mut most = 0;
        // An hour of simulated time, a second a step: every process sends a sample a second
        // (a history change each, and the memory Total), every worker its counts a minute;
        // tx16 crash-loops, a new run (seq from 1) each minute. The master reads nothing.
        for second in 0..3600u64 {
            let mut changes: Vec<ToChild> = workers.iter().map(|c| change(c, second)).collect();
            changes.push(change("m0", second));
            changes.push(change("memoryTotal", second));
            m.append_history(changes, || whole(second));
            if second % 60 == 59 {
                let minute = second / 60;
                for code in &workers {
                    let seq = if code == "tx16" { 1 } else { minute + 1 };
                    m.post(from(code, counts(seq, second - 59, second + 1, 3, "read")));
                    *want.entry(code.clone()).or_default() += 3;
                }
            }
            most = most.max(m.len());
        }
        // The bound: the history's cap, a whole history, and the counts' own cap (a worker's
        // runs merge past it); here the counts are 16 entries and tx16's 60 runs.
        assert!(
            most <= MAX_HISTORY_HELD + 1 + workers.len() + 60,
            "the mailbox held up to {most} messages"
        );
        let held = taken(&mut m);
        assert_eq!(totals(&held), want, "every request counted once");
        // What the master gets when it reads again: one whole history, then the changes since.
        let histories: Vec<&ToChild> = held.iter().filter(|msg| is_history(msg)).collect();
        assert!(
            histories.first().is_some_and(|h| is_whole_history(h)),
            "the first history the master gets is whole"
        );
        assert_eq!(
            histories.iter().filter(|h| is_whole_history(h)).count(),
            1,
            "the older changes gave way"
        );
        let last_at = |msg: &ToChild| match msg {
            ToChild::History { history } => history["processes"][0]["at"].as_u64(),
            _ => None,
        };
        assert_eq!(histories.last().and_then(|h| last_at(h)), Some(3599));
    }

    #[test]
    fn a_whole_history_takes_the_place_of_the_changes_before_it() {
        // spec: DEC-32, DEC-17 (a master back up gets the whole history; the changes held for
        // the one before are superseded)
        let mut m = MasterMailbox::default();
        m.append([change("tx1", 1), change("tx1", 2)]);
        m.post(from("tx1", counts(1, 0, 1, 1, "read")));
        m.append([whole(3)]);
        assert_eq!(
            taken(&mut m),
            vec![from("tx1", counts(1, 0, 1, 1, "read")), whole(3)]
        );
    }
}
