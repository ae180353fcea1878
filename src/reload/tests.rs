//! The reload's comparison and what it takes, over every row of the settings table.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use super::*;
use crate::settings::setting::Setting;
use crate::settings::Source;

#[test]
fn live_settings_are_applied_and_the_rest_wait_for_the_restart_they_need() {
    // spec: DEC-44
    let old = Settings::default();
    let mut new = old.clone();
    new.cluster.max_outstanding = 4;
    new.cluster.queue = Duration::from_millis(500);
    new.cluster.workers = Some(3);
    new.port = 8080;
    new.cluster.internal_port = 9000;
    new.memory.reject_fraction = 0.8;
    new.command = vec!["bun".into(), "server.js".into()];
    new.cluster.access_log =
        crate::settings::AccessLogFormat(Some(crate::settings::LogFormat::Json));
    let c = changes(&old, &new);
    assert_eq!(
        c.live,
        vec![
            "server.cluster.workers (from the CPUs and memory) → 3",
            "server.cluster.maxOutstanding 16 → 4",
            "server.cluster.queueSeconds 1 → 0.5",
            "server.cluster.accessLog \"off\" → \"json\"",
        ]
    );
    assert!(c.workers);
    assert_eq!(c.upgrade, vec!["server.port 3000 → 8080"]);
    assert_eq!(c.restart, vec!["server.cluster.internalPort 3001 → 9000"]);
    assert_eq!(
        c.servers,
        vec![
            "server.cluster.command [\"node\",\"server.js\"] → [\"bun\",\"server.js\"]",
            "server.memory.rejectFraction 0.85 → 0.8"
        ]
    );
    assert_eq!(
        c.summary(),
        "8 settings changed: 4 applied, 1 taken by the in-place upgrade, 2 taken by the \
         processes as they restart in turn, 1 waiting for a restart of the launcher"
    );

    let running = apply_live(&old, &new);
    assert_eq!(running.cluster.max_outstanding, 4);
    assert_eq!(
        running.command, new.command,
        "the processes start with it from now on"
    );
    assert_eq!(
        running.port, 3000,
        "the port stays until the upgrade takes it"
    );
    assert_eq!(running.cluster.internal_port, 3001, "kept as it was");
    let again = changes(&running, &new);
    assert!(
        again.live.is_empty() && again.servers.is_empty(),
        "{again:?}"
    );
    assert_eq!(again.upgrade, vec!["server.port 3000 → 8080"]);
    assert_eq!(
        again.restart,
        vec!["server.cluster.internalPort 3001 → 9000"]
    );
}

#[test]
fn what_the_processes_read_of_config_json_is_all_but_server_cluster() {
    // spec: DEC-44: fhircluster's own settings change no process's inputs; anything else in
    // the file (FHIRsmith reads all of it) does, and the reload takes the new digest.
    use crate::settings::servers_config;
    let base =
        json!({"server": {"port": 3000, "cluster": {"queueSeconds": 1}}, "modules": {"x": 1}});
    let ours = json!({"server": {"port": 3000, "cluster": {"queueSeconds": 2, "accessLog": "json"}}, "modules": {"x": 1}});
    let theirs =
        json!({"server": {"port": 3000, "cluster": {"queueSeconds": 1}}, "modules": {"x": 2}});
    assert_eq!(servers_config(&base), servers_config(&ours));
    assert_ne!(servers_config(&base), servers_config(&theirs));
    // The spec's processes read the shared cache's and closure's options themselves.
    for (key, value) in [
        ("sharedCache", json!(true)),
        ("sharedCacheMaxMB", json!(512)),
        ("sharedClosure", json!(true)),
    ] {
        let shared = with(base.clone(), &format!("server.cluster.{key}"), value);
        assert_ne!(servers_config(&base), servers_config(&shared), "{key}");
    }
    let old = read(&base);
    let new = read(&theirs);
    assert_ne!(old.servers_config, 0);
    assert_eq!(apply_live(&old, &new).servers_config, new.servers_config);
}

#[test]
fn the_settings_taken_keep_the_layer_that_gave_them() {
    // A message after the reload names the layer of the value in force.
    let old = Settings::default();
    let mut new = old.clone();
    new.cluster.queue = Duration::from_secs(2);
    let file = Source::File("/d/config.json".into());
    new.sources.set("server.cluster.queueSeconds", file.clone());
    new.port = 8080;
    new.sources.set("server.port", Source::Env("PORT"));
    let running = apply_live(&old, &new);
    assert_eq!(running.sources.of("server.cluster.queueSeconds"), file);
    assert_eq!(running.sources.of("server.port"), Source::Default);
}

