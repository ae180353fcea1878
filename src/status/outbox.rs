//! The outbox: the cluster events waiting for the master, and the graph history, kept in SQLite
//! at `<data dir>/databases/fhircluster.db` so that neither is lost when the launcher restarts or
//! gives up on the master. cluster.js keeps them in memory only (the spec's GRAPH-8 and EVENT-18
//! state the loss as a limit); fhircluster keeps them (DEC-26) where it can, and never does worse.
//!
//! Theory of operation: [`Outbox`] wraps the pure queue ([`Pending`]) and mirrors every change
//! into the database in one transaction: an event held, a counts event merged (DEC-18), events
//! delivered. An event is written when it happens and deleted only once *delivered*: the master
//! acknowledged it (`eventsReceived`) or, for a master that doesn't acknowledge, its channel
//! write succeeded (the shell then calls [`Outbox::delivered`]). Queued for the channel is not
//! delivered, so a master alive but not reading, or a launcher killed with events queued, loses
//! none. The disk holds every event waiting, up to [`MAX_ON_DISK`] (DEC-32: beyond, the oldest
//! is dropped, counted, and the drops logged once a minute); memory holds the oldest
//! [`MAX_HELD`] and reads the rest back as they go. The highest id ever used is kept too, so ids
//! go on increasing.
//!
//! The database is a convenience, not a duty: if it can't be opened or written (a read-only or
//! full disk) the outbox logs one WARNING, takes back into memory what it can still read,
//! closes it and carries on in memory, as cluster.js does (beyond [`MAX_HELD`] the oldest
//! event is then dropped, EVENT-16). It never fails the launcher.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;
use tracing::warn;

use super::events::Event;
use super::history::History;
use super::history_saver::HistorySaver;
use super::pending::{Pending, MAX_HELD, MAX_ON_DISK};

/// The database's file name under `<data dir>/databases/`.
pub const DB_FILE: &str = "fhircluster.db";

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
";

pub struct Outbox {
    pending: Pending,
    db: Option<Connection>,
    path: PathBuf,
    last_id: u64,
    /// The history kept by the run before, until the keeper takes it.
    history: Option<Value>,
    /// Writes the history on a thread of its own (`history_saver.rs`); with the database.
    saver: Option<HistorySaver>,
}

impl Outbox {
    /// Opens (or creates) `<data_dir>/databases/fhircluster.db` and loads what was waiting.
    pub fn open(data_dir: &Path) -> Outbox {
        Outbox::open_at(&data_dir.join("databases").join(DB_FILE))
    }

    /// Opens the database at `path`; on any failure, logs once and keeps everything in memory.
    pub fn open_at(path: &Path) -> Outbox {
        Outbox::open_with_caps(path, MAX_HELD, MAX_ON_DISK)
    }

    /// The same with the window's and the disk's caps given (tests use small ones).
    fn open_with_caps(path: &Path, window: usize, disk_cap: usize) -> Outbox {
        let mut outbox = Outbox::in_memory();
        outbox.path = path.to_path_buf();
        match load(path, window, disk_cap) {
            Ok(Loaded {
                db,
                events,
                beyond,
                last_id,
                history,
                dropped,
            }) => {
                outbox.pending = Pending::with_caps(window, disk_cap, true);
                for ev in events {
                    outbox.pending.restore(ev);
                }
                outbox.pending.set_beyond(beyond);
                outbox.pending.dropped_before(dropped);
                outbox.last_id = last_id.max(outbox.pending.last_id().unwrap_or(0));
                outbox.history = history;
                outbox.db = Some(db);
                outbox.saver = HistorySaver::start(path.to_path_buf());
            }
            Err(e) => warn!(
                "cluster events and graph history are kept in memory only: can't open {}: {e:#}",
                path.display()
            ),
        }
        outbox
    }

    /// An outbox with no database (what cluster.js does).
    pub fn in_memory() -> Outbox {
        Outbox {
            pending: Pending::new(),
            db: None,
            path: PathBuf::new(),
            last_id: 0,
            history: None,
            saver: None,
        }
    }

    /// Whether changes still reach the database.
    #[cfg(test)]
    pub fn is_persistent(&self) -> bool {
        self.db.is_some()
    }

