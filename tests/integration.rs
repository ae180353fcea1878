//! The integration tests, one binary (as ripgrep does): each file in `tests/` is a module of
//! it, so the build links one test program instead of one per file (Cargo.toml sets
//! `autotests = false`: a new file is added here). The tests run the real binaries
//! (`fhircluster`, `fhirsmith-sim`, `fhircluster-load`) as child processes; `common` is their
//! shared harness. Run one file's tests with
//! `cargo nextest run -E 'binary(integration) & test(/^ops_notify::/)'` or
//! `cargo test --test integration ops_notify::`.

mod common;

mod anyserver;
mod bench_compare;
mod build_pgo;
mod check;
mod check_settings;
mod cli_stdout;
mod cli_usage;
mod front_counts;
mod front_figures;
mod hang_watchdog;
mod ipc_node;
mod layers;
mod layout;
mod load_smoke;
mod memory_recycle;
mod monitoring;
mod node_report;
mod ops_access_log;
mod ops_admin;
mod ops_agent;
mod ops_control;
mod ops_demo;
mod ops_haproxy;
mod ops_kubernetes;
mod ops_listen;
mod ops_logrotate;
mod ops_logs;
mod ops_metrics;
mod ops_nginx;
mod ops_notify;
mod ops_pid_file;
mod ops_scale;
mod ops_served_by;
mod ops_signals;
mod ops_status;
mod ops_status_page;
mod ops_status_page_truth;
mod ops_systemd;
mod overlap_status;
mod overlap_workers;
mod package_files;
mod proxy_drain;
mod proxy_edge;
mod proxy_failures;
mod proxy_half_close;
mod proxy_lobby;
mod proxy_park;
mod proxy_predict;
mod proxy_queue;
mod proxy_routing;
mod proxy_saturation;
mod proxy_slots;
mod pure_core;
mod readiness;
mod readme_docker;
mod reliability_admin;
mod reliability_attribution;
mod reliability_clients;
mod reliability_faults;
mod reliability_front;
mod reliability_orphans;
mod reliability_query_of_death;
mod reliability_resources;
mod reliability_retry;
mod reliability_upstream_heads;
mod reload;
mod reload_whole_file;
mod rolling_overlap;
mod setting_names;
mod shared_cache;
mod sim_answers;
mod sim_lifecycle;
mod sizing;
mod status_counts;
mod status_events;
mod status_history;
mod status_snapshot;
mod stop;
mod stop_lame_duck;
mod supervise;
mod upgrade;
mod upgrade_counters;
mod upgrade_faults;
mod upgrade_fixture;
mod upgrade_keepalive;
mod upgrade_setup;
