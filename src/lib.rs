//! fhircluster: the front door and supervisor for a FHIRsmith master and its tx-workers.
//!
//! The crate is a pure core (routing, admission, sizing, restart and recycle policy: no I/O, time
//! passed in) and a thin shell (processes, sockets, timers) around it. Module roots only declare.
//!
//! The library is the product. Public is only what its clients use: the launcher binary
//! (`src/main.rs`: `cli`, `launcher`, `fatal`, `tree::guardian_main`, `ops::logging::fatal`), the
//! simulated server `src/bin/fhirsmith-sim` (`ipc`, `outcome`, `process::Role`,
//! `settings::jsonc`), the load tool `src/bin/fhircluster-load` (`proxy::scheduler::bench`) and
//! the integration tests (`ipc`, and a few items, each saying which test reads it). The rest is
//! `pub(crate)` or private, so the compiler reports what nothing uses.

pub mod cli;
mod clock;
pub(crate) mod deadline;
pub mod fatal;
pub(crate) mod held_ports;
pub mod ipc;
pub(crate) mod kit;
pub mod launcher;
pub(crate) mod log_throttle;
pub mod ops;
pub mod outcome;
pub(crate) mod per_kind;
pub(crate) mod plan;
pub mod process;
pub mod proxy;
pub(crate) mod reload;
pub mod settings;
pub(crate) mod sizing;
pub(crate) mod status;
pub mod supervisor;
pub(crate) mod system;
pub mod tree;
pub mod upgrade;
