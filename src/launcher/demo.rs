//! `--demo`: the built-in simulated server in a temporary data directory of its own, which goes
//! when the launcher is done.

use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::cli::Cli;

/// `--demo`: the built-in simulated server, found beside this binary, in a temporary data
/// directory unless one is given (`--data-dir`, `FHIRSMITH_DATA_DIR`); that one is returned, to
/// be removed when the launcher is done.
pub(super) fn prepare_demo(cli: &mut Cli) -> Result<Option<DemoDir>> {
    if cli.command.is_none() {
        let exe = std::env::current_exe().context("finding the fhircluster binary")?;
        let sim = exe.with_file_name("fhirsmith-sim");
        anyhow::ensure!(
            sim.exists(),
            "--demo: the simulated server {} is missing (build it with `cargo build`)",
            sim.display()
        );
        cli.command = Some(sim.display().to_string());
    }
    if cli.data_dir.is_some() || std::env::var_os("FHIRSMITH_DATA_DIR").is_some() {
        return Ok(None);
    }
    let dir: PathBuf =
        std::env::temp_dir().join(format!("fhircluster-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("creating the demo data directory {}", dir.display()))?;
    // The simulated server's tx endpoint (FHIRsmith has no default one), and the launcher's own
    // endpoint, so `fhircluster status` can be tried on the demo (`--admin-address` overrides):
    // 9100, or any free port when that one is taken (a node_exporter's default), so the demo
    // starts on any machine.
    let admin = demo_admin_port();
    std::fs::write(
        dir.join("config.json"),
        format!(
            r#"{{"server": {{"cluster": {{"adminAddress": {admin}}}}},
                "modules": {{"tx": {{"endpoints": [{{"path": "/r4"}}]}}}}}}"#
        ),
    )
    .with_context(|| format!("writing the demo's config.json in {}", dir.display()))?;
    cli.data_dir = Some(dir.clone());
    Ok(Some(DemoDir(dir)))
}

/// 9100 if it is free now, else a port the system finds free.
fn demo_admin_port() -> u16 {
    let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).ok();
    free(9100)
        .or_else(|| free(0))
        .and_then(|l| l.local_addr().ok())
        .map_or(9100, |a| a.port())
}

/// The demo's temporary data directory, removed (with its events database) when dropped.
pub(super) struct DemoDir(PathBuf);

impl Drop for DemoDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            crate::logs::logging::fatal(&format!(
                "fhircluster: --demo: could not remove {}: {e}",
                self.0.display()
            ));
        }
    }
}
