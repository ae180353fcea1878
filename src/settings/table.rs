//! Every setting fhircluster reads, defined once: per row its field in `Settings`, its path in
//! config.json, its default, the kind of value it takes (with its bound), what a reload does
//! with a change (`Live`: applied at once; `Servers`: the processes take it as they restart in
//! turn; `Upgrade`: taken by an in-place upgrade; `Restart`: it refuses an upgrade, so it waits
//! for the launcher's restart), and the flag and environment
//! variable that may also give it. The loader reads the rows in this order (`load.rs`), the
//! unknown-key warnings know their keys (`file.rs`), a reload compares and takes them
//! (`reload.rs`), and tests hold cluster.md, the template and the help to them. The rest of the
//! code names a setting by the row's path the macro also writes (`paths::cluster::workers`), so
//! a name is spelled here alone (`tests/setting_names.rs`). The struct
//! fields and their meaning are documented in `mod.rs`; the few readers of one setting alone
//! follow the table.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::bounds::{MAX_COUNT, MAX_HEADROOM_GB, MAX_JS_INTEGER, MAX_MINUTES, MAX_PROXY_THREADS};
use super::error::{quote, SettingsError, Sources};
#[cfg(test)]
use super::setting::Kind;
use super::setting::{as_default, put, settings_table, Flag, Reload, Setting, Show};
use super::validate::normalise_endpoint;
use super::value::{Raw, RawValue};
use super::{
    AccessLogFormat, ClusterSettings, LogFormat, LogLevel, MemorySettings, Settings, StatsSettings,
};
use super::{Source, TxSettings};
use crate::cli::Cli;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

