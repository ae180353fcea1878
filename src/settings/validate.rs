//! The rules between settings, checked once every layer has been read: each failure is a
//! start-up error naming the setting, never a clamp (DEC-7). Rules about one value alone (types,
//! ranges, negatives) are in `value.rs`, where the value's layer is still known.

use super::error::{quote, SettingsError, Source};
use super::paths::{self, cluster, memory, tx};
use super::Settings;

/// The worker rules fhircluster knows by name (DEC-23). The sizing code implements each.
pub const KNOWN_RULES: &[&str] = &["classic"];

/// Everything that must hold between settings before anything starts.
pub fn validate(s: &Settings) -> Result<(), SettingsError> {
    let c = &s.cluster;
    // The error for `setting` with its value, naming the layer that gave it.
    let bad = |setting: &str, value: String, expected: String| {
        SettingsError::invalid(setting, value, Some(s.sources.of(setting)), expected)
    };
    if s.command.first().is_none_or(|p| p.is_empty()) {
        return Err(bad(
            paths::command,
            serde_json::to_string(&s.command).unwrap_or_default(),
            "must name a program, then its arguments, e.g. [\"node\", \"server.js\"]".into(),
        ));
    }
    check_rule(&c.worker_rule, KNOWN_RULES)?;
    // CONF-22, DEC-7. maxOutstanding 0 is no limit, so it bounds nothing.
    if c.max_outstanding > 0 && c.normal_min_slots > c.max_outstanding {
        return Err(bad(
            cluster::normal_min_slots,
            c.normal_min_slots.to_string(),
            format!(
                "must be at most {} ({}, {})",
                cluster::max_outstanding,
                c.max_outstanding,
                s.sources.of(cluster::max_outstanding)
            ),
        ));
    }
    if s.memory.reject_fraction >= s.memory.abort_fraction {
        return Err(bad(
            memory::reject_fraction,
            s.memory.reject_fraction.to_string(),
            format!(
                "must be below {} ({}, {})",
                memory::abort_fraction,
                s.memory.abort_fraction,
                s.sources.of(memory::abort_fraction)
            ),
        ));
    }
    check_instance_code(&s.tx.instance_code)?;
    check_host_prefix(&c.host_prefix, &s.tx.instance_code)?;
    // Not given means sized by the rule, which gives at least one worker (SIZE-12).
    let workers_run = c.workers != Some(0);
    let workers = if workers_run {
        match c.workers {
            Some(n) => format!(
                "{} is {n} ({})",
                cluster::workers,
                s.sources.of(cluster::workers)
            ),
            None => format!("{} is not 0 (sized from the CPUs)", cluster::workers),
        }
    } else {
        String::new()
    };
    if workers_run && !s.tx.enabled {
        return Err(bad(
            tx::enabled,
            "false".into(),
            format!("must be true while {workers}: tx-workers serve only the tx module"),
        ));
    }
    let endpoints_given = s.sources.of(tx::endpoints) != Source::Default;
    if endpoints_given && workers_run && s.tx.endpoints.is_empty() {
        return Err(bad(
            tx::endpoints,
            "[]".into(),
            format!("must list at least one endpoint path while {workers}"),
        ));
    }
    // FHIRsmith's tx module has no default endpoints: switched on without them, every process
    // stops at start ("TX module requires at least one endpoint configuration").
    if !endpoints_given && s.tx.enabled && s.sources.of(tx::enabled) != Source::Default {
        return Err(SettingsError::invalid(
            tx::endpoints,
            "(not set)",
            None,
            format!(
                "must list the tx endpoints when {} is true: FHIRsmith's tx module has no default and \
                 stops at start without them; e.g. {EXAMPLE_ENDPOINTS}",
                s.sources.of(tx::enabled).setter(tx::enabled)
            ),
        ));
    }
    check_port_range(s, c.workers.unwrap_or(0))
}

/// What a message suggests for `modules.tx.endpoints`.
pub const EXAMPLE_ENDPOINTS: &str = r#"[{"path": "/r4", "fhirVersion": "4.0"}]"#;