    /// The highest event id used so far, across restarts: give it to `EventLog::new`.
    pub fn last_id(&self) -> u64 {
        self.last_id
    }

    /// Holds an event for the master (EVENT-15, EVENT-16, DEC-18, DEC-32).
    pub fn hold(&mut self, ev: Event) {
        self.last_id = self.last_id.max(ev.id);
        let held = self.pending.hold(ev);
        let last_id = self.last_id;
        self.write(|tx| {
            for id in &held.removed {
                tx.execute("DELETE FROM events WHERE id = ?1", params![to_sql(*id)])?;
            }
            if let Some(ev) = &held.held {
                let body = serde_json::to_string(ev).unwrap_or_default();
                tx.execute(
                    "INSERT OR REPLACE INTO events (id, body) VALUES (?1, ?2)",
                    params![to_sql(ev.id), body],
                )?;
            }
            tx.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('lastId', ?1)",
                params![last_id.to_string()],
            )?;
            Ok(())
        });
        // At the disk's cap the oldest left the window: the next comes back from disk.
        self.refill();
    }

    /// Called once a minute: the events dropped for a cap since the last call, in one line
    /// (DEC-32, EVENT-16), none when none were.
    pub fn log_drops(&mut self) {
        let n = self.pending.take_dropped();
        if n == 0 {
            return;
        }
        if self.db.is_some() {
            warn!(
                "{n} cluster event(s) dropped in the last minute, the oldest first: the master \
                 has not taken them and the database holds at most {} events",
                self.pending.disk_cap()
            );
        } else {
            warn!(
                "{n} cluster event(s) dropped in the last minute, the oldest first: the master \
                 has not taken them and memory holds at most {MAX_HELD} events (no \
                 database)"
            );
        }
    }

    /// What waits in memory for the master, oldest first (EVENT-17).
    #[cfg(test)]
    pub fn waiting(&self) -> Vec<Event> {
        self.pending.waiting()
    }

    /// The same, as the values of `ToChild::Events { events }`.
    #[cfg(test)]
    pub fn waiting_json(&self) -> Vec<Value> {
        self.pending.waiting().iter().map(Event::to_json).collect()
    }

    /// The next events to send the master, oldest first, at most `max` (none while earlier
    /// ones are on their way to it).
    pub fn to_send(&self, max: usize) -> Vec<Event> {
        self.pending.to_send(max)
    }

    /// The events up to `id` were handed to the master's channel (not yet delivered).
    pub fn sent(&mut self, id: u64) {
        self.pending.sent(id);
    }

    /// Whether events were sent to the master and not yet confirmed.
    pub fn on_their_way(&self) -> bool {
        self.pending.on_their_way()
    }

    /// A new master: what the last one didn't confirm goes again.
    pub fn resend(&mut self) {
        self.pending.resend();
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Events dropped for the cap with no database (for a log line).
    #[cfg(test)]
    pub fn dropped(&self) -> u64 {
        self.pending.dropped()
    }

    /// The master has every event up to `id` (it acknowledged them, or its channel took them):
    /// they are never sent again.
    pub fn delivered(&mut self, id: u64) {
        if self.pending.delivered(id).is_empty() {
            return;
        }
        self.write(|tx| {
            tx.execute("DELETE FROM events WHERE id <= ?1", params![to_sql(id)])?;
            Ok(())
        });
        self.refill();
    }

    /// Reads back into memory what waits on disk only, as far as the window has room.
    fn refill(&mut self) {
        let (room, after) = self.pending.room();
        if room == 0 {
            return;
        }
        let Some(db) = &self.db else {
            return;
        };
        match read_events(db, after, room) {
            Ok(read) => {
                let complete = read.len() < room;
                self.pending.refill(read, complete);
            }
            Err(e) => self.lose_db(&e.to_string()),
        }
    }

    /// Keeps the graph history, replacing the last one kept. Returns at once: the history is
    /// turned into JSON and written on the saver's thread (`history_saver.rs` says why).
    pub fn save_history(&mut self, history: &History, now_ms: u64) {
        if let Some(saver) = &self.saver {
            saver.save(history, now_ms);
        }
    }

    /// The history the run before kept (for `History::restore`), once.
    pub fn take_saved_history(&mut self) -> Option<Value> {
        self.history.take()
    }

    /// Runs `f` in a transaction; on failure, logs once and goes on in memory.
    fn write(&mut self, f: impl FnOnce(&rusqlite::Transaction) -> rusqlite::Result<()>) {
        let Some(db) = self.db.as_mut() else {
            return;
        };
        let result = db.transaction().and_then(|tx| {
            f(&tx)?;
            tx.commit()
        });
        if let Err(e) = result {
            self.lose_db(&e.to_string());
        }
    }

    /// The database failed: say so once, take back into memory what waited on disk only (as
    /// far as it can still be read) and go on in memory.
    fn lose_db(&mut self, why: &str) {
        warn!(
            "cluster events and graph history are kept in memory only from now on: can't \
             write {}: {why}",
            self.path.display()
        );
        let Some(db) = self.db.take() else {
            return;
        };
        self.saver = None;
        let (_, after) = self.pending.room();
        let rescued = read_events(&db, after, usize::MAX).unwrap_or_default();
        let missing = self.pending.stop_spilling();
        let lost = missing.saturating_sub(rescued.len() as u64);
        for ev in rescued {
            self.pending.restore(ev);
        }
        if lost > 0 {
            warn!("{lost} cluster events waiting on disk could not be read back: lost");
        }
    }

    #[cfg(test)]
    fn make_read_only(&self) {
        if let Some(db) = &self.db {
            let _ = db.execute_batch("PRAGMA query_only = ON");
        }
    }
}

