//! Tests of the events waiting for the master, by spec ID.

use super::*;
use crate::status::events::{EventLog, LostKind, RefusalKind};

const T0: u64 = 1_700_000_000_000;

fn event(log: &mut EventLog, i: u64) -> Event {
    log.recycling(&format!("tx{i}"), "r", T0 + i)
}

fn ids(evs: &[Event]) -> Vec<u64> {
    evs.iter().map(|e| e.id).collect()
}

#[test]
fn with_no_disk_it_holds_at_most_5000_dropping_the_oldest() {
    // spec: EVENT-15, EVENT-16 (the spec's cap, kept where memory is all there is)
    let mut log = EventLog::new(0, T0);
    let mut q = Pending::new();
    let first = event(&mut log, 0);
    q.hold(first.clone());
    for i in 1..MAX_HELD as u64 {
        q.hold(event(&mut log, i));
    }
    assert_eq!(q.len(), MAX_HELD);
    let next = event(&mut log, 9999);
    let held = q.hold(next.clone());
    assert_eq!(held.removed, vec![first.id]);
    assert_eq!(held.held, Some(next.clone()));
    assert_eq!(q.len(), MAX_HELD);
    assert_eq!(q.dropped(), 1);
    assert_eq!(q.waiting().last(), Some(&next));
}

#[test]
fn with_a_disk_nothing_is_dropped_and_memory_holds_a_window() {
    // spec: EVENT-15, EVENT-17 (below the disk's cap never dropped: beyond the window, on disk only)
    let mut log = EventLog::new(0, T0);
    let mut q = Pending::with_cap(3, true);
    let evs: Vec<Event> = (0..5).map(|i| event(&mut log, i)).collect();
    for e in &evs {
        let held = q.hold(e.clone());
        assert_eq!(held.removed, Vec::<u64>::new());
        assert_eq!(
            held.held.as_ref(),
            Some(e),
            "every event is written to disk"
        );
    }
    assert_eq!((q.len(), q.dropped()), (5, 0));
    assert_eq!(
        ids(&q.waiting()),
        ids(&evs[..3]),
        "memory: the oldest three"
    );
    assert_eq!(q.room(), (0, evs[2].id));
    // Two are delivered: the window reads the next ones back from disk, in order.
    q.delivered(evs[1].id);
    assert_eq!(q.room(), (2, evs[2].id));
    q.refill(evs[3..].to_vec(), true);
    assert_eq!(ids(&q.waiting()), ids(&evs[2..]));
    assert_eq!(q.len(), 3);
    assert_eq!(q.room(), (0, evs[4].id), "nothing left on disk only");
}

#[test]
fn an_event_is_sent_once_to_a_master_and_again_only_to_the_next() {
    // spec: EVENT-13, EVENT-17 (delivered = acknowledged or written, not queued)
    let mut log = EventLog::new(0, T0);
    let mut q = Pending::new();
    let (a, b, c) = (event(&mut log, 1), event(&mut log, 2), event(&mut log, 3));
    q.hold(a.clone());
    q.hold(b.clone());
    assert_eq!(q.to_send(1), vec![a.clone()], "a batch at most max long");
    assert_eq!(q.to_send(10), vec![a.clone(), b.clone()]);
    q.sent(b.id);
    assert_eq!(
        q.to_send(10),
        vec![],
        "on its way: not sent twice to this master"
    );
    q.hold(c.clone());
    assert_eq!(q.to_send(10), vec![c.clone()]);
    q.sent(c.id);
    // The master took `a` only, then ended: the next master gets what it didn't confirm.
    assert_eq!(q.delivered(a.id), vec![a.id]);
    assert_eq!(q.len(), 2, "sent is not delivered");
    q.resend();
    assert_eq!(q.to_send(10), vec![b.clone(), c.clone()]);
    q.sent(c.id);
    q.delivered(c.id);
    assert!(q.is_empty());
}