/// The warning when workers run but `modules.tx.endpoints` is not set: nothing is a tx path, so
/// the workers get no request. Not refused: FHIRsmith runs such a configuration (its tx module
/// off), and the launcher starts what `cluster.js` would.
pub fn unset_endpoints_warning(s: &Settings) -> Option<String> {
    let unset = s.sources.of(tx::endpoints) == Source::Default;
    (unset && s.cluster.workers != Some(0)).then(|| {
        format!(
            "modules.tx.endpoints is not set, so no path is a tx path: every request goes to the \
             master and the tx-workers get none (FHIRsmith has no default tx endpoints); list them, \
             e.g. {EXAMPLE_ENDPOINTS}, or set server.cluster.workers to 0"
        )
    })
}

/// The processes' ports, `internalPort` ..= `internalPort + workers`, must fit below 65536 and
/// must not include `server.port` (CONF-10). The planner calls this again with the computed
/// count (DEC-21).
pub fn check_port_range(s: &Settings, workers: u32) -> Result<(), SettingsError> {
    let first = u64::from(s.cluster.internal_port);
    let last = first + u64::from(workers);
    let given = if s.cluster.workers == Some(workers) {
        format!(", {}", s.sources.of(cluster::workers))
    } else {
        String::new()
    };
    let range = if workers == 0 {
        format!("the master's port {first}")
    } else {
        format!("the processes' ports {first}-{last} (the master and {workers} workers{given})")
    };
    let internal = |expected: String| {
        SettingsError::invalid(
            cluster::internal_port,
            first.to_string(),
            Some(s.sources.of(cluster::internal_port)),
            expected,
        )
    };
    if last > 65535 {
        return Err(internal(format!(
            "{range} must end at 65535 at most; choose a lower internalPort or fewer workers"
        )));
    }
    let port = s.sources.shown(paths::port, s.port);
    if (first..=last).contains(&u64::from(s.port)) {
        return Err(internal(format!(
            "{range} must not include {port}; choose an internalPort above it or at least {} below it",
            u64::from(workers) + 1
        )));
    }
    check_admin_address(s, first..=last, &range, &port)
}

/// The launcher's own endpoints and its agent (`agentAddress`) need a port each of their own:
/// not `server.port`, where the front door listens, nor one of the processes' (either would
/// fail to bind, or take a process's port before it starts), nor each other's. Any address
/// counts: the front door listens on every interface.
fn check_admin_address(
    s: &Settings,
    processes: std::ops::RangeInclusive<u64>,
    range: &str,
    port: &str,
) -> Result<(), SettingsError> {
    let c = &s.cluster;
    for (path, addr) in [
        (cluster::admin_address, c.admin_address),
        (cluster::agent_address, c.agent_address),
    ] {
        let Some(addr) = addr else { continue };
        let clash = if addr.port() == s.port {
            format!("must not use the port clients use, {port}")
        } else if processes.contains(&u64::from(addr.port())) {
            format!(
                "must not use one of {range}, from {}",
                s.sources.shown(cluster::internal_port, c.internal_port)
            )
        } else if path == cluster::agent_address
            && c.admin_address.is_some_and(|a| a.port() == addr.port())
        {
            format!("must not use {}'s port", cluster::admin_address)
        } else {
            continue;
        };
        return Err(SettingsError::invalid(
            path,
            addr.to_string(),
            Some(s.sources.of(path)),
            format!("{clash}; choose another port"),
        ));
    }
    Ok(())
}

/// An unknown `workerRule` is an error listing the known ones (DEC-23).
pub fn check_rule(rule: &str, known: &[&str]) -> Result<(), SettingsError> {
    if known.contains(&rule) {
        return Ok(());
    }
    Err(SettingsError::invalid(
        cluster::worker_rule,
        quote(rule),
        None,
        format!("must be one of the known rules: {}", known.join(", ")),
    ))
}

