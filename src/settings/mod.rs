//! Every setting fhircluster reads, typed and validated: one `Settings` built from flags, then the
//! environment, then `config.json` in the data directory, then the spec's defaults (DEC-13).
//!
//! Durations are stored as `Duration`; a zero duration means what the spec says 0 means for that
//! setting (no wait, no limit, no timeout ...). Consumers test `is_zero()`.
//!
//! Theory of operation: every setting is one row of `table.rs` (its path, flag, environment
//! variable, default, kind of value with its bound, and what a reload does with it; the row
//! types are `setting.rs`). `cli::Cli` holds the flags as raw text; `load::from_sources` walks
//! the table asking the layers for each setting in turn (`load.rs`), turns the first value found
//! into its type (`value.rs`, `file.rs` for config.json), then checks the rules between
//! settings (`validate.rs`). Every failure is one `SettingsError` line naming the setting
//! (`error.rs`).

pub(crate) mod bounds;
mod command;
mod error;
mod file;
mod host_prefix;
pub mod jsonc;
mod load;
mod node_flags;
pub(crate) mod setting;
mod table;
mod validate;
mod value;

pub(crate) use command::check_command;
pub(crate) use error::{SettingsError, Source, Sources};
pub(crate) use load::data_dir;
pub(crate) use load::from_sources;
pub(crate) use load::load;
#[cfg(test)]
pub(crate) use load::servers_config;
pub(crate) use setting::{key, Reload};
pub(crate) use table::{parse_admin_address, paths, setting, TABLE};
pub(crate) use validate::check_port_range;

use std::path::PathBuf;
use std::time::Duration;

/// The whole validated configuration of one launcher run. Public, with the stop's two timeouts
/// in [`ClusterSettings`], for `tests/ops_systemd.rs` (their defaults bound README's
/// `TimeoutStopSec`); the rest is the crate's own.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// `--data-dir`, `FHIRSMITH_DATA_DIR`, else the current directory.
    pub(crate) data_dir: PathBuf,
    /// `server.port` / `--port` / `PORT`: the port clients use (3000).
    pub(crate) port: u16,
    /// `server.cluster.command` / `--command`: program and arguments of the server
    /// (`["node", "server.js"]`), run in the working directory.
    pub(crate) command: Vec<String>,
    /// Node flags given after `--`, passed to every child (with `--expose-gc` added).
    pub(crate) node_flags: Vec<String>,
    pub cluster: ClusterSettings,
    pub(crate) memory: MemorySettings,
    pub(crate) tx: TxSettings,
    pub(crate) stats: StatsSettings,
    /// Non-fatal findings (unknown keys under `server.cluster` / `server.memory` ...), one line each.
    pub(crate) warnings: Vec<String>,
    /// Which layer gave each setting, for the messages that name it (`--workers`, not
    /// `server.cluster.workers`, when the flag set it).
    pub(crate) sources: Sources,
    /// What the plan needs of the launcher's own surroundings, read by `load` (the shell) so
    /// the plan stays pure: the preload's path while `nodeReport` is on, and the launcher's own
    /// `NODE_OPTIONS` (a wrapper's node gets the preload after it).
    pub(crate) node_preload: Option<PathBuf>,
    pub(crate) node_options: Option<String>,
    /// What the processes read of config.json beyond fhircluster's own settings: a digest of
    /// the file without its `server.cluster` object (`servers_config`), 0 without a file. Part
    /// of each process's inputs (`supervisor::inputs`), so a change restarts them in turn.
    pub(crate) servers_config: u64,
}

