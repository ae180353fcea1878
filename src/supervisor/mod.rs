//! Starting the processes and keeping them alive: the restart policy and the lifecycle (pure),
//! and the shell that spawns children, reads their channels and stops them in order.

mod api;
pub mod child;
pub mod lifecycle;
mod mailbox;
pub mod output;
pub mod recycle;
mod reload_shell;
pub mod restart;
pub mod shell;
pub mod socket_watch;
pub mod stderr_tail;
mod ticks;
mod to_master;

pub use api::{Control, Ended, Hooks, IdleReport, Reload, Sizer, SupervisorSetup, WorkerCount};
pub use shell::run;