settings_table! {
    // The fields that are no setting: the flags' and the loader's own.
    own {
        data_dir: PathBuf::from("."),
        node_flags: Vec::new(),
        warnings: Vec::new(),
        sources: Sources::default(),
        node_preload: None,
        node_options: None,
        servers_config: 0,
    }
    Settings {
        port ["server.port", 3000, port, Upgrade, flag "--port" port, env "PORT"]
        command ["server.cluster.command", vec!["node".into(), "server.js".into()], words,
            Servers, flag "--command" command]
    }
    cluster: ClusterSettings {
        workers ["server.cluster.workers", None, whole(0, 65535), Live,
            flag "--workers" workers, env "FHIRSMITH_WORKERS", unset "from the CPUs and memory"]
        cores ["server.cluster.cores", None, whole(1, MAX_COUNT), Live, unset "detected"]
        worker_rule ["server.cluster.workerRule", "classic".into(), text, Live]
        memory_headroom_gb ["server.cluster.memoryHeadroomGB", 2.0, number(MAX_HEADROOM_GB), Live]
        master_serves_tx ["server.cluster.masterServesTx", true, boolean, Upgrade,
            flag "--master-serves-tx" master_serves_tx]
        internal_port ["server.cluster.internalPort", 3001, port, Restart,
            flag "--internal-port" internal_port, unset "port + 1" (internal_port_default)]
        bind_address ["server.cluster.bindAddress", "127.0.0.1".into(), bind_address, Restart]
        drain ["server.cluster.drainSeconds", secs(30), seconds, Live]
        lame_duck ["server.cluster.lameDuckSeconds", secs(0), seconds, Live]
        max_outstanding ["server.cluster.maxOutstanding", 16, whole(0, MAX_COUNT), Live]
        queue ["server.cluster.queueSeconds", secs(1), seconds, Live]
        owner_queue ["server.cluster.ownerQueueSeconds", secs(30), seconds, Live]
        cooldown ["server.cluster.cooldownSeconds", secs(2), seconds, Live]
        upstream_timeout ["server.cluster.upstreamTimeoutSeconds", secs(60), seconds, Live]
        hang_timeout ["server.cluster.hangTimeoutSeconds", secs(180), seconds, Live,
            unset "3 × upstreamTimeoutSeconds" (hang_timeout_default)]
        write_timeout ["server.cluster.writeTimeoutSeconds", secs(60), seconds, Live]
        header_timeout ["server.cluster.headerTimeoutSeconds", secs(30), seconds, Live]
        header_max_kb ["server.cluster.headerMaxKB", 32, whole(8, 1024), Live]
        buffer_max_mb ["server.cluster.bufferMaxMB", 256, whole(0, 1 << 20), Live]
        proxy_threads ["server.cluster.proxyThreads", 1, whole(1, MAX_PROXY_THREADS), Upgrade]
        max_start_failures ["server.cluster.maxStartFailures", 6, whole(0, MAX_COUNT), Upgrade]
        recycle ["server.cluster.recycleSeconds", secs(30), seconds, Live]
        fast_lane_extra ["server.cluster.fastLaneExtra", 4, whole(0, MAX_COUNT), Live]
        normal_min_slots ["server.cluster.normalMinSlots", 4, whole(0, MAX_COUNT), Live]
        saturated_percent ["server.cluster.saturatedPercent", 90, whole(0, 100), Live]
        predictive_admission ["server.cluster.predictiveAdmission", false, boolean, Live]
        fast_lane_max_bytes ["server.cluster.fastLaneMaxBytes", 1024, whole(0, MAX_JS_INTEGER),
            Upgrade]
        status_interval ["server.cluster.statusSeconds", secs(15), positive_seconds, Live]
        shared_cache ["server.cluster.sharedCache", false, boolean, Upgrade]
        cache_affinity ["server.cluster.cacheAffinity", false, boolean, Upgrade]
        shared_cache_max_mb ["server.cluster.sharedCacheMaxMB", 256, whole(0, MAX_JS_INTEGER),
            Upgrade]
        shared_closure ["server.cluster.sharedClosure", false, boolean, Upgrade]
        kill_after ["server.cluster.killSeconds", secs(30), seconds, Upgrade]
        admin_address ["server.cluster.adminAddress", None, admin_address, Upgrade,
            flag "--admin-address" admin_address, unset "off"]
        agent_address ["server.cluster.agentAddress", None, admin_address, Upgrade,
            unset "off"]
        control_socket ["server.cluster.controlSocket", "fhircluster.sock".into(), control_socket,
            Upgrade, flag "--control-socket" control_socket]
        control_group ["server.cluster.controlGroup", String::new(), control_group, Upgrade,
            unset "the launcher's own group"]
        listen_address ["server.cluster.listenAddress", None, address, Upgrade,
            flag "--listen-address" listen_address, env "FHIRSMITH_LISTEN_ADDRESS",
            unset "every interface, IPv6 and IPv4"]
        log_format ["server.cluster.logFormat", LogFormat::Text, log_format, Upgrade,
            flag "--log-format" log_format]
        // RUST_LOG, the usual variable of Rust programs, is this setting's environment layer.
        log_level ["server.cluster.logLevel", LogLevel::Info, log_level, Live,
            flag "--log-level" log_level, env "RUST_LOG"]
        host_prefix ["server.cluster.hostPrefix", String::new(), text, Restart,
            flag "--host-prefix" host_prefix, env "FHIRSMITH_HOST_PREFIX", unset "none"]
        served_by_header ["server.cluster.servedByHeader", String::new(), header_name, Live,
            unset "off"]
        access_log ["server.cluster.accessLog", AccessLogFormat(None), access_log, Live]
        access_log_path ["server.cluster.accessLogPath", String::new(), text, Live,
            unset "stderr"]
        access_log_query ["server.cluster.accessLogQuery", false, boolean, Live]
        trusted_proxies ["server.cluster.trustedProxies", Vec::new(), addresses, Live,
            unset "none"]
        pid_file ["server.cluster.pidFile", String::new(), text, Upgrade,
            flag "--pid-file" pid_file, unset "none"]
        node_report ["server.cluster.nodeReport", false, boolean, Upgrade]
    }
    memory: MemorySettings {
        reject_fraction ["server.memory.rejectFraction", 0.85, fraction, Servers]
        abort_fraction ["server.memory.abortFraction", 0.92, fraction, Servers]
        // spec: CONF-25: true unless set false.
        trim_allocator ["server.memory.trimAllocator", true, boolean, Servers]
    }
    tx: TxSettings {
        enabled ["modules.tx.enabled", true, boolean, Restart]
        instance_code ["modules.tx.instanceCode", "m0".into(), text, Restart]
        endpoints ["modules.tx.endpoints", Vec::new(), endpoints, Upgrade, unset "none"]
    }
    stats: StatsSettings {
        sample ["stats.sampleSeconds", None, positive_seconds, Servers,
            unset "a minute, or intervalMinutes if shorter"]
        interval_minutes ["stats.intervalMinutes", 10.0, minutes, Servers]
    }
}

/// The rows under `section` (`server.cluster`), for the unknown-key warnings.
pub(crate) fn keys_under(section: &str) -> impl Iterator<Item = &'static str> + '_ {
    TABLE
        .iter()
        .filter(move |s| s.section() == section)
        .map(Setting::key)
}

/// The row of `path`.
pub(crate) fn setting(path: &str) -> Option<&'static Setting> {
    TABLE.iter().find(|s| s.path == path)
}