/// `server.cluster.*`. Every field here and in the other sections is one row of `table.rs`: the
/// defaults are written from the table as one struct literal, so a field without a row does not
/// compile.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterSettings {
    /// None: sized from the CPUs and memory. Some(0): the master alone.
    pub(crate) workers: Option<u32>,
    /// Overrides the detected physical cores.
    pub(crate) cores: Option<u32>,
    /// The worker rule by name (`classic`).
    pub(crate) worker_rule: String,
    pub(crate) memory_headroom_gb: f64,
    pub(crate) master_serves_tx: bool,
    /// The master's port; worker n gets this + n. Default `port + 1`.
    pub(crate) internal_port: u16,
    /// Where the processes listen (`127.0.0.1`).
    pub(crate) bind_address: String,
    pub drain: Duration,
    /// `server.cluster.lameDuckSeconds` (fhircluster's own, DEC-88): how long a stop signal's
    /// launcher goes on accepting and serving with `/readyz` at `503` before the drain begins,
    /// so a balancer's health check sees the host leave before its port closes. 0: none.
    pub lame_duck: Duration,
    /// 0: no limit.
    pub(crate) max_outstanding: u32,
    pub(crate) queue: Duration,
    pub(crate) owner_queue: Duration,
    pub(crate) cooldown: Duration,
    pub(crate) upstream_timeout: Duration,
    /// `hangTimeoutSeconds` (fhircluster's own, DEC-82): a process owing an answer that has
    /// written nothing (no byte of any answer, no IPC message) for this long is killed and
    /// started again. Default three times `upstreamTimeoutSeconds`. 0: never.
    pub(crate) hang_timeout: Duration,
    pub(crate) write_timeout: Duration,
    /// `headerTimeoutSeconds` (fhircluster's own): how long a client may take to send a
    /// request's head before its connection is closed. 0: no limit.
    pub(crate) header_timeout: Duration,
    /// `headerMaxKB` (fhircluster's own): the largest request line and headers a client may
    /// send, in KB; beyond it, `431`. 8..=1024.
    pub(crate) header_max_kb: u64,
    /// `bufferMaxMB` (fhircluster's own): the most the front door holds of bodies for clients
    /// (tx responses read ahead, request bodies read before admission), in MB. 0: no limit.
    pub(crate) buffer_max_mb: u64,
    /// `proxyThreads` (fhircluster's own): the front door's runtime threads.
    pub(crate) proxy_threads: u32,
    /// 0: never give up.
    pub(crate) max_start_failures: u32,
    pub(crate) recycle: Duration,
    pub(crate) fast_lane_extra: u32,
    pub(crate) normal_min_slots: u32,
    /// `saturatedPercent` (fhircluster's own): a process whose event loop wanted the CPU this
    /// share of the time is saturated, and held to the fewest heavy requests that keep it busy.
    /// 0: never (the spec's rule alone). 0..=100.
    pub(crate) saturated_percent: u32,
    /// `predictiveAdmission` (fhircluster's own, DEC-50): a tx request that the measured service
    /// times say cannot get a slot within `queueSeconds` is refused at once, and the queue's
    /// `503`s say in `Retry-After` when a slot is expected (1-5 s) instead of always 5.
    pub(crate) predictive_admission: bool,
    pub(crate) fast_lane_max_bytes: u64,
    /// Always above zero.
    pub(crate) status_interval: Duration,
    pub(crate) shared_cache: bool,
    pub(crate) cache_affinity: bool,
    pub(crate) shared_cache_max_mb: u64,
    pub(crate) shared_closure: bool,
    /// `server.cluster.killSeconds` (fhircluster's own, 30): how long after its SIGTERM a
    /// process still running gets SIGKILL. The spec fixes this at 30 s; it is a setting only so
    /// tests need not wait that long.
    pub kill_after: Duration,
    /// `server.cluster.adminAddress` / `--admin-address` (fhircluster's own): where the launcher's
    /// own endpoints (`/livez`, `/readyz`, `/status`, `/metrics`) listen. None: off. A port alone
    /// means loopback.
    pub(crate) admin_address: Option<std::net::SocketAddr>,
    /// `server.cluster.agentAddress` (fhircluster's own, DEC-89): where the launcher answers
    /// HAProxy's `agent-check` with its readiness and weight (`ops/agent.rs`). None: off. Read
    /// as `adminAddress` is.
    pub(crate) agent_address: Option<std::net::SocketAddr>,
    /// `server.cluster.controlSocket` / `--control-socket` (fhircluster's own): the control
    /// socket's path, relative to the data directory (`fhircluster.sock`); `off`: none. The
    /// actions (`fhircluster upgrade`) go there only: `ops/control_socket.rs`.
    pub(crate) control_socket: String,
    /// `server.cluster.controlGroup` (fhircluster's own): the group (name or number) that may
    /// use the control socket besides the launcher's user. Empty: the launcher's own group.
    pub(crate) control_group: String,
    /// `server.cluster.listenAddress` / `--listen-address` / `FHIRSMITH_LISTEN_ADDRESS`
    /// (fhircluster's own): the address `server.port` listens on. None: every interface, IPv6
    /// and IPv4 (IPv4 alone on a host without IPv6).
    pub(crate) listen_address: Option<std::net::IpAddr>,
    /// `server.cluster.logFormat` / `--log-format` (fhircluster's own): `text` or `json`.
    pub(crate) log_format: LogFormat,
    /// `server.cluster.logLevel` / `--log-level` (fhircluster's own), with `RUST_LOG` as its
    /// environment layer: which of the launcher's log lines are written.
    pub(crate) log_level: LogLevel,
    /// `server.cluster.hostPrefix` / `--host-prefix` / `FHIRSMITH_HOST_PREFIX` (fhircluster's
    /// own): put before every instance code, so each cache-id names its host as well as its
    /// process when nginx fronts several hosts (`a` → `am0`, `atx1`). Empty: none. Given as
    /// `ordinal:LETTERS`, it is resolved as it is read (`host_prefix.rs`, DEC-90).
    pub(crate) host_prefix: String,
    /// `server.cluster.servedByHeader` (fhircluster's own): the response header that names the
    /// process that answered (`X-Served-By`). Empty: off.
    pub(crate) served_by_header: String,
    /// `server.cluster.accessLog` (fhircluster's own): off, or its lines' format.
    pub(crate) access_log: AccessLogFormat,
    /// `server.cluster.accessLogPath` (fhircluster's own): the access log's file (relative to
    /// the data directory), reopened on SIGUSR1. Empty: stderr, with the launcher's lines.
    pub(crate) access_log_path: String,
    /// `server.cluster.accessLogQuery` (fhircluster's own): the query string is logged with the
    /// path (off: cache-ids and codes in it can be sensitive).
    pub(crate) access_log_query: bool,
    /// `server.cluster.trustedProxies` (fhircluster's own, DEC-85): the peers whose
    /// `X-Forwarded-For` names the client in the access log (nginx's `set_real_ip_from`).
    /// Empty: none, every line names the peer.
    pub(crate) trusted_proxies: Vec<std::net::IpAddr>,
    /// `server.cluster.pidFile` / `--pid-file` (fhircluster's own): a file holding the
    /// launcher's pid (relative to the data directory), from the start to the end.
    pub(crate) pid_file: String,
    /// `server.cluster.nodeReport` (fhircluster's own): each Node process is started with
    /// `--require` of the launcher's preload (`src/node_report.js`), which speaks the IPC
    /// protocol for a server that doesn't (hello, ready, status).
    pub(crate) node_report: bool,
}

