//! Who is who in the cluster: the process table's identities, and how a process ended, shared by
//! the router, the scheduler, the supervisor and the status code.

use std::fmt;
use std::net::SocketAddr;

/// A process's place in the cluster: 0 is the master, n is tx-worker n. Stable across restarts,
/// so a restarted process keeps its role, code and port (RESTART-6).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ProcessId(pub u16);

impl ProcessId {
    pub(crate) const MASTER: ProcessId = ProcessId(0);

    pub(crate) fn is_master(self) -> bool {
        self.0 == 0
    }

    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Master,
    TxWorker,
}

impl Role {
    /// The value of `--role` / `FHIRSMITH_ROLE`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Master => "master",
            Role::TxWorker => "tx-worker",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One process the launcher runs: everything needed to start it and to reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProcessSpec {
    pub id: ProcessId,
    pub role: Role,
    /// Instance code: `m0` (or `modules.tx.instanceCode`) for the master, `tx<n>` for worker n.
    pub code: String,
    /// The address the process is told to listen on (`bindAddress`) and its port.
    pub bind_address: String,
    pub port: u16,
    /// Where the launcher reaches it: `bindAddress`, or loopback for `0.0.0.0` / `::` (ROLE-9).
    pub connect_addr: SocketAddr,
    /// The other addresses `bindAddress`, a host name, resolves to: tried in turn after
    /// `connect_addr`'s, on the same port (DEC-40). Empty for an address.
    pub also_at: Vec<std::net::IpAddr>,
    /// Program and arguments, exactly as executed (node flags and `--expose-gc` included).
    pub argv: Vec<String>,
    /// Environment added to the launcher's own for this process.
    pub env: Vec<(String, String)>,
    /// Whether ordinary tx requests may go to it (workers always; the master unless
    /// `masterServesTx` is false).
    pub serves_tx: bool,
    /// What it reads of config.json (all but `server.cluster`), as a digest
    /// (`settings::servers_config`).
    pub config: u64,
}

impl ProcessSpec {
    /// Everything the process is started with and reads at its start, as one digest: its
    /// program and arguments (the command, node flags, `--require` of the preload), the
    /// environment the launcher adds, and config.json beyond fhircluster's own settings. The
    /// launcher's own environment, which every process inherits, is fixed for its life (an
    /// in-place upgrade keeps it), so it is not in. A running process whose digest is no
    /// longer its place's is restarted in turn by a reload (`supervisor/shell/reload.rs`).
    pub(crate) fn inputs(&self) -> u64 {
        let mut d = crate::digest::Digest::default();
        d.piece(b"argv")
            .piece(&(self.argv.len() as u64).to_le_bytes());
        for a in &self.argv {
            d.piece(a.as_bytes());
        }
        d.piece(b"env")
            .piece(&(self.env.len() as u64).to_le_bytes());
        for (k, v) in &self.env {
            d.piece(k.as_bytes()).piece(v.as_bytes());
        }
        d.piece(b"config").piece(&self.config.to_le_bytes());
        d.finish()
    }
}

impl ProcessSpec {
    /// The same process told to listen on `port` instead (`--port=`, `PORT`, where the launcher
    /// reaches it): a replacement started beside its place's process, or a place whose port was
    /// swapped at a replacement's switch (DEC-78). Its inputs' digest is the place's: the port
    /// is where it runs, not what it reads.
    pub(crate) fn on_port(&self, port: u16) -> ProcessSpec {
        let mut spec = self.clone();
        if port == self.port {
            return spec;
        }
        let (from, to) = (format!("--port={}", self.port), format!("--port={port}"));
        for a in spec.argv.iter_mut().filter(|a| **a == from) {
            a.clone_from(&to);
        }
        for (_, v) in spec.env.iter_mut().filter(|(k, _)| k == "PORT") {
            *v = port.to_string();
        }
        spec.port = port;
        spec.connect_addr.set_port(port);
        spec
    }
}

/// How a process ended, as the supervisor's shell saw it. Below both the supervisor (whose
/// lifecycle takes it) and the status (whose events report it), so neither imports the other
/// for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    Code(i32),
    Signal(i32),
    /// It could not be started at all (exec failed): counts as an exit before ready.
    SpawnFailed,
}

