//! Tests of the SQLite outbox, each in a temp dir.

use super::*;
use crate::status::events::{Event, EventLog, LostKind};
use crate::status::pending::MAX_HELD;

const T0: u64 = 1_700_000_000_000;

fn temp() -> tempfile::TempDir {
    match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("no temp dir: {e}"),
    }
}

#[test]
fn events_survive_a_reopen_in_wal_mode() {
    // spec: EVENT-15, DEC-26 (kept across a launcher restart; the spec's EVENT-18 loses them)
    let dir = temp();
    let mut log = EventLog::new(0, T0);
    let a = log.launcher_started(1, T0);
    let b = log.recycling("tx1", "over", T0 + 1);
    {
        let mut out = Outbox::open(dir.path());
        assert!(out.is_persistent());
        out.hold(a.clone());
        out.hold(b.clone());
    }
    let path = dir.path().join("databases").join(DB_FILE);
    assert!(path.exists());
    let out = Outbox::open(dir.path());
    assert!(out.is_persistent());
    assert_eq!(out.waiting(), vec![a, b.clone()]);
    assert_eq!(out.last_id(), b.id);
    let mode = Connection::open(&path)
        .and_then(|c| c.query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0)));
    assert_eq!(mode.ok().as_deref(), Some("wal"));
}

#[test]
fn events_sent_but_not_delivered_are_kept_and_the_window_reads_the_rest_back() {
    // spec: EVENT-15, EVENT-17, DEC-26 (an event leaves only once delivered; beyond the memory
    // window the disk holds it, nothing dropped)
    let dir = temp();
    let mut log = EventLog::new(0, T0);
    let n = MAX_HELD as u64 + 3;
    let evs: Vec<Event> = (0..n)
        .map(|i| log.recycling(&format!("tx{i}"), "r", T0 + i))
        .collect();
    {
        let mut out = Outbox::open(dir.path());
        for e in &evs {
            out.hold(e.clone());
        }
        assert_eq!((out.len(), out.dropped()), (n as usize, 0));
        let batch = out.to_send(10);
        assert_eq!(batch.first(), evs.first());
        out.sent(batch[9].id);
        // The launcher dies here: sent, never delivered.
    }
    let mut out = Outbox::open(dir.path());
    assert_eq!(out.len(), n as usize, "all kept, the sent ones too");
    assert_eq!(out.waiting().len(), MAX_HELD, "memory: a window");
    assert_eq!(
        out.to_send(1).first(),
        evs.first(),
        "sent again to the new master"
    );
    out.delivered(evs[MAX_HELD - 1].id);
    assert_eq!(
        out.waiting(),
        evs[MAX_HELD..].to_vec(),
        "the rest read back from disk"
    );
    out.delivered(evs[n as usize - 1].id);
    assert!(out.is_empty());
    drop(out);
    assert!(Outbox::open(dir.path()).is_empty());
}

#[test]
fn a_database_at_its_cap_drops_the_oldest_and_the_master_gets_the_newest_in_order() {
    // spec: DEC-32 (the disk holds at most its cap, the oldest dropped first and counted; the
    // window reads the next back from disk as the oldest go)
    let dir = temp();
    let path = dir.path().join("databases").join(DB_FILE);
    let mut log = EventLog::new(0, T0);
    let evs: Vec<Event> = (0..12)
        .map(|i| log.recycling(&format!("tx{i}"), "r", T0 + i))
        .collect();
    let rows = || {
        Connection::open(&path)
            .and_then(|c| c.query_row("SELECT COUNT(*) FROM events", [], |r| r.get::<_, i64>(0)))
            .unwrap_or(-1)
    };
    {
        let mut out = Outbox::open_with_caps(&path, 3, 5);
        for e in &evs {
            out.hold(e.clone());
        }
        assert_eq!((out.len(), out.dropped()), (5, 7));
        assert_eq!(rows(), 5, "the disk holds the cap, no more");
        assert_eq!(
            out.waiting(),
            evs[7..10].to_vec(),
            "the window: the oldest kept"
        );
        assert_eq!(
            out.pending.take_dropped(),
            7,
            "counted for the minute's line"
        );
    }
    // A reopen finds the same five; what the master gets, in order, is the newest five.
    let mut out = Outbox::open_with_caps(&path, 3, 5);
    let mut got = Vec::new();
    while let Some(last) = out.to_send(2).last().map(|e| e.id) {
        got.extend(out.to_send(2));
        out.sent(last);
        out.delivered(last);
    }
    assert_eq!(got, evs[7..].to_vec());
    assert_eq!(rows(), 0);
    // A database over the cap when opened (an older version kept everything) is cut to it.
    drop(out);
    {
        let mut out = Outbox::open(dir.path());
        for e in &evs {
            out.hold(e.clone());
        }
    }
    let mut out = Outbox::open_with_caps(&path, 3, 4);
    assert_eq!((out.len(), out.pending.take_dropped()), (4, 8));
    assert_eq!(out.waiting(), evs[8..11].to_vec());
}

