//! Reads of the machine: the CPUs this process may run on and their cores, CPU quotas and memory
//! from cgroups (v1, v2 or both), each process's memory from `/proc`, and whether a process
//! listens on its port (`listen`), how long its main thread wanted the CPU (`schedstat`).
//!
//! Every reader takes the filesystem root it reads under (`Path::new("/")` for the machine, a
//! temporary directory in tests) and returns what it read or why it could not (`Unreadable`).
//! The parsers beside them are pure: text in, value out.

pub mod cgroup;
pub mod cpu;
pub mod cpu_quota;
pub mod ffi;
pub mod listen;
pub mod memory;
pub mod open_files;
pub mod proc_memory;
pub mod schedstat;
pub mod unreadable;

#[cfg(test)]
pub(crate) mod fixture;

pub use cpu::{read_cpus, CpuReading};
pub use cpu_quota::{read_cpu_quota, CpuQuota};
pub use memory::read_cgroup_memory;
pub use proc_memory::{read_host_memory, read_process_memory};