/// How the launcher writes its log lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum LogFormat {
    #[default]
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

impl LogFormat {
    /// Its words in the settings, written once: the reader, `Show` and the docs check use them.
    pub(crate) const WORDS: [(&'static str, LogFormat); 2] =
        [("text", LogFormat::Text), ("json", LogFormat::Json)];

    pub(crate) fn word(self) -> &'static str {
        match self {
            LogFormat::Text => Self::WORDS[0].0,
            LogFormat::Json => Self::WORDS[1].0,
        }
    }

    pub(crate) fn from_word(word: &str) -> Option<LogFormat> {
        Self::WORDS
            .iter()
            .find(|(w, _)| *w == word)
            .map(|(_, f)| *f)
    }
}

/// `server.cluster.accessLog`: off (`None`), or the format of its lines, in the same words as
/// `logFormat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct AccessLogFormat(pub(crate) Option<LogFormat>);

impl AccessLogFormat {
    /// The word for no access log.
    pub(crate) const OFF: &'static str = "off";

    pub(crate) fn from_word(word: &str) -> Option<AccessLogFormat> {
        if word == Self::OFF {
            return Some(AccessLogFormat(None));
        }
        LogFormat::from_word(word).map(|f| AccessLogFormat(Some(f)))
    }

    pub(crate) fn word(self) -> &'static str {
        self.0.map_or(Self::OFF, LogFormat::word)
    }
}

