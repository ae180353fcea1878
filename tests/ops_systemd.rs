//! The systemd unit `fhircluster print systemd-unit` prints (README's "Under systemd" installs it)
//! and README's Docker advice, checked: the unit has the keys the launcher needs
//! (`Type=notify`, `ExecReload=` sending `SIGHUP` so `systemctl reload` works, `KillMode=mixed`,
//! `MemoryMax=` only when asked for, a `TimeoutStopSec` at least the longest orderly stop,
//! computed from the settings' defaults), `systemd-analyze verify` finds nothing wrong with it,
//! `systemd-analyze security` rates it 3.0 or less (a hardened service), and the Compose
//! file gives Docker as long, a working directory, and a health check on the admin address.

use crate::common;

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use common::*;

/// A systemd time span (`2min`, `90`, `1min 30s`, `500ms`) in seconds.
fn timespan(s: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut rest = s.trim();
    if let Ok(n) = rest.parse::<f64>() {
        return Some(n);
    }
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let n: f64 = rest[..num_end].parse().ok()?;
        let after = rest[num_end..].trim_start();
        let unit_end = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let scale = match &after[..unit_end] {
            "us" | "usec" => 1e-6,
            "ms" | "msec" => 1e-3,
            "" | "s" | "sec" | "second" | "seconds" => 1.0,
            "m" | "min" | "minute" | "minutes" => 60.0,
            "h" | "hr" | "hour" | "hours" => 3600.0,
            _ => return None,
        };
        total += n * scale;
        rest = after[unit_end..].trim_start();
    }
    Some(total)
}

/// The `[Service]` section's keys (the last value of each).
fn service_keys(unit: &str) -> HashMap<String, String> {
    let mut section = "";
    let mut keys = HashMap::new();
    for line in unit.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if section == "[Service]" && !line.starts_with('#') {
            if let Some((k, v)) = line.split_once('=') {
                keys.insert(k.trim().to_string(), v.trim().to_string());
            }
        }
    }
    keys
}

/// The longest orderly stop (STOP-10): the drain, the workers' SIGTERM to SIGKILL, their last
/// counts (up to 5 s, STOP-7), the master's SIGTERM to SIGKILL.
fn longest_stop(drain: Duration, kill: Duration) -> Duration {
    drain + kill + fhircluster::supervisor::lifecycle::COUNTS_WAIT + kill
}

/// The longest orderly stop with the default settings, in seconds.
fn longest_stop_secs() -> f64 {
    let c = fhircluster::settings::Settings::default().cluster;
    longest_stop(c.drain, c.kill_after).as_secs_f64()
}

/// The printed unit's `TimeoutStopSec`, in seconds.
fn readme_timeout_stop_sec() -> f64 {
    timeout_stop_sec(&unit(&[]))
}

fn timeout_stop_sec(unit: &str) -> f64 {
    let keys = service_keys(unit);
    keys.get("TimeoutStopSec")
        .and_then(|v| timespan(v))
        .unwrap_or_else(|| panic!("no readable TimeoutStopSec: {keys:?}"))
}

/// `fhircluster [args] print systemd-unit`'s output (exit 0).
fn unit(args: &[&str]) -> String {
    let out = run_bounded(
        Command::new(LAUNCHER)
            .args(args)
            .args(["print", "systemd-unit"])
            .env_remove("FHIRSMITH_DATA_DIR"),
        Duration::from_secs(20),
    );
    assert_eq!(out.code, Some(0), "print systemd-unit: {}", out.all());
    out.stdout
}

#[test]
fn the_timespan_parser_reads_systemd_spans() {
    assert_eq!(timespan("2min"), Some(120.0));
    assert_eq!(timespan("90"), Some(90.0));
    assert_eq!(timespan("1min 30s"), Some(90.0));
    assert_eq!(timespan("500ms"), Some(0.5));
    assert_eq!(timespan("soon"), None);
}

