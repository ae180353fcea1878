//! Builds the one validated `Settings` from four layers, first found wins (DEC-13): a flag, then
//! an environment variable, then `config.json` in the data directory, then the spec's default.
//!
//! `from_sources` is the whole of it with every input passed in (no process environment, no
//! files), so each setting's behaviour is tested beside it; `load` only gathers the real inputs.

use std::cell::RefCell;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::bounds::{MAX_COUNT, MAX_HEADROOM_GB, MAX_JS_INTEGER, MAX_MINUTES, MAX_PROXY_THREADS};
use super::error::{quote, SettingsError, Source, Sources};
use super::file::ConfigFile;
use super::node_flags::check_node_flags;
use super::validate::{normalise_endpoint, unset_endpoints_warning, validate};
use super::value::{Raw, RawValue};
use super::{jsonc, LogFormat, LogLevel, Settings};
use crate::cli::Cli;

/// The settings a flag or environment variable may also give, and their names there.
fn overrides(path: &str) -> (Option<&'static str>, Option<&'static str>) {
    match path {
        "server.port" => (Some("--port"), Some("PORT")),
        "server.cluster.workers" => (Some("--workers"), Some("FHIRSMITH_WORKERS")),
        "server.cluster.masterServesTx" => (Some("--master-serves-tx"), None),
        "server.cluster.internalPort" => (Some("--internal-port"), None),
        "server.cluster.command" => (Some("--command"), None),
        "server.cluster.adminAddress" => (Some("--admin-address"), None),
        "server.cluster.listenAddress" => {
            (Some("--listen-address"), Some("FHIRSMITH_LISTEN_ADDRESS"))
        }
        "server.cluster.logFormat" => (Some("--log-format"), None),
        // RUST_LOG, the usual variable of Rust programs, is this setting's environment layer.
        "server.cluster.logLevel" => (Some("--log-level"), Some("RUST_LOG")),
        _ => (None, None),
    }
}

const DATA_DIR_ENV: &str = "FHIRSMITH_DATA_DIR";

/// The four layers, asked for one setting at a time; what each setting was taken from is
/// noted as it is read.
struct Layers<'a> {
    cli: &'a Cli,
    env: &'a dyn Fn(&str) -> Option<String>,
    file: Option<ConfigFile<'a>>,
    sources: RefCell<Sources>,
}

