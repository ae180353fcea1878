//! Starting the processes and keeping them alive: the restart policy and the lifecycle (pure),
//! and the shell that spawns children, reads their channels and stops them in order.

mod api;
pub(crate) mod child;
pub(crate) mod hang;
pub mod lifecycle;
mod mailbox;
pub(crate) mod output;
mod ports;
mod readings;
pub(crate) mod recycle;
mod recycle_watch;
pub(crate) mod restart;
pub mod scale;
pub(crate) mod shell;
pub(crate) mod socket_watch;
pub(crate) mod spawner;
pub(crate) mod stderr_tail;

pub(crate) use api::{
    Control, Ended, Hooks, Reload, Rolling, Scale, ScaleLimits, SupervisorSettings,
    SupervisorSetup, WorkerCount,
};
/// Named by the upgrade's state tests (the shell's `recycle`).
#[cfg(test)]
pub(crate) use recycle_watch::RecycleState;
pub(crate) use shell::{resume, run, HandedChild, ShellHandover, ShellState};