#[test]
fn delivered_events_do_not_come_back() {
    // spec: EVENT-17, COUNT-3 (nothing delivered twice)
    let dir = temp();
    let mut log = EventLog::new(0, T0);
    let a = log.launcher_started(1, T0);
    let b = log.recycling("tx1", "over", T0 + 1);
    let c = log.recycling("tx2", "over", T0 + 2);
    {
        let mut out = Outbox::open(dir.path());
        for e in [&a, &b, &c] {
            out.hold(e.clone());
        }
        out.delivered(b.id);
        assert_eq!(out.waiting(), vec![c.clone()]);
    }
    let out = Outbox::open(dir.path());
    assert_eq!(out.waiting(), vec![c.clone()]);
    // Ids go on from the highest ever used, even with nothing left waiting.
    let mut out = out;
    out.delivered(c.id);
    drop(out);
    let out = Outbox::open(dir.path());
    assert!(out.is_empty());
    let mut next = EventLog::new(out.last_id(), T0 - 1_000_000);
    assert!(next.launcher_started(2, T0 - 1_000_000).id > c.id);
}

#[test]
fn merged_counts_and_the_cap_reach_the_database() {
    // spec: DEC-18
    let dir = temp();
    let mut log = EventLog::new(0, T0);
    {
        let mut out = Outbox::open(dir.path());
        for minute in 1..=3u64 {
            log.count_lost("tx1", LostKind::Timeout504);
            if let Some(e) = log.minute(T0 + minute * 60_000) {
                out.hold(e);
            }
        }
        assert_eq!(out.len(), 1);
    }
    let out = Outbox::open(dir.path());
    let waiting = out.waiting_json();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0]["lost"]["tx1"]["timeout504"], 3);
}

fn a_history() -> History {
    let mut h = History::new(std::time::Duration::from_secs(60), false);
    h.process_starting("tx1", "tx-worker", T0);
    h
}

#[test]
fn the_graph_history_is_kept() {
    // spec: DEC-26 (kept across a launcher restart; the spec's GRAPH-8 starts with none)
    let dir = temp();
    let h = a_history();
    {
        let mut out = Outbox::open(dir.path());
        assert_eq!(out.take_saved_history(), None);
        out.save_history(&h, T0);
    }
    let mut out = Outbox::open(dir.path());
    assert_eq!(out.take_saved_history(), Some(h.to_json(T0)));
    assert_eq!(out.take_saved_history(), None, "handed over once");
}

#[test]
fn a_history_save_never_waits_on_the_disk_and_the_last_one_is_kept() {
    // #17 "Also": the 24 h history was turned into JSON and written on the runtime thread every
    // minute (2.3 MB, 50-260 ms with 9 processes). Another writer holds the database's lock
    // here: a save on the caller's thread would wait for it (and give the database up after
    // the busy timeout); the saver's thread waits instead, and writes the last save handed.
    let dir = temp();
    let mut out = Outbox::open(dir.path());
    let path = dir.path().join("databases").join(DB_FILE);
    let other = match Connection::open(&path) {
        Ok(c) => c,
        Err(e) => panic!("second connection: {e}"),
    };
    assert!(other.execute_batch("BEGIN IMMEDIATE").is_ok());
    let first = a_history();
    let mut last = a_history();
    last.process_ready("tx1", "tx-worker", T0 + 5);
    let before = std::time::Instant::now();
    out.save_history(&first, T0);
    out.save_history(&last, T0 + 5);
    // Both returned though the lock is held; the runtime thread went on.
    let waited = before.elapsed();
    assert!(out.is_persistent());
    let mut log = EventLog::new(0, T0);
    assert!(other.execute_batch("COMMIT").is_ok());
    out.hold(log.launcher_started(1, T0));
    drop(out);
    let mut again = Outbox::open(dir.path());
    let kept = again.take_saved_history();
    assert!(
        kept == Some(last.to_json(T0 + 5)),
        "the last save handed is the one kept (the calls took {waited:?})"
    );
    assert_eq!(again.waiting().len(), 1);
}

#[test]
fn a_database_that_cannot_be_opened_falls_back_to_memory() {
    // The `databases` folder can't be made: a file is in its place. (A read-only directory
    // can't be tested this way as root, which writes anywhere.)
    let dir = temp();
    let blocked = std::fs::write(dir.path().join("databases"), b"not a folder");
    assert!(blocked.is_ok());
    let mut out = Outbox::open(dir.path());
    assert!(!out.is_persistent());
    let mut log = EventLog::new(0, T0);
    let a = log.launcher_started(1, T0);
    out.hold(a.clone());
    assert_eq!(out.waiting(), vec![a.clone()]);
    out.delivered(a.id);
    assert!(out.is_empty());
}

#[test]
fn a_database_that_cannot_be_written_falls_back_to_memory() {
    // A read-only (or full) disk: the write fails, the outbox logs once and carries on.
    let dir = temp();
    let mut log = EventLog::new(0, T0);
    let a = log.launcher_started(1, T0);
    let b = log.recycling("tx1", "over", T0 + 1);
    let mut out = Outbox::open(dir.path());
    out.hold(a.clone());
    out.make_read_only();
    out.hold(b.clone());
    assert!(!out.is_persistent());
    assert_eq!(out.waiting(), vec![a.clone(), b.clone()]);
    // The history isn't written any more either; saving it is no error.
    out.save_history(&a_history(), T0);
    drop(out);
    // What was written before the failure is still there.
    let out = Outbox::open(dir.path());
    assert_eq!(out.waiting(), vec![a]);
}
