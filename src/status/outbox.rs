//! The outbox: the cluster events waiting for the master, and the graph history, kept in SQLite
//! at `<data dir>/databases/fhircluster.db` so that neither is lost when the launcher restarts or
//! gives up on the master. cluster.js keeps them in memory only (EVENT-18 states the loss as a
//! limit); fhircluster does better where it can, and never worse.
//!
//! Theory of operation: [`Outbox`] wraps the pure queue ([`Pending`]) and mirrors every change
//! into the database in one transaction: an event held, an event dropped for the cap or merged
//! (DEC-18), events delivered. "Delivered" is the master's channel write having succeeded; the
//! shell then calls [`Outbox::delivered`] and the rows go, so nothing is sent twice after a
//! restart. The highest id ever used is kept too, so ids go on increasing.
//!
//! The database is a convenience, not a duty: if it can't be opened or written (a read-only or
//! full disk) the outbox logs one WARNING, closes it and carries on in memory, as cluster.js
//! does. It never fails the launcher.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;
use tracing::warn;

use super::events::{Event, Pending};

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
    history: Option<Value>,
}

impl Outbox {
    /// Opens (or creates) `<data_dir>/databases/fhircluster.db` and loads what was waiting.
    pub fn open(data_dir: &Path) -> Outbox {
        Outbox::open_at(&data_dir.join("databases").join(DB_FILE))
    }

    /// Opens the database at `path`; on any failure, logs once and keeps everything in memory.
    pub fn open_at(path: &Path) -> Outbox {
        let mut outbox = Outbox::in_memory();
        outbox.path = path.to_path_buf();
        match load(path) {
            Ok((db, events, last_id, history)) => {
                for ev in events {
                    outbox.pending.hold(ev);
                }
                outbox.last_id = last_id.max(outbox.pending.last_id().unwrap_or(0));
                outbox.history = history;
                outbox.db = Some(db);
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
        }
    }

    /// Whether changes still reach the database.
    pub fn is_persistent(&self) -> bool {
        self.db.is_some()
    }

    /// The highest event id used so far, across restarts: give it to `EventLog::new`.
    pub fn last_id(&self) -> u64 {
        self.last_id
    }

    /// Holds an event for the master (EVENT-15, EVENT-16, DEC-18).
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
    }

    /// Everything waiting for the master, oldest first (EVENT-17).
    pub fn waiting(&self) -> Vec<Event> {
        self.pending.waiting()
    }

    /// The same, as the values of `ToChild::Events { events }`.
    pub fn waiting_json(&self) -> Vec<Value> {
        self.pending.waiting().iter().map(Event::to_json).collect()
    }

    pub fn len(&self) -> usize {
        self.pending.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Events dropped for the cap (for a log line).
    pub fn dropped(&self) -> u64 {
        self.pending.dropped()
    }

    /// The master's channel took every event up to `id`: they are never sent again.
    pub fn delivered(&mut self, id: u64) {
        if self.pending.delivered(id).is_empty() {
            return;
        }
        self.write(|tx| {
            tx.execute("DELETE FROM events WHERE id <= ?1", params![to_sql(id)])?;
            Ok(())
        });
    }

    /// Keeps the graph history (`History::to_json`), replacing the last one kept.
    pub fn save_history(&mut self, history: &Value) {
        self.history = Some(history.clone());
        let text = history.to_string();
        self.write(|tx| {
            tx.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('history', ?1)",
                params![text],
            )?;
            Ok(())
        });
    }

    /// The history kept last (by this run, or the run before, for `History::restore`).
    pub fn saved_history(&self) -> Option<&Value> {
        self.history.as_ref()
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
            warn!(
                "cluster events and graph history are kept in memory only from now on: can't \
                 write {}: {e}",
                self.path.display()
            );
            self.db = None;
        }
    }

    #[cfg(test)]
    fn make_read_only(&self) {
        if let Some(db) = &self.db {
            let _ = db.execute_batch("PRAGMA query_only = ON");
        }
    }
}

type Loaded = (Connection, Vec<Event>, u64, Option<Value>);

fn load(path: &Path) -> anyhow::Result<Loaded> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let db = Connection::open(path)?;
    db.busy_timeout(std::time::Duration::from_millis(200))?;
    let mode: String = db.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        anyhow::bail!("WAL mode not available (journal mode {mode})");
    }
    db.execute_batch("PRAGMA synchronous = NORMAL;")?;
    db.execute_batch(SCHEMA)?;
    let mut events = Vec::new();
    {
        let mut stmt = db.prepare("SELECT body FROM events ORDER BY id")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        for body in rows {
            // A row this version can't read is left behind, not fatal.
            if let Ok(ev) = serde_json::from_str::<Event>(&body?) {
                events.push(ev);
            }
        }
    }
    let meta = |key: &str| -> rusqlite::Result<Option<String>> {
        db.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
    };
    let last_id = meta("lastId")?.and_then(|v| v.parse().ok()).unwrap_or(0);
    let history = meta("history")?.and_then(|v| serde_json::from_str(&v).ok());
    Ok((db, events, last_id, history))
}

/// Ids are below 2^63 (ms × 1000 for the next quarter of a million years).
fn to_sql(id: u64) -> i64 {
    i64::try_from(id).unwrap_or(i64::MAX)
}

#[cfg(test)]
#[path = "outbox_tests.rs"]
mod tests;
