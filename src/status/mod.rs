//! The launcher's view of the cluster for the master's pages: the status snapshot, the graph
//! history, the cluster events for the daily report (all pure), and the outbox that keeps what
//! waits for the master in SQLite.

pub mod events;
pub mod front;
pub mod history;
mod history_saver;
pub mod keeper;
pub mod outbox;
pub mod pending;
pub mod readings;
pub mod restarts;
pub mod snapshot;
pub mod tally;
