//! The log pipeline every layer writes through: the launcher's own log (`logging.rs`), the
//! bounded queue that keeps a slow stdout or journal from stalling a request (`log_queue.rs`),
//! the children's lines (`child_log.rs`), journald's native protocol (`journald.rs`), and the
//! access log with its file (`access_log.rs`, `access_log_file.rs`, `line_file.rs`), and the
//! escaping of a line from outside for a terminal (`terminal_safe.rs`). It is a
//! floor: the request path, the supervisor and the operator's edge stand on it, and it imports
//! none of them.

pub(crate) mod access_log;
pub(crate) mod access_log_file;
pub(crate) mod child_log;
pub(crate) mod journald;
pub(crate) mod line_file;
pub(crate) mod log_queue;
pub mod logging;
pub(crate) mod terminal_safe;