impl Exit {
    /// Its exit code, if it exited with one.
    pub(crate) fn code(self) -> Option<i32> {
        match self {
            Exit::Code(c) => Some(c),
            _ => None,
        }
    }

    /// The signal's name (`SIGKILL`), or its number when it has none; None without a signal.
    pub(crate) fn signal_name(self) -> Option<String> {
        match self {
            Exit::Signal(s) => Some(match nix::sys::signal::Signal::try_from(s) {
                Ok(sig) => sig.as_str().to_string(),
                Err(_) => s.to_string(),
            }),
            _ => None,
        }
    }
}

/// How a process ended, as far as a request in flight on it can be blamed (`proxy::death`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ending {
    /// It exited or was killed by a signal; `oom_kills_rose`: the cgroup's `oom_kill` count rose
    /// between its start and its exit.
    Exited { exit: Exit, oom_kills_rose: bool },
    /// The launcher killed it for hanging (its hang watchdog, `reason="hung"`): a request it
    /// hung on may be what hung it.
    /// Killed by the hang watchdog (DEC-82, `reason="hung"`) while it owed an answer.
    KilledHung,
}

/// `signal SIGKILL, the OOM killer's`, `killed for hanging`: how the 502 says it.
impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ending::Exited {
                exit,
                oom_kills_rose: true,
            } => write!(f, "{exit}, the OOM killer's"),
            Ending::Exited { exit, .. } => write!(f, "{exit}"),
            Ending::KilledHung => f.write_str("killed by the launcher for hanging"),
        }
    }
}

/// `exit code 1`, `signal SIGKILL`, `could not be started`: how the log and the events say it.
impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self, self.signal_name()) {
            (Exit::Code(c), _) => write!(f, "exit code {c}"),
            (Exit::Signal(_), Some(name)) => write!(f, "signal {name}"),
            (Exit::Signal(s), None) => write!(f, "signal {s}"),
            (Exit::SpawnFailed, _) => f.write_str("could not be started"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_on_another_port_is_told_that_port_everywhere_and_keeps_its_digest() {
        // spec: DEC-78
        let spec = ProcessSpec {
            id: ProcessId(1),
            role: Role::TxWorker,
            code: "tx1".into(),
            bind_address: "127.0.0.1".into(),
            port: 3001,
            connect_addr: "127.0.0.1:3001".parse().unwrap(),
            also_at: vec!["::1".parse().unwrap()],
            argv: vec!["node".into(), "--port=3001".into()],
            env: vec![("PORT".into(), "3001".into()), ("HOST".into(), "x".into())],
            serves_tx: true,
            config: 7,
        };
        let moved = spec.on_port(3009);
        assert_eq!(moved.argv, ["node", "--port=3009"]);
        assert_eq!(moved.env[0], ("PORT".to_string(), "3009".to_string()));
        assert_eq!(moved.connect_addr.port(), 3009);
        assert_eq!(moved.port, 3009);
        assert_eq!(spec.on_port(3001), spec);
    }

    #[test]
    fn an_exit_is_said_with_its_code_or_its_signal_by_name() {
        assert_eq!(Exit::Code(3).to_string(), "exit code 3");
        assert_eq!(Exit::Signal(9).to_string(), "signal SIGKILL");
        assert_eq!(Exit::Signal(200).to_string(), "signal 200");
        assert_eq!(Exit::SpawnFailed.to_string(), "could not be started");
        assert_eq!(Exit::Signal(15).signal_name().as_deref(), Some("SIGTERM"));
        assert_eq!(Exit::Code(0).code(), Some(0));
        assert_eq!(Exit::Code(0).signal_name(), None);
    }
}