/// 1-16 ASCII letters and digits, and not a worker's code (DEC-20). Every `tx<n>` is refused,
/// not only those of the configured workers: the count may be sized, and changed, at run time.
pub fn check_instance_code(code: &str) -> Result<(), SettingsError> {
    let err =
        |expected: &str| SettingsError::invalid(tx::instance_code, quote(code), None, expected);
    if code.is_empty() || code.len() > 16 || !code.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(err("must be 1-16 ASCII letters and digits"));
    }
    if is_worker_code(code) {
        return Err(err(
            "must not be a tx-worker's code (tx1, tx2, ...): those are the workers'",
        ));
    }
    Ok(())
}

/// The host prefix: letters and digits, leaving the codes it makes 16 characters at most
/// (`<prefix>tx<n>` with up to 3 digits, and `<prefix><instanceCode>`).
pub fn check_host_prefix(prefix: &str, instance_code: &str) -> Result<(), SettingsError> {
    let err = |expected: String| {
        SettingsError::invalid(cluster::host_prefix, quote(prefix), None, expected)
    };
    if !prefix.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(err("must be ASCII letters and digits".to_string()));
    }
    let longest = prefix.len() + instance_code.len().max("tx999".len());
    if longest > 16 {
        return Err(err(format!(
            "is too long: instance codes must stay within 16 characters (with it, {longest})"
        )));
    }
    Ok(())
}

/// `tx<n>` exactly as the launcher names worker n (n ≥ 1, no leading zero).
fn is_worker_code(code: &str) -> bool {
    code.strip_prefix("tx").is_some_and(|n| {
        !n.is_empty() && !n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit())
    })
}

