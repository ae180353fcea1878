//! Reads of the machine: the CPUs this process may run on and their cores, CPU quotas and memory
//! from cgroups (v1, v2 or both), each process's memory from `/proc`, and whether a process
//! listens on its port (`listen`), how long its main thread wanted the CPU (`schedstat`).
//!
//! Every reader takes the filesystem root it reads under (`Path::new("/")` for the machine, a
//! temporary directory in tests) and returns what it read or why it could not (`Unreadable`).
//! The parsers beside them are pure: text in, value out.

pub(crate) mod cgroup;
pub(crate) mod cpu;
pub(crate) mod cpu_quota;
// The one home of `unsafe` in the product (lib.rs denies it everywhere else).
#[allow(unsafe_code)]
pub mod ffi;
#[cfg(test)]
mod ffi_tests;
pub(crate) mod listen;
pub(crate) mod memory;
pub(crate) mod oom_kills;
pub(crate) mod open_files;
pub(crate) mod proc_memory;
pub(crate) mod resolve;
pub(crate) mod schedstat;
pub(crate) mod unreadable;

#[cfg(test)]
pub(crate) mod fixture;

pub(crate) use cpu::{read_cpus, CpuReading};
pub(crate) use cpu_quota::{read_cpu_quota, CpuQuota};
pub(crate) use memory::read_cgroup_memory;
pub(crate) use proc_memory::{read_host_memory, read_process_memory};
