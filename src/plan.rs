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
//! `FHIRCLUSTER_NODE_FLAGS`.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

use crate::process::{ProcessId, ProcessSpec, Role};
use crate::settings::Settings;
use crate::sizing::{decision_line, CpuSizing, MemoryFit};

mod check;
mod limits;

pub use check::render_check;
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlanError {
    /// `internalPort..=internalPort + workers` includes `server.port` or passes 65535 (DEC-21).
    PortRange {
        internal_port: u16,
        workers: u32,
        port: u16,
    },
    /// `server.cluster.command` is empty.
    EmptyCommand,
    /// `server.cluster.bindAddress` is not an IP address.
    BindAddress(String),
    /// The data directory can't be made absolute or isn't UTF-8.
    DataDir(String),
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::PortRange {
                internal_port,
                workers,
                port,
            } => {
                let last = u32::from(*internal_port) + workers;
                if last > u32::from(u16::MAX) || *internal_port == 0 {
                    write!(
                        f,
                        "server.cluster.internalPort {internal_port} with {workers} workers needs ports {internal_port}..{last}, which is not a valid port range (1..65535)"
                    )
                } else {
                    write!(
                        f,
                        "server.cluster.internalPort {internal_port} with {workers} workers needs ports {internal_port}..{last}, which includes server.port {port}"
                    )
                }
            }
            PlanError::EmptyCommand => write!(f, "server.cluster.command is empty"),
            PlanError::BindAddress(address) => write!(
                f,
                "server.cluster.bindAddress {address:?} is not an IP address"
            ),
            PlanError::DataDir(why) => write!(f, "the data directory: {why}"),
        }
    }
}

impl std::error::Error for PlanError {}

/// Checks that the processes' ports are valid and leave `server.port` free (DEC-21).
pub fn check_port_range(settings: &Settings, workers: u32) -> Result<(), PlanError> {
    let internal = u32::from(settings.cluster.internal_port);
    let last = internal + workers;
    let port = u32::from(settings.port);
    if internal == 0 || last > u32::from(u16::MAX) || (internal..=last).contains(&port) {
        return Err(PlanError::PortRange {
            internal_port: settings.cluster.internal_port,
            workers,
            port: settings.port,
        });
    }
    Ok(())
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
    let bind: IpAddr = settings
        .cluster
        .bind_address
        .parse()
        .map_err(|_| PlanError::BindAddress(settings.cluster.bind_address.clone()))?;
    let connect_ip = match bind {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    let data_dir = std::path::absolute(&settings.data_dir)
        .map_err(|e| PlanError::DataDir(format!("{}: {e}", settings.data_dir.display())))?;
    let data_dir = data_dir
        .to_str()
        .ok_or_else(|| PlanError::DataDir(format!("{} is not UTF-8", data_dir.display())))?
        .to_string();
    let is_node = Path::new(program).file_name().and_then(|n| n.to_str()) == Some("node");
    let (flags, dropped) = node_flags(&settings.node_flags, is_node.then_some(command_args));

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
        let port = u16::try_from(u32::from(settings.cluster.internal_port) + n).map_err(|_| {
            PlanError::PortRange {
                internal_port: settings.cluster.internal_port,
                workers,
                port: settings.port,
            }
        })?;
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
            ("FHIRSMITH_DATA_DIR".to_string(), data_dir.clone()),
            ("NODE_CHANNEL_FD".to_string(), "3".to_string()),
            (
                "NODE_CHANNEL_SERIALIZATION_MODE".to_string(),
                "json".to_string(),
            ),
        ];
        if !is_node {
            env.push((NODE_FLAGS_ENV.to_string(), flags.join(" ")));
        }
        processes.push(ProcessSpec {
            id,
            role,
            code,
            bind_address: settings.cluster.bind_address.clone(),
            port,
            connect_addr: SocketAddr::new(connect_ip, port),
            argv,
            env,
            serves_tx: role == Role::TxWorker || settings.cluster.master_serves_tx,
        });
    }
    Ok(Plan {
        decision,
        processes,
        limits: limits_line(settings),
        dropped_node_flags: dropped,
    })
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
mod tests {
    use super::*;
    use crate::sizing::{size_by_cpu, CpuInputs};
    use std::path::PathBuf;

    fn settings() -> Settings {
        Settings {
            data_dir: PathBuf::from("/var/lib/fhirsmith"),
            ..Settings::default()
        }
    }

