//! What this binary was built from, as `fhircluster --version` prints it (`nginx -V`'s
//! counterpart); `build.rs` fills these in at compile time. Public for `tests/ops_status.rs`,
//! which checks `--version` against them.

/// The git commit it was built from (12 hex digits), or `unknown` outside a git checkout.
pub const COMMIT: &str = env!("FHIRCLUSTER_GIT_COMMIT");
/// The compiler that built it, as `rustc --version` says.
pub const RUSTC: &str = env!("FHIRCLUSTER_RUSTC");

/// `fhircluster --version` (`-V`): the version, then one line each for the commit and compiler.
pub(crate) const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\ncommit: ",
    env!("FHIRCLUSTER_GIT_COMMIT"),
    "\nrustc: ",
    env!("FHIRCLUSTER_RUSTC")
);
