//! Starting the processes and keeping them alive: the restart policy (pure) and the shell that
//! spawns children, reads their channels and stops them in order.

pub mod lifecycle;
pub mod output;
pub mod restart;
