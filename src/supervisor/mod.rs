//! Starting the processes and keeping them alive: the restart policy and the lifecycle (pure),
//! and the shell that spawns children, reads their channels and stops them in order.

pub mod child;
pub mod lifecycle;
pub mod output;
pub mod recycle;
pub mod restart;
pub mod shell;
pub mod socket_watch;

pub use shell::{
    run, Control, Ended, Hooks, IdleReport, Reload, Sizer, SupervisorSetup, WorkerCount,
};
