//! The launch plan: every process the launcher runs, exactly as it will run it — role, instance
//! code, port, addresses, argv and environment — plus the decision and limits lines it logs.
//! Pure given the settings and the sizing, so `--check` prints what a real start would do (as
//! `nginx -t` does), and the supervisor re-plans with a lower count after the memory fit.
//!
//! Roles (ROLE-1..9): the master is process 0 with `modules.tx.instanceCode` (`m0`) on
//! `internalPort`, worker n is `tx<n>` on `internalPort + n`; each is told its role, code and
//! port both as flags and in the environment, gets the data directory and the IPC channel's fd.
//! Node flags (ROLE-6, LAUNCH-12..14, DEC-19): the flags after `--` on fhircluster's command line,
//! less a debugger's or watcher's (they would clash between N+1 processes), with `--expose-gc`
//! added once; inserted after the program when it is `node`, otherwise handed to a wrapper in
//! `FHIRCLUSTER_NODE_FLAGS`. With `nodeReport` the preload's `--require <path>` is one of them, and
//! a wrapper's environment also has it in `NODE_OPTIONS`, so the node it starts loads it even
//! when the wrapper doesn't pass the flags on.

use std::fmt;
use std::net::SocketAddr;
use std::path::Path;

use crate::process::{ProcessId, ProcessSpec, Role};
use crate::settings::{Settings, SettingsError};
use crate::sizing::{decision_line, CpuSizing, MemoryFit};

mod check;
mod limits;

pub use check::{render_check, render_source, render_where};
pub use limits::limits_line;

/// The environment variable a non-node program gets the node flags in, space-separated.
pub const NODE_FLAGS_ENV: &str = "FHIRCLUSTER_NODE_FLAGS";

const EXPOSE_GC: &str = "--expose-gc";

/// Everything the launcher will start, and the lines it logs about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The sizing decision line (SIZE-2).
    pub decision: String,
    /// The master first, then worker 1, 2, ...
    pub processes: Vec<ProcessSpec>,
    /// The limits line (LAUNCH-10).
    pub limits: String,
    /// Which paths are tx paths, and where that came from (ROUTE-2b, DEC-14).
    pub tx_endpoints: String,
    /// Node flags given but not passed on (a debugger's or a watcher's: LAUNCH-13, LAUNCH-14).
    pub dropped_node_flags: Vec<String>,
}

impl Plan {
    /// How many tx-workers the plan runs.
    pub fn workers(&self) -> u32 {
        u32::try_from(self.processes.len().saturating_sub(1)).unwrap_or(u32::MAX)
    }
}

/// A plan that cannot be made: each is a start-up error.
#[derive(Clone, Debug, PartialEq)]
pub enum PlanError {
    /// `internalPort..=internalPort + workers` includes `server.port` or the admin address's
    /// port, or passes 65535 (DEC-21): the settings' own one-line error.
    Ports(SettingsError),
    /// `server.cluster.command` is empty.
    EmptyCommand,
    /// `server.cluster.bindAddress` is a host name that gives no address: the name, and why.
    BindAddress(String, String),
    /// The data directory can't be made absolute or isn't UTF-8.
    DataDir(String),
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::Ports(e) => e.fmt(f),
            PlanError::EmptyCommand => write!(f, "server.cluster.command is empty"),
            PlanError::BindAddress(address, why) => {
                write!(f, "server.cluster.bindAddress {address:?} {why}")
            }
            PlanError::DataDir(why) => write!(f, "the data directory: {why}"),
        }
    }
}

impl std::error::Error for PlanError {}

/// Checks that the processes' ports are valid and leave `server.port` and the admin address's
/// port free (DEC-21), with `workers` workers.
pub fn check_port_range(settings: &Settings, workers: u32) -> Result<(), PlanError> {
    crate::settings::check_port_range(settings, workers).map_err(PlanError::Ports)
}

/// The plan at start: the count is the memory fit's when there is one, else the CPU sizing's.
/// The port range is checked against the count before any memory lowering (DEC-21).
pub fn plan(
    settings: &Settings,
    sizing: &CpuSizing,
    memory: Option<&MemoryFit>,
) -> Result<Plan, PlanError> {
    check_port_range(settings, sizing.planned())?;
    let workers = memory.map_or_else(|| sizing.planned(), |m| m.workers);
    replan(settings, workers, decision_line(sizing, memory))
}