/// What an opened database holds.
struct Loaded {
    db: Connection,
    /// The oldest events waiting (at most the window).
    events: Vec<Event>,
    /// How many more wait on disk only.
    beyond: u64,
    /// The highest id used.
    last_id: u64,
    history: Option<Value>,
    /// Events dropped at the open, the database being over its cap (an older version kept
    /// every event).
    dropped: u64,
}

fn load(path: &Path, window: usize, disk_cap: usize) -> anyhow::Result<Loaded> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let db = Connection::open(path)?;
    // The history saver's write (a few pages) may hold the lock as an event is written.
    db.busy_timeout(std::time::Duration::from_secs(1))?;
    let mode: String = db.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        anyhow::bail!("WAL mode not available (journal mode {mode})");
    }
    db.execute_batch("PRAGMA synchronous = NORMAL;")?;
    db.execute_batch(SCHEMA)?;
    let count = |db: &Connection| -> rusqlite::Result<u64> {
        let n: i64 = db.query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    };
    let over = count(&db)?.saturating_sub(disk_cap as u64);
    if over > 0 {
        db.execute(
            "DELETE FROM events WHERE id IN (SELECT id FROM events ORDER BY id LIMIT ?1)",
            params![to_sql(over)],
        )?;
    }
    let events = read_events(&db, 0, window)?;
    let beyond = count(&db)?.saturating_sub(events.len() as u64);
    let meta = |key: &str| -> rusqlite::Result<Option<String>> {
        db.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
    };
    let last_id = meta("lastId")?.and_then(|v| v.parse().ok()).unwrap_or(0);
    let history = meta("history")?.and_then(|v| serde_json::from_str(&v).ok());
    Ok(Loaded {
        db,
        events,
        beyond,
        last_id,
        history,
        dropped: over,
    })
}

/// At most `max` events with ids above `after`, oldest first. A row this version can't read is
/// left behind, not fatal.
fn read_events(db: &Connection, after: u64, max: usize) -> rusqlite::Result<Vec<Event>> {
    let limit = i64::try_from(max).unwrap_or(i64::MAX);
    let mut stmt = db.prepare("SELECT body FROM events WHERE id > ?1 ORDER BY id LIMIT ?2")?;
    let rows = stmt.query_map(params![to_sql(after), limit], |r| r.get::<_, String>(0))?;
    let mut events = Vec::new();
    for body in rows {
        if let Ok(ev) = serde_json::from_str::<Event>(&body?) {
            events.push(ev);
        }
    }
    Ok(events)
}

/// Ids are below 2^63 (ms × 1000 for the next quarter of a million years).
fn to_sql(id: u64) -> i64 {
    i64::try_from(id).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;