/// Which of the launcher's own log lines are written: a level and the ones above it, or a
/// `RUST_LOG` filter as given.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(crate) enum LogLevel {
    Error,
    Warn,
    #[default]
    Info,
    Debug,
    /// `RUST_LOG`'s value, a `tracing` filter (`info,fhircluster::proxy=debug`).
    Filter(String),
}

impl Settings {
    /// Where the control socket is (`controlSocket` under the data directory), or `None`: off.
    pub(crate) fn control_socket_path(&self) -> Option<PathBuf> {
        let c = &self.cluster.control_socket;
        (c != "off").then(|| self.data_dir.join(c))
    }
}

impl LogLevel {
    /// `error`, `warn`, `info` or `debug`.
    pub(crate) fn parse(text: &str) -> Option<LogLevel> {
        match text.trim() {
            "error" => Some(LogLevel::Error),
            "warn" => Some(LogLevel::Warn),
            "info" => Some(LogLevel::Info),
            "debug" => Some(LogLevel::Debug),
            _ => None,
        }
    }

    /// As a `tracing` filter.
    pub(crate) fn filter(&self) -> &str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Filter(f) => f,
        }
    }
}

/// `server.memory.*`
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct MemorySettings {
    pub reject_fraction: f64,
    pub abort_fraction: f64,
    /// With a role: true unless set false (CONF-25).
    pub trim_allocator: bool,
}

/// `modules.tx.*`
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TxSettings {
    pub enabled: bool,
    /// The master's instance code (`m0` under the launcher).
    pub instance_code: String,
    /// `modules.tx.endpoints[].path`, e.g. `/r4`, `/tx/r5`; no trailing slash. None when not
    /// set: FHIRsmith has no default (its tx module stops at start without them), so no path is
    /// a tx path.
    pub endpoints: Vec<String>,
}

/// `stats.*`
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StatsSettings {
    /// `stats.sampleSeconds`; None when not set (60 s with a role, or `intervalMinutes` if shorter).
    pub sample: Option<Duration>,
    /// `stats.intervalMinutes` (10): fractions allowed, as FHIRsmith reads it (0.5: 30 s).
    pub interval_minutes: f64,
}

impl StatsSettings {
    /// How often each process takes a graph sample under the launcher, as the spec defines it
    /// for a process with a role: `stats.sampleSeconds`, or, not set, a minute or
    /// `stats.intervalMinutes` if shorter. The launcher tells the processes this in `hello`.
    pub(crate) fn sample_period(&self) -> Duration {
        const MINUTE: Duration = Duration::from_secs(60);
        self.sample.unwrap_or_else(|| {
            Duration::try_from_secs_f64(self.interval_minutes * 60.0)
                .map_or(MINUTE, |interval| interval.min(MINUTE))
        })
    }
}

/// The spec's defaults (and fhircluster's for its own settings), from the table: each section's
/// default is the table's.
macro_rules! section_default {
    ($($section:ident: $Section:ident),*) => {$(
        impl Default for $Section {
            fn default() -> Self {
                Settings::default().$section
            }
        }
    )*};
}
section_default!(
    cluster: ClusterSettings,
    memory: MemorySettings,
    tx: TxSettings,
    stats: StatsSettings
);