#[test]
fn counts_are_merged_while_they_wait_and_outside_the_cap() {
    // spec: DEC-18
    let mut log = EventLog::new(0, T0);
    let mut q = Pending::with_cap(2, false);
    log.count_refused(RefusalKind::QueueWait);
    let c1 = log.minute(T0 + 60_000);
    let c1_id = c1.as_ref().map(|e| e.id).unwrap_or(0);
    c1.map(|e| q.hold(e));
    q.hold(event(&mut log, 1));
    log.count_refused(RefusalKind::QueueWait);
    log.count_lost("tx1", LostKind::BadGateway502);
    let held = log
        .minute(T0 + 120_000)
        .map(|e| q.hold(e))
        .unwrap_or_default();
    assert_eq!(held.removed, vec![c1_id]);
    let waiting = q.waiting();
    assert_eq!(waiting.len(), 2);
    let v = waiting[1].to_json();
    assert_eq!(v["kind"], "counts");
    assert_eq!(v["from"], T0);
    assert_eq!(v["to"], T0 + 120_000);
    assert_eq!(v["refused"]["queueWait"], 2);
    assert_eq!(v["lost"]["tx1"]["badGateway502"], 1);
    // The cap is on events: two more events drop the oldest event, not the counts.
    q.hold(event(&mut log, 2));
    q.hold(event(&mut log, 3));
    assert_eq!(q.len(), 2);
    assert!(q.waiting().iter().any(Event::is_counts));
}

#[test]
fn counts_already_sent_are_never_merged_again() {
    // spec: DEC-18, EVENT-14 (a sent counts event may be at the master: merging would count it
    // twice; it is sent again as it was, same id, should the master not confirm it)
    let mut log = EventLog::new(0, T0);
    let mut q = Pending::new();
    log.count_refused(RefusalKind::Stopping);
    let c1 = log.minute(T0 + 60_000).map(|e| (e.id, q.hold(e)));
    let c1_id = c1.map(|(id, _)| id).unwrap_or(0);
    q.sent(c1_id);
    q.resend();
    log.count_refused(RefusalKind::Stopping);
    let held = log.minute(T0 + 120_000).map(|e| q.hold(e));
    assert_eq!(held.map(|h| h.removed), Some(vec![]));
    let sent = q.to_send(10);
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[0].id, c1_id);
    assert_eq!(sent[1].to_json()["refused"]["stopping"], 1);
}

#[test]
fn counts_on_disk_only_are_merged_there() {
    // spec: DEC-18 (one entry while they wait, beyond the window too)
    let mut log = EventLog::new(0, T0);
    let mut q = Pending::with_cap(1, true);
    q.hold(event(&mut log, 1));
    log.count_lost("tx1", LostKind::Timeout504);
    let c1 = log
        .minute(T0 + 60_000)
        .map(|e| q.hold(e))
        .unwrap_or_default();
    let c1_id = c1.held.as_ref().map_or(0, |e| e.id);
    assert_eq!(q.len(), 2);
    log.count_lost("tx1", LostKind::Timeout504);
    let c2 = log
        .minute(T0 + 120_000)
        .map(|e| q.hold(e))
        .unwrap_or_default();
    assert_eq!(c2.removed, vec![c1_id], "the one on disk is replaced");
    let merged = c2.held.map(|e| e.to_json()).unwrap_or_default();
    assert_eq!(merged["lost"]["tx1"]["timeout504"], 2);
    assert_eq!(q.len(), 2);
}

#[test]
fn a_default_queue_has_the_spec_cap() {
    // spec: EVENT-16 (memory only: 5,000, the oldest dropped first)
    let mut log = EventLog::new(0, T0);
    let mut q = Pending::default();
    let first = q.hold(event(&mut log, 0)).held.map(|e| e.id);
    for i in 1..=MAX_HELD as u64 {
        q.hold(event(&mut log, i));
    }
    assert_eq!((q.len(), q.dropped()), (MAX_HELD, 1));
    assert_eq!(MAX_HELD, 5000);
    assert_ne!(q.waiting().first().map(|e| e.id), first, "the oldest went");
}

#[test]
fn with_a_disk_the_store_holds_at_most_its_cap_dropping_the_oldest_counted() {
    // spec: DEC-32 (the disk's own cap: the oldest dropped first, counted for the log line)
    let mut log = EventLog::new(0, T0);
    let mut q = Pending::with_caps(3, 5, true);
    let evs: Vec<Event> = (0..8).map(|i| event(&mut log, i)).collect();
    let mut removed = Vec::new();
    for e in &evs {
        let held = q.hold(e.clone());
        assert_eq!(held.held.as_ref(), Some(e), "the newest is always kept");
        removed.extend(held.removed);
        assert!(q.len() <= 5, "{} held", q.len());
    }
    assert_eq!(removed, ids(&evs[..3]), "the oldest three, in order");
    assert_eq!((q.len(), q.dropped()), (5, 3));
    assert_eq!(q.take_dropped(), 3);
    assert_eq!(q.take_dropped(), 0, "each drop logged once");
    assert_eq!(Pending::with_cap(3, true).disk_cap(), MAX_ON_DISK);
    assert_eq!(MAX_ON_DISK, 100_000);
}
