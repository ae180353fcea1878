//! How many tx-workers to run (spec, "How many workers" and "Memory"): a rule by name over the
//! CPUs (capped by a CPU quota), then lowered to what fits in memory once the master is loaded,
//! and the one line that logs the inputs and the decision. Pure: the machine's figures come in
//! from `crate::system`, lines to log go out; except `host.rs`, which reads this host for them.

pub mod cpu;
pub mod decision;
pub mod memory_fit;
pub mod rule;

pub use cpu::{size_for, CpuInputs, CpuSizing};
pub use decision::decision_line;
pub use memory_fit::{idle_use, memory_fit, refuse_threshold, MemoryFacts, MemoryFit};
