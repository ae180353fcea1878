//! The front door: routing (pure), admission and scheduling (pure), forwarding and the listener
//! (the shell).

pub(crate) mod budget;
pub(crate) mod conn;
pub(crate) mod counters;
pub(crate) mod forward;
pub(crate) mod front;
pub(crate) mod lane;
pub(crate) mod listener;
pub(crate) mod lobby;
pub(crate) mod outcome;
pub(crate) mod park;
pub(crate) mod pipeline;
pub(crate) mod report;
pub(crate) mod route;
pub(crate) mod saturation;
pub(crate) mod saturation_watch;
pub mod scheduler;
pub(crate) mod served;
pub mod trim;