#[test]
fn the_printed_unit_is_notify_mixed_and_waits_out_the_longest_stop() {
    // spec: STOP-10
    assert_eq!(longest_stop_secs(), 95.0, "the spec's 95 s");
    let keys = service_keys(&unit(&[]));
    assert_eq!(
        keys.get("Type").map(String::as_str),
        Some("notify"),
        "{keys:?}"
    );
    assert_eq!(
        keys.get("KillMode").map(String::as_str),
        Some("mixed"),
        "{keys:?}"
    );
    // No memory limit unless the operator names one (--memory-max): the launcher sizes the
    // workers against it, so a number printed here would size every host alike.
    assert!(!keys.contains_key("MemoryMax"), "{keys:?}");
    // Without it `systemctl reload` fails: "Job type reload is not applicable".
    assert_eq!(
        keys.get("ExecReload").map(String::as_str),
        Some("/bin/kill -HUP $MAINPID"),
        "{keys:?}"
    );
    assert!(
        keys.get("ExecStart")
            .is_some_and(|v| v.contains("fhircluster")),
        "{keys:?}"
    );
    let stop = readme_timeout_stop_sec();
    assert!(
        stop >= longest_stop_secs(),
        "TimeoutStopSec {stop} s < the longest stop {} s",
        longest_stop_secs()
    );
    // The watchdog, if any, leaves the launcher time to ping (every half of it).
    if let Some(w) = keys.get("WatchdogSec").and_then(|v| timespan(v)) {
        assert!(w >= 2.0, "WatchdogSec {w}");
    }
    // Deploy's layout when no data directory is given; ExecStart= is the binary that printed it.
    assert_eq!(keys["Environment"], "FHIRSMITH_DATA_DIR=/var/lib/fhirsmith");
    assert_eq!(keys["User"], "fhirsmith");
    assert_eq!(keys["ExecStart"], LAUNCHER);
}

#[test]
fn the_printed_unit_takes_the_data_directory_user_and_stop_time_from_the_settings() {
    // spec: STOP-10
    let dir = tempfile::tempdir().expect("data dir");
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"server": {"cluster": {"drainSeconds": 100, "killSeconds": 40}}}"#,
    )
    .expect("config.json");
    let d = dir.path().to_string_lossy().to_string();
    let text = unit(&["--data-dir", &d]);
    let keys = service_keys(&text);
    assert_eq!(keys["Environment"], format!("FHIRSMITH_DATA_DIR={d}"));
    let longest = longest_stop(Duration::from_secs(100), Duration::from_secs(40));
    let stop = timeout_stop_sec(&text);
    assert!(
        stop >= longest.as_secs_f64() + 20.0,
        "{stop} s for a {longest:?} stop:\n{text}"
    );
    let out = run_bounded(
        Command::new(LAUNCHER).args([
            "print",
            "systemd-unit",
            "--user",
            "fhir",
            "--working-directory",
            "/srv/fhir",
        ]),
        Duration::from_secs(20),
    );
    let keys = service_keys(&out.stdout);
    assert_eq!(
        (keys["User"].as_str(), keys["WorkingDirectory"].as_str()),
        ("fhir", "/srv/fhir")
    );
    // A bad config.json: exit 1 and the setting named, not a unit with the defaults.
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"server": {"cluster": {"drainSeconds": "five"}}}"#,
    )
    .expect("config.json");
    let out = run_bounded(
        Command::new(LAUNCHER).args(["print", "systemd-unit", "--data-dir", &d]),
        Duration::from_secs(20),
    );
    assert_eq!(out.code, Some(1), "{}", out.all());
    assert!(
        out.stdout.is_empty() && out.stderr.contains("drainSeconds"),
        "{}",
        out.all()
    );
}