/// The plan for `workers` workers, with `decision` as its decision line: what the supervisor
/// calls when the count changes (after the memory fit). Checks the port range again (DEC-21).
pub fn replan(settings: &Settings, workers: u32, decision: String) -> Result<Plan, PlanError> {
    check_port_range(settings, workers)?;
    let (program, command_args) = settings
        .command
        .split_first()
        .ok_or(PlanError::EmptyCommand)?;
    // A host name is looked up here, the plan's one outside input beside the settings (DEC-40).
    let reach = crate::system::resolve::addresses(&settings.cluster.bind_address)
        .map_err(|why| PlanError::BindAddress(settings.cluster.bind_address.clone(), why))?;
    let (connect_ip, also_at) = (reach[0], reach[1..].to_vec());
    let data_dir = std::path::absolute(&settings.data_dir)
        .map_err(|e| PlanError::DataDir(format!("{}: {e}", settings.data_dir.display())))?;
    let data_dir = data_dir
        .to_str()
        .ok_or_else(|| PlanError::DataDir(format!("{} is not UTF-8", data_dir.display())))?
        .to_string();
    let is_node = Path::new(program).file_name().and_then(|n| n.to_str()) == Some("node");
    let (mut flags, dropped) = node_flags(&settings.node_flags, is_node.then_some(command_args));
    let preload = settings
        .node_preload
        .as_ref()
        .filter(|_| settings.cluster.node_report)
        .map(|p| p.display().to_string());
    if let Some(path) = &preload {
        flags.push("--require".to_string());
        flags.push(path.clone());
    }

    let mut processes = Vec::new();
    for n in 0..=workers {
        let (role, code) = if n == 0 {
            (
                Role::Master,
                format!(
                    "{}{}",
                    settings.cluster.host_prefix, settings.tx.instance_code
                ),
            )
        } else {
            (
                Role::TxWorker,
                format!("{}tx{n}", settings.cluster.host_prefix),
            )
        };
        // check_port_range has shown internalPort + workers fits in a u16, and n <= workers.
        let port = u16::try_from(u32::from(settings.cluster.internal_port) + n).unwrap_or(u16::MAX);
        let id = ProcessId(u16::try_from(n).unwrap_or(u16::MAX));
        let mut argv = vec![program.clone()];
        if is_node {
            argv.extend(flags.iter().cloned());
        }
        argv.extend(command_args.iter().cloned());
        argv.push(format!("--role={}", role.as_str()));
        argv.push(format!("--instance-code={code}"));
        argv.push(format!("--port={port}"));
        let mut env = vec![
            ("FHIRSMITH_ROLE".to_string(), role.as_str().to_string()),
            ("FHIRSMITH_INSTANCE_CODE".to_string(), code.clone()),
            ("PORT".to_string(), port.to_string()),
            // Beside PORT, for servers that read the address to listen on from HOST
            // (node-fhir-server-core, many frameworks): else they take every interface.
            ("HOST".to_string(), settings.cluster.bind_address.clone()),
            ("FHIRSMITH_DATA_DIR".to_string(), data_dir.clone()),
            ("NODE_CHANNEL_FD".to_string(), "3".to_string()),
            (
                "NODE_CHANNEL_SERIALIZATION_MODE".to_string(),
                "json".to_string(),
            ),
        ];
        if !is_node {
            env.push((NODE_FLAGS_ENV.to_string(), flags.join(" ")));
            // A wrapper may not pass FHIRCLUSTER_NODE_FLAGS on: the node it starts finds the
            // preload in NODE_OPTIONS (loaded once however many times it is named).
            if let Some(path) = &preload {
                env.push((
                    "NODE_OPTIONS".to_string(),
                    node_options(settings.node_options.as_deref(), path),
                ));
            }
        }
        processes.push(ProcessSpec {
            id,
            role,
            code,
            bind_address: settings.cluster.bind_address.clone(),
            port,
            connect_addr: SocketAddr::new(connect_ip, port),
            also_at: also_at.clone(),
            argv,
            env,
            serves_tx: role == Role::TxWorker || settings.cluster.master_serves_tx,
            config: settings.servers_config,
        });
    }
    Ok(Plan {
        decision,
        processes,
        limits: limits_line(settings),
        tx_endpoints: tx_endpoints_line(settings),
        dropped_node_flags: dropped,
    })
}

/// `tx endpoints: /r4, /tx/r5 (modules.tx.endpoints in /d/config.json)`, or none when not set:
/// FHIRsmith has no default endpoints, so then every request is the master's.
pub fn tx_endpoints_line(settings: &Settings) -> String {
    const SETTING: &str = crate::settings::paths::tx::endpoints;
    let from = settings.sources.of(SETTING);
    if settings.tx.endpoints.is_empty() {
        let why = if from == crate::settings::Source::Default {
            "not set"
        } else {
            "empty"
        };
        return format!(
            "tx endpoints: none ({SETTING} is {why}; FHIRsmith has no default): every request goes to the master"
        );
    }
    format!(
        "tx endpoints: {} ({})",
        settings.tx.endpoints.join(", "),
        from.setter(SETTING)
    )
}

/// `NODE_OPTIONS` for a wrapper's node with the preload at `path`: the launcher's own
/// `NODE_OPTIONS` kept, the preload's `--require` after it (DEC-19, nodeReport).
fn node_options(inherited: Option<&str>, path: &str) -> String {
    match inherited.map(str::trim).filter(|o| !o.is_empty()) {
        Some(o) => format!("{o} --require {path}"),
        None => format!("--require {path}"),
    }
}

/// Flags that are the launcher's own (a debugger's, a watcher's) and flags among them that take
/// their value as the next argument.
fn launchers_own(flag: &str) -> bool {
    ["--inspect", "--debug", "--watch"]
        .iter()
        .any(|p| flag.starts_with(p))
}

fn takes_next_value(flag: &str) -> bool {
    matches!(flag, "--inspect-port" | "--debug-port" | "--watch-path")
}

/// The node flags to pass on and those dropped. `--expose-gc` is added unless already among
/// the flags, or (for `node`) among the node options before the script in the command.
fn node_flags(
    given: &[String],
    node_command_args: Option<&[String]>,
) -> (Vec<String>, Vec<String>) {
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    let mut skip_value = false;
    for flag in given {
        if skip_value {
            skip_value = false;
            dropped.push(flag.clone());
        } else if launchers_own(flag) {
            skip_value = takes_next_value(flag);
            dropped.push(flag.clone());
        } else {
            kept.push(flag.clone());
        }
    }
    let is_expose_gc = |a: &String| a == EXPOSE_GC || a == "--expose_gc";
    let in_command = node_command_args.is_some_and(|args| {
        args.iter()
            .take_while(|a| a.starts_with('-'))
            .any(is_expose_gc)
    });
    if !kept.iter().any(is_expose_gc) && !in_command {
        kept.push(EXPOSE_GC.to_string());
    }
    (kept, dropped)
}

#[cfg(test)]
mod test_support;
#[cfg(test)]
#[path = "plan/plan_tests.rs"]
mod tests;