/// `internalPort` not given: `server.port` + 1, read before it.
fn internal_port_default(s: &mut Settings) -> Result<(), SettingsError> {
    s.cluster.internal_port = s.port.checked_add(1).ok_or_else(|| {
        SettingsError::invalid(
            "server.cluster.internalPort",
            "65536",
            None,
            "its default, server.port + 1, is above 65535: set internalPort",
        )
    })?;
    Ok(())
}

/// `hangTimeoutSeconds` not given: three times `upstreamTimeoutSeconds`, read before it (0 when
/// that is 0: with no upstream timeout a process may take as long as it likes).
fn hang_timeout_default(s: &mut Settings) -> Result<(), SettingsError> {
    s.cluster.hang_timeout = s.cluster.upstream_timeout.saturating_mul(3);
    Ok(())
}

/// `stats.intervalMinutes` as FHIRsmith reads it (`if (config.intervalMinutes) intervalMs =
/// intervalMinutes * 60000`): fractions are minutes too (0.5: 30 s), and 0 counts as not set
/// (`default`). At most a year.
pub(super) fn interval_minutes(r: &Raw<'_>, default: f64) -> Result<f64, SettingsError> {
    let minutes = r.non_negative(MAX_MINUTES)?;
    Ok(if minutes == 0.0 { default } else { minutes })
}

/// An IP address, as written and as read.
pub(super) fn address(r: &Raw<'_>) -> Result<(String, IpAddr), SettingsError> {
    let text = r.string()?;
    match text.parse::<IpAddr>() {
        Ok(ip) => Ok((text, ip)),
        Err(_) => Err(
            r.invalid("must be an IP address, e.g. \"127.0.0.1\", \"::1\", \"0.0.0.0\" or \"::\"")
        ),
    }
}

/// A list of IP addresses (`trustedProxies`): each one as [`address`] reads it.
pub(super) fn addresses(r: &Raw<'_>) -> Result<Vec<IpAddr>, SettingsError> {
    const EXPECTED: &str = "must be a list of IP addresses, e.g. [\"127.0.0.1\", \"::1\"]";
    let RawValue::Json(Value::Array(items)) = &r.value else {
        return Err(r.invalid(EXPECTED));
    };
    items
        .iter()
        .map(|item| {
            item.as_str()
                .and_then(|t| t.parse::<IpAddr>().ok())
                .map(|ip| ip.to_canonical())
                .ok_or_else(|| r.invalid(EXPECTED))
        })
        .collect()
}

/// `server.cluster.bindAddress`: an IP address, or a host name as `cluster.js` takes one, which
/// must resolve to at least one address (DEC-40: the launcher tries each in turn, since each
/// process resolves the name for itself).
pub(super) fn bind_address(r: &Raw<'_>) -> Result<(String, IpAddr), SettingsError> {
    if let Ok(ip) = address(r) {
        return Ok(ip);
    }
    let text = r.string()?;
    match crate::system::resolve::addresses(&text) {
        Ok(ips) => Ok((text, ips[0])),
        Err(why) => Err(r.invalid(format!(
            "is not an IP address, and as a host name {why}: write an address, e.g. \
             \"127.0.0.1\", \"::1\", \"0.0.0.0\" or \"::\", or a name the system resolves"
        ))),
    }
}

/// `server.cluster.adminAddress`: a port (JSON number or text; on loopback, as README writes
/// `9100`) or an address and port.
pub(super) fn admin_address(r: &Raw<'_>) -> Result<SocketAddr, SettingsError> {
    const EXPECTED: &str =
        "must be a port (on loopback) or \"address:port\", e.g. 9100 or \"127.0.0.1:9100\"";
    let loopback = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    if let RawValue::Json(Value::Number(_)) = r.value {
        return r.port().map(loopback).map_err(|_| r.invalid(EXPECTED));
    }
    let text = r.string().map_err(|_| r.invalid(EXPECTED))?;
    parse_admin_address(&text).ok_or_else(|| r.invalid(EXPECTED))
}