#[test]
fn systemd_analyze_verify_finds_nothing_wrong_with_the_printed_unit() {
    assert_systemd_analyze();
    let dir = tempfile::tempdir().expect("unit dir");
    // ExecStart names the binary that printed it, which exists, as verify wants.
    let unit = unit(&[]);
    let path = dir.path().join("fhircluster.service");
    std::fs::write(&path, &unit).expect("write the unit");
    let out = run_bounded(
        Command::new("systemd-analyze")
            .arg("verify")
            .arg(&path)
            .env("SYSTEMD_LOG_LEVEL", "warning"),
        Duration::from_secs(60),
    );
    assert_eq!(out.code, Some(0), "{}", out.all());
    let complaints: Vec<&str> = out
        .stderr
        .lines()
        .chain(out.stdout.lines())
        .filter(|l| l.contains("fhircluster.service"))
        .collect();
    assert!(complaints.is_empty(), "{}\n{unit}", out.all());
}

/// `systemd-analyze` on PATH, or the test fails saying how to get it.
fn assert_systemd_analyze() {
    let available = Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        available,
        "systemd-analyze is not installed: this test checks the printed unit with it \
         (apt-get install -y systemd)"
    );
}

#[test]
fn the_printed_unit_has_a_memory_limit_only_when_given_one_and_says_how_to_set_it() {
    let text = unit(&[]);
    assert!(!service_keys(&text).contains_key("MemoryMax"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with('#') && l.contains("--memory-max")),
        "the comment says how to set one:\n{text}"
    );
    let out = run_bounded(
        Command::new(LAUNCHER)
            .args(["print", "systemd-unit", "--memory-max", "12G"])
            .env_remove("FHIRSMITH_DATA_DIR"),
        Duration::from_secs(20),
    );
    assert_eq!(out.code, Some(0), "{}", out.all());
    assert_eq!(
        service_keys(&out.stdout)
            .get("MemoryMax")
            .map(String::as_str),
        Some("12G"),
        "{}",
        out.stdout
    );
    for bad in ["12 G", "lots", "12G\nUser=root", ""] {
        let out = run_bounded(
            Command::new(LAUNCHER)
                .args(["print", "systemd-unit", "--memory-max", bad])
                .env_remove("FHIRSMITH_DATA_DIR"),
            Duration::from_secs(20),
        );
        assert_eq!(out.code, Some(1), "{bad:?}: {}", out.all());
        assert!(out.stderr.contains("--memory-max"), "{}", out.all());
    }
}

/// "Overall exposure level for x.service: 9.2 UNSAFE": the number.
fn exposure(report: &str) -> Option<f64> {
    let line = report
        .lines()
        .find(|l| l.contains("Overall exposure level"))?;
    line.rsplit_once(": ")?
        .1
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[test]
fn systemd_analyze_security_rates_the_printed_unit_3_or_less() {
    assert_eq!(
        exposure("→ Overall exposure level for fhircluster.service: 9.2 UNSAFE 😨"),
        Some(9.2)
    );
    assert_systemd_analyze();
    let dir = tempfile::tempdir().expect("unit dir");
    let unit = unit(&[]);
    let path = dir.path().join("fhircluster.service");
    std::fs::write(&path, &unit).expect("write the unit");
    let out = run_bounded(
        Command::new("systemd-analyze")
            .args(["security", "--offline=true", "--no-pager"])
            .arg(&path),
        Duration::from_secs(60),
    );
    let score =
        exposure(&out.stdout).unwrap_or_else(|| panic!("no exposure level in:\n{}", out.all()));
    eprintln!("systemd-analyze security: {score}");
    assert!(score <= 3.0, "{score}:\n{}\n{unit}", out.stdout);
    // What the launcher and node need stays allowed (each line of the unit says why).
    let keys = service_keys(&unit);
    assert_eq!(
        keys.get("ReadWritePaths").map(String::as_str),
        Some("/var/lib/fhirsmith")
    );
    for absent in [
        "MemoryDenyWriteExecute",
        "ProcSubset",
        "ProtectProc",
        "PrivateNetwork",
    ] {
        assert!(!keys.contains_key(absent), "{absent} in:\n{unit}");
    }
    assert_eq!(keys.get("LimitNOFILE").map(String::as_str), Some("524288"));
}

#[test]
fn readme_compose_file_gives_docker_the_longest_stop_and_runs_the_launcher_directly() {
    let compose = fenced_block(
        &crate_file("README.md"),
        "README.md",
        "yaml",
        "compose.yaml",
    );
    let grace = compose
        .lines()
        .find_map(|l| l.trim().strip_prefix("stop_grace_period:"))
        .and_then(|v| timespan(&v.trim().replace('m', "min")))
        .unwrap_or_else(|| panic!("no readable stop_grace_period:\n{compose}"));
    assert!(grace >= longest_stop_secs(), "stop_grace_period {grace} s");
    assert!(
        compose.contains("command: [\"fhircluster\""),
        "exec form, no shell:\n{compose}"
    );
    assert!(compose.contains("init: true"), "{compose}");
    // The servers run in the working directory (where server.js is).
    assert!(
        compose
            .lines()
            .any(|l| l.trim().starts_with("working_dir: /")),
        "a working directory:\n{compose}"
    );
    // The health check asks the launcher, on the admin address the launcher is given.
    let admin_of = |line: &str| -> Option<String> {
        let i = line.find("\"--admin-address\", \"")? + "\"--admin-address\", \"".len();
        Some(line[i..].split('"').next()?.to_string())
    };
    let served = compose
        .lines()
        .find(|l| l.trim().starts_with("command: [\"fhircluster\""))
        .and_then(admin_of)
        .unwrap_or_else(|| panic!("the command sets no --admin-address:\n{compose}"));
    let checked = compose
        .lines()
        .find(|l| l.contains("\"fhircluster\", \"status\""))
        .and_then(admin_of)
        .unwrap_or_else(|| panic!("no health check with fhircluster status:\n{compose}"));
    assert_eq!(served, checked, "{compose}");
    assert!(compose.contains("healthcheck:"), "{compose}");
    let readme = crate_file("README.md");
    for flag in ["--stop-timeout ", "docker stop -t "] {
        let secs: f64 = readme
            .split(flag)
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("README gives no {flag:?}"));
        assert!(secs >= longest_stop_secs(), "{flag}{secs}");
    }
}

