//! What an operator runs fhircluster with: systemd's notify protocol, the launcher's own
//! endpoints (`/livez`, `/readyz`, `/status`, `/metrics`) and the `fhircluster status` table.

pub mod admin;
pub mod child_log;
pub mod journald;
pub mod log_queue;
pub mod logging;
pub mod metrics;
pub mod notify;
pub mod status_table;
