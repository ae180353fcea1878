//! fhircluster: the front door and supervisor for a FHIRsmith master and its tx-workers.
//!
//! The crate is a pure core (routing, admission, sizing, restart and recycle policy: no I/O, time
//! passed in) and a thin shell (processes, sockets, timers) around it. Module roots only declare.

pub mod cli;
pub mod deadline;
pub mod fatal;
pub mod held_ports;
pub mod ipc;
pub mod launcher;
pub mod machine;
pub mod ops;
pub mod outcome;
pub mod plan;
pub mod process;
pub mod proxy;
pub mod reload;
pub mod settings;
pub mod sizing;
pub mod status;
pub mod supervisor;
pub mod system;
pub mod tree;