/// `3099` (loopback), `127.0.0.1:3099`, `[::1]:3099`, `0.0.0.0:3099`.
pub(crate) fn parse_admin_address(text: &str) -> Option<SocketAddr> {
    if let Ok(port) = text.parse::<u16>() {
        return (port > 0).then(|| SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse::<SocketAddr>().ok().filter(|a| a.port() > 0)
}

/// `controlSocket`: the control socket's path (relative to the data directory), or `off`.
pub(super) fn control_socket(r: &Raw<'_>) -> Result<String, SettingsError> {
    let text = r.string()?;
    if text.is_empty() || text.contains('\0') {
        return Err(r.invalid("must be a path, e.g. \"fhircluster.sock\", or \"off\""));
    }
    Ok(text)
}

/// `controlGroup`: a group's name or number, or empty (the launcher's own group). Whether the
/// group exists is found where the socket is made (`ops/control_socket.rs`), and by `--check`.
pub(super) fn control_group(r: &Raw<'_>) -> Result<String, SettingsError> {
    let text = r.string()?;
    let bad = |c: char| c == ':' || c == '\0' || c.is_whitespace();
    if text.contains(bad) {
        return Err(r.invalid("must be a group's name or number, e.g. \"fhirsmith\", or \"\""));
    }
    Ok(text)
}

/// `servedByHeader`: a response header's name (`X-Served-By`), or empty (off). Not one whose
/// meaning HTTP fixes: a header the launcher or hyper sets for the message itself.
pub(super) fn header_name(r: &Raw<'_>) -> Result<String, SettingsError> {
    const RESERVED: [&str; 8] = [
        "connection",
        "content-length",
        "content-type",
        "transfer-encoding",
        "keep-alive",
        "upgrade",
        "date",
        "retry-after",
    ];
    let text = r.string()?;
    if text.is_empty() {
        return Ok(text);
    }
    match http::HeaderName::from_bytes(text.as_bytes()) {
        Ok(name) if RESERVED.contains(&name.as_str()) => {
            Err(r.invalid("must not be a header HTTP itself uses, e.g. \"X-Served-By\""))
        }
        Ok(_) => Ok(text),
        Err(_) => Err(r.invalid("must be a header name, e.g. \"X-Served-By\", or \"\" (off)")),
    }
}

/// `accessLog`: `off`, or a `logFormat` word.
pub(super) fn access_log(r: &Raw<'_>) -> Result<AccessLogFormat, SettingsError> {
    AccessLogFormat::from_word(&r.string()?).ok_or_else(|| {
        let words = std::iter::once(AccessLogFormat::OFF).chain(LogFormat::WORDS.map(|(w, _)| w));
        r.invalid(format!("must be {}", one_of(words)))
    })
}

pub(super) fn log_format(r: &Raw<'_>) -> Result<LogFormat, SettingsError> {
    LogFormat::from_word(&r.string()?).ok_or_else(|| {
        r.invalid(format!(
            "must be {}",
            one_of(LogFormat::WORDS.map(|(w, _)| w).into_iter())
        ))
    })
}

/// `"a"`, `"b"` or `"c"`: the words an error message offers.
fn one_of<'a>(words: impl Iterator<Item = &'a str>) -> String {
    let words: Vec<String> = words.map(|w| format!("\"{w}\"")).collect();
    match words.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

pub(super) fn log_level(r: &Raw<'_>) -> Result<LogLevel, SettingsError> {
    let text = r.string()?;
    if matches!(r.from, Source::Env(_)) {
        // RUST_LOG is a whole filter; what tracing can't read is refused here, not ignored.
        return match tracing_subscriber::EnvFilter::builder().parse(&text) {
            Ok(_) => Ok(LogLevel::Filter(text)),
            Err(e) => Err(r.invalid(format!("must be a tracing filter ({e})"))),
        };
    }
    LogLevel::parse(&text)
        .ok_or_else(|| r.invalid("must be \"error\", \"warn\", \"info\" or \"debug\""))
}

/// `modules.tx.endpoints`: an array of objects, each with a `path`, normalised (DEC-14).
pub(super) fn endpoints(raw: &Raw<'_>) -> Result<Vec<String>, SettingsError> {
    let RawValue::Json(Value::Array(items)) = &raw.value else {
        return Err(raw.invalid("must be an array of objects, each with a \"path\""));
    };
    let mut paths: Vec<String> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let setting = format!("modules.tx.endpoints[{i}].path");
        let bad = |value: String, expected: &str| {
            SettingsError::invalid(&setting, value, Some(raw.from.clone()), expected)
        };
        let Some(path) = item.get("path") else {
            return Err(bad(
                item.to_string(),
                "each endpoint must have a \"path\", e.g. \"/r4\"",
            ));
        };
        let Some(text) = path.as_str() else {
            return Err(bad(path.to_string(), "must be a string, e.g. \"/r4\""));
        };
        let normal = normalise_endpoint(text).map_err(|why| bad(quote(text), why))?;
        if paths.contains(&normal) {
            return Err(bad(quote(text), "appears twice in modules.tx.endpoints"));
        }
        paths.push(normal);
    }
    Ok(paths)
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
