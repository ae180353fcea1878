//! `fhircluster`: the command line's edge. Parses the flags, loads and validates the settings,
//! and either prints the plan (`--check`), or runs the cluster. Every failure to start is one
//! line naming its cause and exit status 1 (DEC-12); a normal stop is 0; a panic anywhere ends
//! the launcher at once with its message and status 101 (`fatal`).

// `unsafe` only in `system::ffi`, each block with its `SAFETY:` comment: the compiler holds both.
#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::process::ExitCode;

use clap::Parser;
use fhircluster::cli::Cli;
use fhircluster::{fatal, launcher};

/// jemalloc, not glibc's malloc: the request path's allocations (the request's future, the
/// forwarding's, the response's head and body) are too large for glibc's thread cache and all
/// fit jemalloc's, so each is taken without a lock; mimalloc was as fast but held more memory
/// (cluster.md, DEC-60, has the figures). tikv-jemallocator: the maintained binding (TiKV's).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read before `main`. One arena: the launcher's threads are few and the
/// thread caches take the request path's allocations, while jemalloc's default (four arenas a
/// CPU) kept more resident, over the memory target for queued requests (DEC-60).
// The product's one `unsafe` outside `system::ffi`: an exported symbol jemalloc reads, which
// must be defined in the binary itself.
#[allow(unsafe_code)]
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: &[u8; 10] = b"narenas:1\0";

/// A command line clap refuses: its message, and exit status 1 as for any bad setting (DEC-12),
/// never clap's own 2, which `fhircluster status` gives only for "no launcher" (so a health
/// check with a mistyped flag is not read as a launcher gone). `--help` and `--version` are 0.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let asked = matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion);
    // Printed as clap prints it (help on stdout, a refusal on stderr); a reader gone early is
    // no failure.
    let _ = e.print();
    if asked {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn main() -> ExitCode {
    // First: the fds this program was started with, the only ones it may take as inherited.
    fhircluster::system::ffi::note_inherited_fds();
    // The launcher's guardian is this binary under another name (`tree::guardian`).
    if let Some(code) = fhircluster::tree::guardian_main::run_if_asked() {
        return code;
    }
    // Before anything else: once the file is replaced, /proc/self/exe says "(deleted)".
    fhircluster::upgrade::exec::record_path();
    fatal::install();
    fhircluster::test_hooks::panic_when_file();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    match launcher::main(cli) {
        Ok(code) => code,
        Err(e) => {
            fhircluster::logs::logging::fatal(&format!("fhircluster: {e:#}"));
            ExitCode::from(1)
        }
    }
}