/// An endpoint path as the router matches it: a leading `/`, no trailing `/` (DEC-14).
/// `Err` says what is wrong with it.
pub fn normalise_endpoint(path: &str) -> Result<String, &'static str> {
    if !path.starts_with('/') {
        return Err("must start with /, e.g. \"/r4\"");
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return Err("must name a path below / (the tx module can't own every path)");
    }
    Ok(trimmed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_names(r: Result<(), SettingsError>, setting: &str, phrase: &str) {
        let e = r.expect_err("should be refused");
        let line = e.to_string();
        assert_eq!(e.setting(), setting, "{line}");
        assert!(line.starts_with(setting), "{line}");
        assert!(line.contains(phrase), "{line}");
        assert!(!line.contains('\n'), "{line}");
    }

    #[test]
    fn the_defaults_are_valid() {
        assert_eq!(validate(&Settings::default()), Ok(()));
    }

    #[test]
    fn normal_min_slots_above_max_outstanding_is_refused_unless_there_is_no_limit() {
        // spec: CONF-22, DEC-7
        let mut s = Settings::default();
        s.cluster.normal_min_slots = 17;
        assert_names(
            validate(&s),
            "server.cluster.normalMinSlots",
            "at most server.cluster.maxOutstanding (16, the default)",
        );
        s.cluster.normal_min_slots = 16;
        assert_eq!(validate(&s), Ok(()));
        // spec: CONF-12: maxOutstanding 0 is no limit
        s.cluster.max_outstanding = 0;
        s.cluster.normal_min_slots = 100;
        assert_eq!(validate(&s), Ok(()));
    }

    #[test]
    fn reject_fraction_must_be_below_abort_fraction() {
        let mut s = Settings::default();
        s.memory.reject_fraction = 0.92;
        assert_names(
            validate(&s),
            "server.memory.rejectFraction",
            "below server.memory.abortFraction (0.92, the default)",
        );
    }

    #[test]
    fn an_unknown_worker_rule_lists_the_known_ones() {
        // spec: DEC-23
        let mut s = Settings::default();
        s.cluster.worker_rule = "turbo".into();
        assert_names(
            validate(&s),
            "server.cluster.workerRule",
            "known rules: classic",
        );
        assert_names(
            check_rule("x", &["classic", "bun"]),
            "server.cluster.workerRule",
            "classic, bun",
        );
    }

    #[test]
    fn instance_codes_are_1_to_16_letters_and_digits_and_not_a_workers() {
        // spec: DEC-20
        for ok in [
            "m0",
            "A",
            "abcdefghij123456",
            "tx",
            "tx0",
            "tx01",
            "TX1",
            "txa",
        ] {
            assert_eq!(check_instance_code(ok), Ok(()), "{ok}");
        }
        for bad in ["", "abcdefghij1234567", "m-0", "m 0", "é1"] {
            assert_names(
                check_instance_code(bad),
                "modules.tx.instanceCode",
                "1-16 ASCII letters and digits",
            );
        }
        for worker in ["tx1", "tx2", "tx10"] {
            assert_names(
                check_instance_code(worker),
                "modules.tx.instanceCode",
                "tx-worker's code",
            );
        }
    }

    #[test]
    fn workers_need_the_tx_module_with_endpoints() {
        let mut s = Settings::default();
        s.tx.enabled = false;
        assert_names(validate(&s), "modules.tx.enabled", "server.cluster.workers");
        s.cluster.workers = Some(0);
        assert_eq!(validate(&s), Ok(()));
        let mut s = Settings::default();
        s.sources.set(
            "modules.tx.endpoints",
            Source::File("/d/config.json".into()),
        );
        s.cluster.workers = Some(2);
        assert_names(validate(&s), "modules.tx.endpoints", "at least one");
        // Not set at all: nothing is a tx path (FHIRsmith has no default), a warning, not an
        // error, unless the file switches FHIRsmith's tx module on.
        let mut s = Settings::default();
        s.cluster.workers = Some(2);
        assert_eq!(validate(&s), Ok(()));
        assert!(unset_endpoints_warning(&s).is_some_and(|w| w.contains("no path is a tx path")));
        s.sources
            .set("modules.tx.enabled", Source::File("/d/config.json".into()));
        assert_names(
            validate(&s),
            "modules.tx.endpoints",
            "modules.tx.enabled in /d/config.json is true",
        );
        s.cluster.workers = Some(0);
        assert_names(validate(&s), "modules.tx.endpoints", "stops at start");
    }

    #[test]
    fn an_empty_command_is_refused() {
        let mut s = Settings::default();
        s.command.clear();
        assert_names(
            validate(&s),
            "server.cluster.command",
            "must name a program",
        );
        s.command = vec![String::new(), "x".into()];
        assert_names(
            validate(&s),
            "server.cluster.command",
            "must name a program",
        );
    }

    #[test]
    fn a_port_range_that_includes_the_port_is_refused() {
        // spec: CONF-10, DEC-21
        let mut s = Settings {
            port: 3004,
            ..Settings::default()
        };
        assert_eq!(check_port_range(&s, 2), Ok(()));
        assert_names(
            check_port_range(&s, 3),
            "server.cluster.internalPort",
            "3001-3004",
        );
        s.port = 3001;
        assert_names(
            check_port_range(&s, 0),
            "server.cluster.internalPort",
            "include server.port 3001",
        );
        s.port = 3000;
        s.cluster.internal_port = 2990;
        assert_names(
            check_port_range(&s, 10),
            "server.cluster.internalPort",
            "include server.port 3000",
        );
        assert_eq!(check_port_range(&s, 9), Ok(()));
        s.cluster.internal_port = 65530;
        assert_eq!(check_port_range(&s, 5), Ok(()));
        assert_names(
            check_port_range(&s, 6),
            "server.cluster.internalPort",
            "65535 at most",
        );
        assert_eq!(
            check_port_range(&s, u32::MAX).map_err(|e| e.setting().to_string()),
            Err("server.cluster.internalPort".to_string())
        );
    }

    #[test]
    fn validate_checks_the_port_range_with_the_given_workers() {
        let mut s = Settings {
            port: 3003,
            ..Settings::default()
        };
        s.cluster.workers = Some(2);
        assert_names(validate(&s), "server.cluster.internalPort", "3001-3003");
        s.cluster.workers = None;
        assert_eq!(validate(&s), Ok(()));
    }

    #[test]
    fn endpoints_are_normalised_and_must_start_with_a_slash() {
        assert_eq!(normalise_endpoint("/r4"), Ok("/r4".into()));
        assert_eq!(normalise_endpoint("/tx/r5/"), Ok("/tx/r5".into()));
        assert!(normalise_endpoint("r4").is_err());
        assert!(normalise_endpoint("/").is_err());
        assert!(normalise_endpoint("").is_err());
    }
}
