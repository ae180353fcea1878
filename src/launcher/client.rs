//! `fhircluster status`, `upgrade`, `scale`, `restart` and `print`: the command line as a client
//! of a running launcher (or, for `print`, of nothing). The exit status means only what
//! `--help` says (2: no launcher found), so a health check never reads a bad `config.json` as
//! "not ready": by default each goes to the control socket, found as the launcher finds it
//! (reading only `controlSocket` from config.json, or through the pid file); `status` with
//! `--admin-address` asks the read-only HTTP listener and reads no settings at all. The
//! actions go to the control socket only.

use std::process::ExitCode;

use crate::cli::{Action, Cli};
use crate::ops::control_client::{socket_path, Target};
use crate::settings;

/// Runs `action` and says how it ended.
pub(super) fn run(cli: &Cli, action: &Action) -> ExitCode {
    let unreachable = ExitCode::from(crate::ops::status_table::UNREACHABLE);
    let name = match action {
        Action::Print(what) => return crate::kit::run(cli, what),
        Action::Status { json, wide } => return status(cli, *json, *wide),
        Action::Upgrade => "upgrade",
        Action::Scale { .. } => "scale",
        Action::Restart => "restart",
    };
    if cli.admin_address.is_some() {
        eprintln!(
            "fhircluster {name}: the admin address is read-only; an action goes to the control \
             socket: leave out --admin-address (give --data-dir, --control-socket or \
             --pid-file)"
        );
        return unreachable;
    }
    let Some(path) = socket(cli, name) else {
        return unreachable;
    };
    match action {
        Action::Scale { count } => crate::ops::scale_cmd::run(&path, count),
        Action::Restart => crate::ops::restart_cmd::run(&path),
        // `upgrade`: `print` and `status` have returned above.
        _ => crate::ops::upgrade_cmd::run(&path),
    }
}

/// `status`: from the admin address when one is given, else from the control socket.
fn status(cli: &Cli, json: bool, wide: bool) -> ExitCode {
    let unreachable = ExitCode::from(crate::ops::status_table::UNREACHABLE);
    let target = match &cli.admin_address {
        Some(text) => match settings::parse_admin_address(text) {
            Some(addr) => Target::Http(addr),
            None => {
                eprintln!(
                    "fhircluster status: --admin-address {text:?} must be a port (on loopback) \
                     or ADDRESS:PORT, e.g. 9100 or 127.0.0.1:9100"
                );
                return unreachable;
            }
        },
        None => match socket(cli, "status") {
            Some(path) => Target::Socket(path),
            None => return unreachable,
        },
    };
    crate::ops::status_table::run(&target, json, wide)
}

/// The control socket's path, or why there is none (said on stderr, named for `name`).
fn socket(cli: &Cli, name: &str) -> Option<std::path::PathBuf> {
    match socket_path(cli) {
        Ok(path) => Some(path),
        Err(e) => {
            eprintln!("fhircluster {name}: {e:#}");
            None
        }
    }
}
