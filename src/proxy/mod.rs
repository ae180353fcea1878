//! The front door: routing (pure), admission and scheduling (pure), forwarding and the listener
//! (the shell).

pub mod budget;
pub mod conn;
pub mod counters;
pub mod forward;
pub mod front;
pub mod lane;
pub mod listener;
pub mod lobby;
pub mod outcome;
pub mod park;
pub mod pipeline;
pub mod report;
pub mod route;
pub mod saturation;
pub mod saturation_watch;
pub mod scheduler;
pub mod trim;
