//! `fhircluster`: the command line's edge. Parses the flags, loads and validates the settings,
//! and either prints the plan (`--check`), or runs the cluster. Every failure to start is one
//! line naming its cause and exit status 1 (DEC-12); a normal stop is 0; a panic anywhere ends
//! the launcher at once with its message and status 101 (`fatal`).

use std::process::ExitCode;

use clap::Parser;
use fhircluster::cli::Cli;
use fhircluster::{fatal, launcher};

fn main() -> ExitCode {
    // The launcher's guardian is this binary under another name (`tree::guardian`).
    if let Some(code) = fhircluster::tree::guardian_main::run_if_asked() {
        return code;
    }
    // Before anything else: once the file is replaced, /proc/self/exe says "(deleted)".
    fhircluster::upgrade::exec::record_path();
    fatal::install();
    fatal::test_hook_from_env();
    let cli = Cli::parse();
    match launcher::main(cli) {
        Ok(code) => code,
        Err(e) => {
            fhircluster::ops::logging::fatal(&format!("fhircluster: {e:#}"));
            ExitCode::from(1)
        }
    }
}
