//! The load tool (`fhircluster-load`): drives the spec's surge scenario and IG-Publisher-like
//! cache sessions against any loopback base URL, and reports goodput, latency percentiles,
//! refusals and timeouts (design.md, "Benchmarks"). Pure parts (schedule, percentiles, recovery,
//! target parsing, reports) are apart from the shell that opens sockets and reads the clock.

pub mod cli;
pub mod client;
pub mod compare;
pub mod driver;
pub mod latency;
pub mod recovery;
pub mod report;
pub mod requests;
pub mod schedule;
pub mod sessions;
pub mod surge;
pub mod target;
