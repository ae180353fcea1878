//! Who is who in the cluster: the process table's identities, shared by the router, the
//! scheduler, the supervisor and the status code.

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
    /// Program and arguments, exactly as executed (node flags and `--expose-gc` included).
    pub argv: Vec<String>,
    /// Environment added to the launcher's own for this process.
    pub env: Vec<(String, String)>,
    /// Whether ordinary tx requests may go to it (workers always; the master unless
    /// `masterServesTx` is false).
    pub serves_tx: bool,
}