#[test]
fn nothing_changed_is_nothing_to_say() {
    let s = Settings::default();
    assert_eq!(changes(&s, &s), Changes::default());
    assert!(changes(&s, &s).is_empty());
}

#[test]
fn what_sizes_the_count_resizes_only_without_a_given_count() {
    let mut old = Settings::default();
    old.cluster.workers = Some(2);
    let mut new = old.clone();
    new.cluster.cores = Some(8);
    let c = changes(&old, &new);
    assert_eq!(c.live, vec!["server.cluster.cores (detected) → 8"]);
    assert!(!c.workers, "the given count stays");
    new.cluster.workers = None;
    let c = changes(&old, &new);
    assert!(c.workers);
    assert_eq!(
        c.live,
        vec![
            "server.cluster.workers 2 → (from the CPUs and memory)",
            "server.cluster.cores (detected) → 8"
        ]
    );
}

/// A value other than the default for every setting (as config.json would hold it), and what
/// else config.json needs for it to be valid. `workerRule` has no other valid value yet.
fn example(path: &str) -> Option<(Value, Value)> {
    let alone = json!({"server": {"cluster": {"workers": 0}}});
    let value = match path {
        "server.port" => json!(4000),
        "server.cluster.command" => json!(["bun", "server.js"]),
        "server.cluster.workers" => json!(3),
        "server.cluster.cores" => json!(8),
        "server.cluster.workerRule" => return None,
        "server.cluster.memoryHeadroomGB" => json!(3),
        "server.cluster.masterServesTx" => json!(false),
        "server.cluster.internalPort" => json!(5000),
        "server.cluster.bindAddress" => json!("0.0.0.0"),
        "server.cluster.drainSeconds" => json!(10),
        "server.cluster.maxOutstanding" => json!(8),
        "server.cluster.queueSeconds" => json!(2),
        "server.cluster.ownerQueueSeconds" => json!(10),
        "server.cluster.cooldownSeconds" => json!(5),
        "server.cluster.upstreamTimeoutSeconds" => json!(30),
        "server.cluster.hangTimeoutSeconds" => json!(20),
        "server.cluster.writeTimeoutSeconds" => json!(20),
        "server.cluster.headerTimeoutSeconds" => json!(2),
        "server.cluster.headerMaxKB" => json!(64),
        "server.cluster.bufferMaxMB" => json!(128),
        "server.cluster.proxyThreads" => json!(2),
        "server.cluster.maxStartFailures" => json!(3),
        "server.cluster.recycleSeconds" => json!(40),
        "server.cluster.fastLaneExtra" => json!(2),
        "server.cluster.normalMinSlots" => json!(2),
        "server.cluster.saturatedPercent" => json!(75),
        "server.cluster.predictiveAdmission" => json!(true),
        "server.cluster.fastLaneMaxBytes" => json!(2048),
        "server.cluster.statusSeconds" => json!(5),
        "server.cluster.sharedCache" => json!(true),
        "server.cluster.cacheAffinity" => json!(true),
        "server.cluster.sharedCacheMaxMB" => json!(512),
        "server.cluster.sharedClosure" => json!(true),
        "server.cluster.killSeconds" => json!(5),
        "server.cluster.adminAddress" => json!(9100),
        "server.cluster.agentAddress" => json!(9101),
        "server.cluster.lameDuckSeconds" => json!(5),
        "server.cluster.listenAddress" => json!("127.0.0.1"),
        "server.cluster.logFormat" => json!("json"),
        "server.cluster.logLevel" => json!("debug"),
        "server.cluster.hostPrefix" => json!("h"),
        "server.cluster.servedByHeader" => json!("X-Served-By"),
        "server.cluster.accessLog" => json!("json"),
        "server.cluster.accessLogPath" => json!("access.log"),
        "server.cluster.accessLogQuery" => json!(true),
        "server.cluster.trustedProxies" => json!(["127.0.0.1"]),
        "server.cluster.pidFile" => json!("fhircluster.pid"),
        "server.cluster.nodeReport" => json!(true),
        "server.cluster.controlSocket" => json!("ctl.sock"),
        "server.cluster.controlGroup" => json!("0"),
        "server.memory.rejectFraction" => json!(0.8),
        "server.memory.abortFraction" => json!(0.95),
        "server.memory.trimAllocator" => json!(false),
        // FHIRsmith's tx module off: only the master may run.
        "modules.tx.enabled" => return Some((json!(false), alone)),
        "modules.tx.instanceCode" => json!("main"),
        "modules.tx.endpoints" => json!([{"path": "/r5"}]),
        "stats.sampleSeconds" => json!(7),
        "stats.intervalMinutes" => json!(0.5),
        _ => panic!("{path}: give this test an example value other than its default"),
    };
    Some((value, json!({})))
}