impl<'a> Layers<'a> {
    fn flag(&self, flag: &str) -> Option<&'a String> {
        let c = self.cli;
        match flag {
            "--port" => c.port.as_ref(),
            "--workers" => c.workers.as_ref(),
            "--master-serves-tx" => c.master_serves_tx.as_ref(),
            "--internal-port" => c.internal_port.as_ref(),
            "--command" => c.command.as_ref(),
            "--admin-address" => c.admin_address.as_ref(),
            "--listen-address" => c.listen_address.as_ref(),
            "--log-format" => c.log_format.as_ref(),
            "--log-level" => c.log_level.as_ref(),
            _ => None,
        }
    }

    /// The setting's raw value from the first layer that has it; `None`: the default applies.
    fn get(&self, path: &'static str) -> Option<Raw<'a>> {
        let raw = self.first(path);
        if let Some(r) = &raw {
            self.sources.borrow_mut().set(path, r.from.clone());
        }
        raw
    }

    fn first(&self, path: &'static str) -> Option<Raw<'a>> {
        let (flag, env) = overrides(path);
        let text = |value: String, from: Source| Raw {
            path,
            value: RawValue::Text(value),
            from,
        };
        if let Some((flag, value)) = flag.and_then(|f| Some((f, self.flag(f)?))) {
            return Some(text(value.clone(), Source::Flag(flag)));
        }
        // An empty variable counts as unset, as `process.env.PORT || ...` does.
        if let Some((var, value)) = env.and_then(|v| Some((v, (self.env)(v)?))) {
            if !value.is_empty() {
                return Some(text(value, Source::Env(var)));
            }
        }
        self.file.and_then(|f| f.setting(path))
    }

    /// Parses the setting into `slot` when some layer gives it; the default stays otherwise.
    fn read<T>(
        &self,
        path: &'static str,
        slot: &mut T,
        parse: impl FnOnce(&Raw<'a>) -> Result<T, SettingsError>,
    ) -> Result<(), SettingsError> {
        if let Some(raw) = self.get(path) {
            *slot = parse(&raw)?;
        }
        Ok(())
    }
}

/// The data directory and the layer that gave it: `--data-dir`, `FHIRSMITH_DATA_DIR`, else the
/// current directory (`None`).
pub fn data_dir(cli: &Cli, env: &dyn Fn(&str) -> Option<String>) -> (PathBuf, Option<Source>) {
    if let Some(dir) = &cli.data_dir {
        return (dir.clone(), Some(Source::Flag("--data-dir")));
    }
    match env(DATA_DIR_ENV).filter(|d| !d.is_empty()) {
        Some(dir) => (PathBuf::from(dir), Some(Source::Env(DATA_DIR_ENV))),
        None => (PathBuf::from("."), None),
    }
}

/// Every setting from explicit inputs: the flags, an environment lookup, and `config.json`'s path
/// and parsed content (`None`: there is none, so defaults). Reads nothing else.
pub fn from_sources(
    cli: &Cli,
    env: &dyn Fn(&str) -> Option<String>,
    config: Option<(&Path, &Value)>,
) -> Result<Settings, SettingsError> {
    let file = config.map(|(path, json)| ConfigFile { path, json });
    let l = Layers {
        cli,
        env,
        file,
        sources: RefCell::default(),
    };
    let mut s = Settings {
        data_dir: data_dir(cli, env).0,
        node_flags: check_node_flags(&cli.node_flags)?,
        ..Settings::default()
    };
    if let Some(f) = &file {
        s.warnings = f.check()?;
    }

    l.read("server.port", &mut s.port, Raw::port)?;
    l.read("server.cluster.command", &mut s.command, Raw::words)?;

    let c = &mut s.cluster;
    // Bounded by the ports: internalPort + workers <= 65535 (check_port_range).
    l.read("server.cluster.workers", &mut c.workers, |r| {
        r.whole_u32(0, 65535).map(Some)
    })?;
    l.read("server.cluster.cores", &mut c.cores, |r| {
        r.whole_u32(1, MAX_COUNT).map(Some)
    })?;
    l.read("server.cluster.workerRule", &mut c.worker_rule, Raw::string)?;
    l.read(
        "server.cluster.memoryHeadroomGB",
        &mut c.memory_headroom_gb,
        |r| r.non_negative(MAX_HEADROOM_GB),
    )?;
    l.read(
        "server.cluster.masterServesTx",
        &mut c.master_serves_tx,
        Raw::boolean,
    )?;
    c.internal_port = match l.get("server.cluster.internalPort") {
        Some(raw) => raw.port()?,
        None => s.port.checked_add(1).ok_or_else(|| {
            SettingsError::invalid(
                "server.cluster.internalPort",
                "65536",
                None,
                "its default, server.port + 1, is above 65535: set internalPort",
            )
        })?,
    };
    l.read("server.cluster.bindAddress", &mut c.bind_address, |r| {
        let addr = r.string()?;
        match addr.parse::<IpAddr>() {
            Ok(_) => Ok(addr),
            Err(_) => {
                Err(r.invalid("must be an IP address, e.g. \"127.0.0.1\", \"0.0.0.0\" or \"::\""))
            }
        }
    })?;
    l.read("server.cluster.drainSeconds", &mut c.drain, |r| {
        r.seconds(false)
    })?;
    l.read(
        "server.cluster.maxOutstanding",
        &mut c.max_outstanding,
        |r| r.whole_u32(0, MAX_COUNT),
    )?;
    l.read("server.cluster.queueSeconds", &mut c.queue, |r| {
        r.seconds(false)
    })?;
    l.read(
        "server.cluster.ownerQueueSeconds",
        &mut c.owner_queue,
        |r| r.seconds(false),
    )?;
    l.read("server.cluster.cooldownSeconds", &mut c.cooldown, |r| {
        r.seconds(false)
    })?;
    l.read(
        "server.cluster.upstreamTimeoutSeconds",
        &mut c.upstream_timeout,
        |r| r.seconds(false),
    )?;
    l.read(
        "server.cluster.writeTimeoutSeconds",
        &mut c.write_timeout,
        |r| r.seconds(false),
    )?;
    l.read(
        "server.cluster.headerTimeoutSeconds",
        &mut c.header_timeout,
        |r| r.seconds(false),
    )?;
    l.read("server.cluster.headerMaxKB", &mut c.header_max_kb, |r| {
        r.whole(8, 1024)
    })?;
    l.read("server.cluster.bufferMaxMB", &mut c.buffer_max_mb, |r| {
        r.whole(0, 1 << 20)
    })?;
    l.read("server.cluster.proxyThreads", &mut c.proxy_threads, |r| {
        r.whole_u32(1, MAX_PROXY_THREADS)
    })?;
    l.read(
        "server.cluster.maxStartFailures",
        &mut c.max_start_failures,
        |r| r.whole_u32(0, MAX_COUNT),
    )?;
    l.read("server.cluster.recycleSeconds", &mut c.recycle, |r| {
        r.seconds(false)
    })?;
    l.read(
        "server.cluster.fastLaneExtra",
        &mut c.fast_lane_extra,
        |r| r.whole_u32(0, MAX_COUNT),
    )?;
    l.read(
        "server.cluster.normalMinSlots",
        &mut c.normal_min_slots,
        |r| r.whole_u32(0, MAX_COUNT),
    )?;
    l.read(
        "server.cluster.saturatedPercent",
        &mut c.saturated_percent,
        |r| r.whole(0, 100).map(|n| n as u32),
    )?;
    l.read(
        "server.cluster.fastLaneMaxBytes",
        &mut c.fast_lane_max_bytes,
        |r| r.whole(0, MAX_JS_INTEGER),
    )?;
    l.read(
        "server.cluster.statusSeconds",
        &mut c.status_interval,
        |r| r.seconds(true),
    )?;
    l.read(
        "server.cluster.sharedCache",
        &mut c.shared_cache,
        Raw::boolean,
    )?;
    l.read(
        "server.cluster.cacheAffinity",
        &mut c.cache_affinity,
        Raw::boolean,
    )?;
    l.read(
        "server.cluster.sharedCacheMaxMB",
        &mut c.shared_cache_max_mb,
        |r| r.whole(0, MAX_JS_INTEGER),
    )?;
    l.read(
        "server.cluster.sharedClosure",
        &mut c.shared_closure,
        Raw::boolean,
    )?;
    l.read("server.cluster.killSeconds", &mut c.kill_after, |r| {
        r.seconds(false)
    })?;
    l.read(
        "server.cluster.adminAddress",
        &mut c.admin_address,
        admin_address,
    )?;
    l.read("server.cluster.listenAddress", &mut c.listen_address, |r| {
        r.string()?.parse::<IpAddr>().map(Some).map_err(|_| {
            r.invalid("must be an IP address, e.g. \"127.0.0.1\", \"::1\", \"0.0.0.0\" or \"::\"")
        })
    })?;
    l.read("server.cluster.logFormat", &mut c.log_format, |r| {
        match r.string()?.as_str() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(r.invalid("must be \"text\" or \"json\"")),
        }
    })?;
    l.read("server.cluster.logLevel", &mut c.log_level, |r| {
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
    })?;
    l.read("server.cluster.hostPrefix", &mut c.host_prefix, Raw::string)?;

    let m = &mut s.memory;
    l.read(
        "server.memory.rejectFraction",
        &mut m.reject_fraction,
        Raw::fraction,
    )?;
    l.read(
        "server.memory.abortFraction",
        &mut m.abort_fraction,
        Raw::fraction,
    )?;
    // spec: CONF-25: true unless set false.
    l.read(
        "server.memory.trimAllocator",
        &mut m.trim_allocator,
        Raw::boolean,
    )?;

    l.read("modules.tx.enabled", &mut s.tx.enabled, Raw::boolean)?;
    l.read(
        "modules.tx.instanceCode",
        &mut s.tx.instance_code,
        Raw::string,
    )?;
    if let Some(raw) = l.get("modules.tx.endpoints") {
        s.tx.endpoints = endpoints(&raw)?;
    }

    l.read("stats.sampleSeconds", &mut s.stats.sample, |r| {
        r.seconds(true).map(Some)
    })?;
    let unset = s.stats.interval_minutes;
    l.read(
        "stats.intervalMinutes",
        &mut s.stats.interval_minutes,
        |r| interval_minutes(r, unset),
    )?;

    s.sources = l.sources.into_inner();
    validate(&s)?;
    s.warnings.extend(unset_endpoints_warning(&s));
    if !s.cluster.master_serves_tx && s.cluster.workers == Some(0) {
        s.warnings.push(format!(
            "{} and {}: no process takes tx requests",
            s.sources.shown("server.cluster.masterServesTx", "false"),
            s.sources.shown("server.cluster.workers", 0),
        ));
    }
    Ok(s)
}

/// `stats.intervalMinutes` as FHIRsmith reads it (`if (config.intervalMinutes) intervalMs =
/// intervalMinutes * 60000`): fractions are minutes too (0.5: 30 s), and 0 counts as not set
/// (`default`). At most a year.
fn interval_minutes(r: &Raw<'_>, default: f64) -> Result<f64, SettingsError> {
    let minutes = r.non_negative(MAX_MINUTES)?;
    Ok(if minutes == 0.0 { default } else { minutes })
}

/// `server.cluster.adminAddress`: a port (JSON number or text; on loopback, as README writes
/// `9100`) or an address and port.
fn admin_address(r: &Raw<'_>) -> Result<Option<std::net::SocketAddr>, SettingsError> {
    const EXPECTED: &str =
        "must be a port (on loopback) or \"address:port\", e.g. 9100 or \"127.0.0.1:9100\"";
    let loopback = |port: u16| std::net::SocketAddr::from(([127, 0, 0, 1], port));
    if let RawValue::Json(Value::Number(_)) = r.value {
        return r
            .port()
            .map(|p| Some(loopback(p)))
            .map_err(|_| r.invalid(EXPECTED));
    }
    let text = r.string().map_err(|_| r.invalid(EXPECTED))?;
    parse_admin_address(&text)
        .map(Some)
        .ok_or_else(|| r.invalid(EXPECTED))
}

/// `modules.tx.endpoints`: an array of objects, each with a `path`, normalised (DEC-14).
fn endpoints(raw: &Raw<'_>) -> Result<Vec<String>, SettingsError> {
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

/// Reads the real environment and `<data dir>/config.json` (none: all defaults), then
/// [`from_sources`]. A data directory given but missing is an error naming it.
pub fn load(cli: &Cli) -> Result<Settings, SettingsError> {
    let env = |key: &str| std::env::var_os(key).map(|v| v.to_string_lossy().into_owned());
    let (dir, from) = data_dir(cli, &env);
    if from.is_some() && !dir.is_dir() {
        let why = if dir.exists() {
            "is not a directory"
        } else {
            "does not exist"
        };
        return Err(SettingsError::invalid(
            "data directory",
            quote(&dir.display().to_string()),
            from,
            format!("{why}: give an existing data directory"),
        ));
    }
    let json = jsonc::read(&dir)?;
    let path = dir.join("config.json");
    from_sources(cli, &env, json.as_ref().map(|j| (path.as_path(), j)))
}

#[cfg(test)]
#[path = "load_tests/mod.rs"]
mod tests;

/// `3099` (loopback), `127.0.0.1:3099`, `[::1]:3099`, `0.0.0.0:3099`.
fn parse_admin_address(text: &str) -> Option<std::net::SocketAddr> {
    if let Ok(port) = text.parse::<u16>() {
        return (port > 0).then(|| std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse::<std::net::SocketAddr>()
        .ok()
        .filter(|a| a.port() > 0)
}