    fn sizing(s: &Settings, vcpu: u32, cores: u32) -> CpuSizing {
        let inputs = CpuInputs {
            vcpu,
            detected_cores: Some(cores),
            quota: None,
        };
        size_by_cpu(&s.cluster, &inputs).unwrap()
    }

    fn env<'a>(p: &'a ProcessSpec, key: &str) -> Option<&'a str> {
        p.env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn master_and_workers_with_node() {
        // spec: ROLE-1..ROLE-8, ROLE-6, DEC-19
        let mut s = settings();
        s.node_flags = strings(&["--max-old-space-size=8192"]);
        let plan = plan(&s, &sizing(&s, 4, 4), None).unwrap();
        assert_eq!(plan.workers(), 2);
        let master = &plan.processes[0];
        assert_eq!(
            (master.id, master.role, master.code.as_str(), master.port),
            (ProcessId(0), Role::Master, "m0", 3001)
        );
        assert_eq!(
            master.argv,
            strings(&[
                "node",
                "--max-old-space-size=8192",
                "--expose-gc",
                "server.js",
                "--role=master",
                "--instance-code=m0",
                "--port=3001"
            ])
        );
        assert_eq!(
            master.env,
            vec![
                ("FHIRSMITH_ROLE".to_string(), "master".to_string()),
                ("FHIRSMITH_INSTANCE_CODE".to_string(), "m0".to_string()),
                ("PORT".to_string(), "3001".to_string()),
                (
                    "FHIRSMITH_DATA_DIR".to_string(),
                    "/var/lib/fhirsmith".to_string()
                ),
                ("NODE_CHANNEL_FD".to_string(), "3".to_string()),
                (
                    "NODE_CHANNEL_SERIALIZATION_MODE".to_string(),
                    "json".to_string()
                ),
            ]
        );
        assert!(master.serves_tx);
        let tx2 = &plan.processes[2];
        assert_eq!(
            (tx2.id, tx2.role, tx2.code.as_str(), tx2.port),
            (ProcessId(2), Role::TxWorker, "tx2", 3003)
        );
        assert_eq!(
            tx2.argv[4..],
            strings(&["--role=tx-worker", "--instance-code=tx2", "--port=3003"])[..]
        );
        assert_eq!(env(tx2, "FHIRSMITH_ROLE"), Some("tx-worker"));
        assert_eq!(env(tx2, "PORT"), Some("3003"));
        assert_eq!(env(tx2, NODE_FLAGS_ENV), None);
        assert!(tx2.serves_tx);
        assert_eq!(tx2.connect_addr, "127.0.0.1:3003".parse().unwrap());
    }

    #[test]
    fn the_configured_instance_code_and_master_serves_tx() {
        // spec: ROLE-2
        let mut s = settings();
        s.tx.instance_code = "main".to_string();
        s.cluster.master_serves_tx = false;
        let plan = replan(&s, 1, String::new()).unwrap();
        assert_eq!(plan.processes[0].code, "main");
        assert!(!plan.processes[0].serves_tx);
        assert_eq!(
            plan.processes[1].code, "tx1",
            "workers never take the config's code"
        );
    }

    #[test]
    fn a_non_node_program_gets_the_flags_in_the_environment() {
        // spec: DEC-19
        let mut s = settings();
        s.command = strings(&["/opt/bin/fhirsmith-sim", "--fast"]);
        s.node_flags = strings(&["--max-old-space-size=4096"]);
        let plan = replan(&s, 1, String::new()).unwrap();
        let w = &plan.processes[1];
        assert_eq!(
            w.argv,
            strings(&[
                "/opt/bin/fhirsmith-sim",
                "--fast",
                "--role=tx-worker",
                "--instance-code=tx1",
                "--port=3002"
            ])
        );
        assert_eq!(
            env(w, NODE_FLAGS_ENV),
            Some("--max-old-space-size=4096 --expose-gc")
        );
    }

    #[test]
    fn expose_gc_is_not_duplicated() {
        // spec: ROLE-6
        let mut s = settings();
        s.node_flags = strings(&["--expose-gc"]);
        let plan = replan(&s, 0, String::new()).unwrap();
        let count = |argv: &[String]| argv.iter().filter(|a| *a == "--expose-gc").count();
        assert_eq!(count(&plan.processes[0].argv), 1);
        s.node_flags.clear();
        s.command = strings(&["/usr/bin/node", "--expose-gc", "server.js"]);
        let plan = replan(&s, 0, String::new()).unwrap();
        assert_eq!(count(&plan.processes[0].argv), 1);
        assert_eq!(
            plan.processes[0].argv[..3],
            strings(&["/usr/bin/node", "--expose-gc", "server.js"])[..]
        );
    }

    #[test]
    fn debugger_and_watcher_flags_are_not_passed_on() {
        // spec: LAUNCH-12, LAUNCH-13, LAUNCH-14
        let mut s = settings();
        s.node_flags = strings(&[
            "--inspect=9229",
            "--max-old-space-size=1024",
            "--watch",
            "--inspect-port",
            "9230",
            "--trace-warnings",
        ]);
        let plan = replan(&s, 0, String::new()).unwrap();
        assert_eq!(
            plan.processes[0].argv[..4],
            strings(&[
                "node",
                "--max-old-space-size=1024",
                "--trace-warnings",
                "--expose-gc"
            ])[..]
        );
        assert_eq!(
            plan.dropped_node_flags,
            strings(&["--inspect=9229", "--watch", "--inspect-port", "9230"])
        );
    }

    #[test]
    fn bind_any_is_reached_over_loopback() {
        // spec: ROLE-9
        let mut s = settings();
        s.cluster.bind_address = "0.0.0.0".to_string();
        let plan = replan(&s, 1, String::new()).unwrap();
        assert_eq!(plan.processes[1].bind_address, "0.0.0.0");
        assert_eq!(
            plan.processes[1].connect_addr,
            "127.0.0.1:3002".parse().unwrap()
        );
        s.cluster.bind_address = "::".to_string();
        let plan = replan(&s, 1, String::new()).unwrap();
        assert_eq!(
            plan.processes[0].connect_addr,
            "[::1]:3001".parse().unwrap()
        );
        s.cluster.bind_address = "10.0.0.5".to_string();
        let plan = replan(&s, 0, String::new()).unwrap();
        assert_eq!(
            plan.processes[0].connect_addr,
            "10.0.0.5:3001".parse().unwrap()
        );
        s.cluster.bind_address = "localhost".to_string();
        assert_eq!(
            replan(&s, 0, String::new()),
            Err(PlanError::BindAddress("localhost".to_string()))
        );
    }

    #[test]
    fn the_port_range_must_leave_the_port_free_and_fit() {
        // spec: DEC-21
        let mut s = settings();
        s.port = 3005;
        let err = replan(&s, 4, String::new()).unwrap_err();
        assert!(
            err.to_string().contains("server.cluster.internalPort 3001"),
            "{err}"
        );
        assert!(err.to_string().contains("server.port 3005"), "{err}");
        assert!(replan(&s, 3, String::new()).is_ok());
        s.cluster.internal_port = 65_534;
        let err = replan(&s, 2, String::new()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("server.cluster.internalPort 65534"),
            "{err}"
        );
        assert!(replan(&s, 1, String::new()).is_ok());
    }

    #[test]
    fn the_start_plan_checks_the_cpu_count_before_memory_lowers_it() {
        // spec: DEC-21 — 16/8 gives 8 workers (3001..3009), which includes port 3009.
        let mut s = settings();
        s.port = 3009;
        let sz = sizing(&s, 16, 8);
        let fit = MemoryFit {
            fits: Some(2),
            workers: 2,
            warnings: Vec::new(),
        };
        assert!(matches!(
            plan(&s, &sz, Some(&fit)),
            Err(PlanError::PortRange { workers: 8, .. })
        ));
        s.port = 3000;
        let p = plan(&s, &sz, Some(&fit)).unwrap();
        assert_eq!(p.workers(), 2);
        assert!(
            p.decision
                .starts_with("workers 2: 8 physical cores (16 vCPU, SMT 2)"),
            "{}",
            p.decision
        );
    }

    #[test]
    fn an_empty_command_is_an_error() {
        let mut s = settings();
        s.command.clear();
        assert_eq!(replan(&s, 1, String::new()), Err(PlanError::EmptyCommand));
    }
}

#[cfg(test)]
mod host_prefix_tests {
    use super::*;
    use crate::settings::Settings;

    #[test]
    fn a_host_prefix_goes_before_every_instance_code() {
        let mut s = Settings::default();
        s.cluster.host_prefix = "a".to_string();
        let p = replan(&s, 2, String::new()).expect("plan");
        let codes: Vec<&str> = p.processes.iter().map(|p| p.code.as_str()).collect();
        assert_eq!(codes, vec!["am0", "atx1", "atx2"]);
        assert!(p.processes[1]
            .argv
            .contains(&"--instance-code=atx1".to_string()));
    }
}
