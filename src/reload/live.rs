//! What the running launcher takes of the settings, in the shape each part takes it: the
//! scheduler's limits, the listener's, the upstream timeout, the body budget, the log level,
//! the access log, the supervisor's, and the worker count. Made from the settings at start, and from the
//! settings in force after each reload, which `launcher/reloader.rs` applies whole (it takes
//! every field, with no `..`), so a setting the table calls `Live` cannot reach the launcher at
//! start and be forgotten on reload: the table's test changes each and finds it here.

use std::time::Duration;

use crate::proxy::listener::ListenerSettings;
use crate::proxy::scheduler::SchedulerConfig;
use crate::settings::{ClusterSettings, LogLevel, Settings};
use crate::supervisor::SupervisorSettings;

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Live {
    pub scheduler: SchedulerConfig,
    pub listener: ListenerSettings,
    /// `upstreamTimeoutSeconds`.
    pub upstream_timeout: Duration,
    /// `bufferMaxMB`, in bytes.
    pub buffer_limit: u64,
    pub log_level: LogLevel,
    /// `accessLog`, `accessLogPath`, `accessLogQuery`.
    pub access_log: crate::logs::access_log::Wanted,
    pub supervisor: SupervisorSettings,
    pub workers: Count,
    /// `lameDuckSeconds` (DEC-88), the next stop's.
    pub lame_duck: Duration,
}

impl From<&Settings> for Live {
    fn from(s: &Settings) -> Self {
        let c = &s.cluster;
        Live {
            scheduler: SchedulerConfig::from(c),
            listener: ListenerSettings::from(c),
            upstream_timeout: c.upstream_timeout,
            buffer_limit: c.buffer_max_mb << 20,
            log_level: c.log_level.clone(),
            access_log: crate::logs::access_log::Wanted::from(s),
            supervisor: SupervisorSettings::from(s),
            workers: Count::from(c),
            lame_duck: c.lame_duck,
        }
    }
}

/// The client side's limits. A connection takes those in force when it is accepted.
impl From<&ClusterSettings> for ListenerSettings {
    fn from(c: &ClusterSettings) -> Self {
        ListenerSettings {
            write_timeout: c.write_timeout,
            header_read_timeout: c.header_timeout,
            max_head: crate::proxy::http1::limits::max_head(c.header_max_kb),
            drain: c.drain,
            // Checked when the settings were read: a name that is none is off.
            served_by: http::HeaderName::from_bytes(c.served_by_header.as_bytes()).ok(),
        }
    }
}

/// How many workers: given, or sized from what sizes them (which matters only then).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Count {
    Exactly(u32),
    Sized {
        cores: Option<u32>,
        rule: String,
        headroom_gb: f64,
    },
}

impl From<&ClusterSettings> for Count {
    fn from(c: &ClusterSettings) -> Self {
        match c.workers {
            Some(n) => Count::Exactly(n),
            None => Count::Sized {
                cores: c.cores,
                rule: c.worker_rule.clone(),
                headroom_gb: c.memory_headroom_gb,
            },
        }
    }
}