/// The settings from a config.json, as a reload reads them.
fn read(config: &Value) -> Settings {
    let cli = crate::cli::Cli::default();
    let path = Path::new("/d/config.json");
    match crate::settings::from_sources(&cli, &|_| None, Some((path, config))) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

/// Puts `value` at the dotted `path`.
fn with(mut config: Value, path: &str, value: Value) -> Value {
    let (parents, last) = path.rsplit_once('.').unwrap_or(("", path));
    let mut at = &mut config;
    for part in parents.split('.').filter(|p| !p.is_empty()) {
        if !at.get(part).is_some_and(Value::is_object) {
            at[part] = json!({});
        }
        at = &mut at[part];
    }
    at[last] = value;
    config
}

/// The lines of `changes` about `setting`, in each list.
fn lines_about(c: &Changes, setting: &Setting) -> [usize; 4] {
    let about = |list: &Vec<Change>| list.iter().filter(|c| c.path() == setting.path).count();
    [
        about(&c.live),
        about(&c.servers),
        about(&c.upgrade),
        about(&c.restart),
    ]
}

#[test]
fn every_setting_changed_by_a_reload_is_applied_or_waits_for_the_restart_it_needs() {
    // Issue 17: headerTimeoutSeconds and proxyThreads were in no list ("no setting changed").
    for setting in TABLE {
        let Some((value, base)) = example(setting.path) else {
            // No other value is valid: the day one is, this asks for an example.
            let bad = with(json!({}), setting.path, json!("another"));
            let cli = crate::cli::Cli::default();
            let path = Path::new("/d/config.json");
            assert!(
                crate::settings::from_sources(&cli, &|_| None, Some((path, &bad))).is_err(),
                "{}: give this test an example value",
                setting.path
            );
            continue;
        };
        let old = read(&base);
        let new = read(&with(base, setting.path, value));
        let path = setting.path;
        assert_ne!(
            setting.shown(&old),
            setting.shown(&new),
            "{path}: the example is the default"
        );

        let c = changes(&old, &new);
        let expected = match setting.reload {
            Reload::Live => [1, 0, 0, 0],
            Reload::Servers => [0, 1, 0, 0],
            Reload::Upgrade => [0, 0, 1, 0],
            Reload::Restart => [0, 0, 0, 1],
        };
        assert_eq!(lines_about(&c, setting), expected, "{path}: {c:?}");

        let running = apply_live(&old, &new);
        if setting.reload == Reload::Live {
            // Applied: some part of the running launcher takes the new value (the reloader
            // gives each part its share of `Live`).
            assert_ne!(
                Live::from(&old),
                Live::from(&running),
                "{path} is live but no part takes it"
            );
        }
        if setting.reload == Reload::Servers {
            // Taken: the processes' specs are made from it (their inputs change), or the
            // launcher's own use of it follows.
            let plan = |s: &Settings| {
                crate::plan::replan(s, 1, String::new()).map(|p| p.processes[0].inputs())
            };
            let inputs_changed = plan(&old).ok() != plan(&running).ok();
            assert!(
                inputs_changed || Live::from(&old) != Live::from(&running),
                "{path} is the processes' but neither their inputs nor the launcher take it"
            );
        }
        // Once taken it is no more a change; one that waits for the upgrade or the launcher's
        // restart is reported again on the next reload.
        let again = lines_about(&changes(&running, &new), setting);
        let left = match setting.reload {
            Reload::Upgrade => [0, 0, 1, 0],
            Reload::Restart => [0, 0, 0, 1],
            Reload::Live | Reload::Servers => [0, 0, 0, 0],
        };
        assert_eq!(again, left, "{path} after the reload");
    }
}
