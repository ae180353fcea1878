//! What an operator runs fhircluster with: the signals and what each means, systemd's notify
//! protocol, the launcher's own read-only endpoints (`/livez`, `/readyz`, `/status`,
//! `/metrics`), the control socket the actions go to, and the `fhircluster status` table.

pub(crate) mod admin;
pub(crate) mod admin_room;
pub(crate) mod agent;
pub(crate) mod client_port;
pub(crate) mod control_client;
pub(crate) mod control_conns;
pub(crate) mod control_proto;
pub(crate) mod control_serve;
pub(crate) mod control_socket;
pub(crate) mod extend;
pub(crate) mod front_series;
pub(crate) mod launcher_lookup;
pub mod line_chart;
pub(crate) mod metrics;
pub mod notify;
pub(crate) mod pid_file;
pub(crate) mod process_series;
pub(crate) mod readiness;
pub(crate) mod restart_cmd;
pub(crate) mod scale_cmd;
pub(crate) mod signal_stream;
pub(crate) mod status_page;
pub(crate) mod status_table;
pub(crate) mod stdout;
pub(crate) mod tx_usage;
pub(crate) mod upgrade_cmd;
pub(crate) mod upgrade_desk;