#[test]
fn a_real_stop_with_every_phase_at_its_longest_stays_within_the_arithmetic() {
    // spec: STOP-10, STOP-4, STOP-8
    // Every phase runs to its limit: a request that never answers holds the drain for all of
    // drainSeconds, and every process ignores SIGTERM, so the workers and then the master each
    // wait out killSeconds. The stop, timed, lies between the phases that must run out and the
    // arithmetic's sum; and README's TimeoutStopSec covers the sum for the defaults plus what a
    // real stop took beyond its phases.
    let (drain, kill) = (Duration::from_secs(1), Duration::from_secs(1));
    let mut c = cluster()
        .workers(2)
        .env("SIM_IGNORE_SIGTERM", "1")
        .config(serde_json::json!({ "server": { "cluster": {
            "drainSeconds": drain.as_secs(), "killSeconds": kill.as_secs()
        } } }))
        .start();
    let _hung = c.hung_request();
    let began = std::time::Instant::now();
    c.signal(15);
    let status = c.wait_exit(Duration::from_secs(60));
    let took = began.elapsed();
    assert_eq!(status.code(), Some(0), "{}", c.log_lines().join("\n"));
    c.wait_output_end(Duration::from_secs(5));
    for phase in [
        "cut short",
        "tx1: still running",
        "tx2: still running",
        "m0: still running",
    ] {
        assert!(
            c.line_index(phase).is_some(),
            "{phase:?} never ran out:\n{}",
            c.log_lines().join("\n")
        );
    }
    let floor = drain + kill + kill;
    let sum = longest_stop(drain, kill);
    eprintln!("a stop at its longest: {took:?} (phases {floor:?}, arithmetic {sum:?})");
    assert!(took >= floor, "{took:?} < the phases' {floor:?}");
    assert!(took <= sum, "{took:?} > the arithmetic's {sum:?}");
    let beyond = (took - floor).as_secs_f64();
    let stop = readme_timeout_stop_sec();
    assert!(
        stop >= longest_stop_secs() + beyond,
        "TimeoutStopSec {stop} s < {} s + {beyond:.1} s",
        longest_stop_secs()
    );
}
