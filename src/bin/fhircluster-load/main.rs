//! The load tool (`fhircluster-load`): drives the spec's surge scenario and IG-Publisher-like
//! cache sessions against any loopback base URL, and reports goodput, latency percentiles,
//! refusals and timeouts (design.md, "Benchmarks"). Pure parts (schedule, percentiles, recovery,
//! target parsing, reports) are apart from the shell that opens sockets and reads the clock.

// `unsafe` only in `system::ffi`, each block with its `SAFETY:` comment: the compiler holds both.
#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod cli;
mod client;
mod compare;
mod driver;
mod latency;
mod recovery;
mod report;
mod requests;
mod schedule;
mod sessions;
mod surge;
mod target;

fn main() -> std::process::ExitCode {
    use clap::Parser;
    cli::run(cli::Cli::parse())
}
