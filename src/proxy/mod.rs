//! The front door: routing (pure), admission and scheduling (pure), forwarding and the listener
//! (the shell).

pub(crate) mod admission;
pub(crate) mod answer;
pub(crate) mod bad_gateway_log;
pub(crate) mod budget;
pub(crate) mod carried_counters;
pub(crate) mod conn;
pub mod conn_limit;
pub(crate) mod counters;
pub(crate) mod death;
pub(crate) mod failure;
pub(crate) mod finish;
pub(crate) mod forward;
pub(crate) mod front;
mod handled;
pub(crate) mod http1;
pub(crate) mod interval_histogram;
pub(crate) mod lane;
pub(crate) mod listener;
pub(crate) mod listener_settings;
pub(crate) mod master_paths;
pub(crate) mod observed;
pub(crate) mod pipeline;
pub(crate) mod process_counters;
pub(crate) mod refusal_log;
pub(crate) mod reload_note;
pub(crate) mod roster;
pub(crate) mod route;
pub(crate) mod saturation;
pub(crate) mod saturation_watch;
pub mod scheduler;
pub(crate) mod served;
pub mod trim;
pub(crate) mod verdict;
