//! What an operator runs fhircluster with: the signals and what each means, systemd's notify
//! protocol, the launcher's own endpoints (`/livez`, `/readyz`, `/status`, `/metrics`) and the
//! `fhircluster status` table.

pub mod admin;
pub mod build_info;
pub mod child_log;
pub mod client_port;
pub mod extend;
pub mod journald;
pub mod log_queue;
pub mod logging;
pub mod metrics;
pub mod notify;
pub mod signal_stream;
pub mod signals;
pub mod status_table;
pub mod tx_usage;
