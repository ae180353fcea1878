//! `fhircluster-load`: the benchmark load tool (surge with a probe, and cache sessions) against
//! any loopback base URL. Everything lives in `fhircluster::load`; this only parses and runs.

use std::process::ExitCode;

use clap::Parser;
use fhircluster::load::cli::{run, Cli};

fn main() -> ExitCode {
    run(Cli::parse())
}
