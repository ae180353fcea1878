//! The graph history's save, off the launcher's runtime thread.
//!
//! Every minute the whole 24 h history is kept (`Outbox::save_history`). A full day of many
//! processes is megabytes of JSON, and making it and writing it to SQLite takes long enough that,
//! on the runtime thread, it stalled every request with the default `proxyThreads: 1`. Here a
//! thread of its own, with a connection of its own to the same database (WAL: its write holds the
//! lock only while the pages are written, after the JSON is made), takes the latest history handed
//! to it and writes it; a newer one handed while it writes replaces the one waiting (only the last
//! matters). Dropping the saver writes what waits and ends the thread.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{params, Connection};
use tracing::warn;

use super::history::History;

/// How long the saver's write waits for the outbox's (a few pages) before it gives up on the
/// database.
const BUSY: Duration = Duration::from_secs(10);

pub(crate) struct HistorySaver {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Shared {
    slot: Mutex<Slot>,
    wake: Condvar,
}

#[derive(Default)]
struct Slot {
    /// The latest history handed over and not written yet, with the time to write it as of.
    next: Option<(History, u64)>,
    closing: bool,
}

impl HistorySaver {
    /// A saver writing to the database at `path` (the outbox's, already opened and set up).
    /// `None` if its thread can't be started: the history then isn't kept (logged).
    pub(crate) fn start(path: PathBuf) -> Option<HistorySaver> {
        let shared = Arc::new(Shared::default());
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name("fhircluster-history".into())
            .spawn(move || run(&path, &theirs));
        match thread {
            Ok(t) => Some(HistorySaver {
                shared,
                thread: Some(t),
            }),
            Err(e) => {
                warn!("the graph history is kept in memory only: can't start its writer: {e}");
                None
            }
        }
    }

    /// Hands the history over to be written; returns at once.
    pub(crate) fn save(&self, history: &History, now_ms: u64) {
        let mut slot = lock(&self.shared);
        slot.next = Some((history.clone(), now_ms));
        self.shared.wake.notify_one();
    }
}

impl Drop for HistorySaver {
    /// Writes what waits (one save at most), then ends the thread.
    fn drop(&mut self) {
        lock(&self.shared).closing = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Slot> {
    shared.slot.lock().unwrap_or_else(PoisonError::into_inner)
}

fn run(path: &std::path::Path, shared: &Shared) {
    let mut db: Option<Connection> = None;
    let mut failed = false;
    loop {
        let next = {
            let mut slot = lock(shared);
            while slot.next.is_none() && !slot.closing {
                slot = shared
                    .wake
                    .wait(slot)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            match slot.next.take() {
                Some(next) => next,
                None => return,
            }
        };
        if failed {
            continue;
        }
        let (history, now_ms) = next;
        let text = history.to_json(now_ms).to_string();
        if let Err(e) = write(path, &mut db, &text) {
            warn!(
                "the graph history is no longer kept: can't write {}: {e}",
                path.display()
            );
            failed = true;
            db = None;
        }
    }
}

fn write(path: &std::path::Path, db: &mut Option<Connection>, text: &str) -> rusqlite::Result<()> {
    if db.is_none() {
        let c = Connection::open(path)?;
        c.busy_timeout(BUSY)?;
        c.execute_batch("PRAGMA synchronous = NORMAL;")?;
        *db = Some(c);
    }
    let Some(c) = db.as_mut() else {
        return Ok(());
    };
    let tx = c.transaction()?;
    tx.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('history', ?1)",
        params![text],
    )?;
    tx.commit()
}
