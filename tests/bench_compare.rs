//! Smoke test of the comparison runner (`fhircluster-load compare`) without nginx, HAProxy or
//! wrk: one short round through fhircluster alone (a 2 s surge with light costs, sessions, a few
//! hundred idle and waiting clients), so the runner's own code keeps working in CI. Its table,
//! JSON and chart come out, and it leaves nothing running.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

const LOAD: &str = env!("CARGO_BIN_EXE_fhircluster-load");
const LAUNCHER: &str = env!("CARGO_BIN_EXE_fhircluster");
const SIM: &str = env!("CARGO_BIN_EXE_fhirsmith-sim");

#[test]
fn one_short_round_through_fhircluster_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let chart = dir.path().join("probe.svg");
    let out_dir = dir.path().join("out");
    let started = Instant::now();
    let out = Command::new(LOAD)
        .args([
            "compare",
            "--rounds",
            "1",
            "--doors",
            "fhircluster",
            "--wrk-seconds",
            "0",
            "--expand-ms",
            "20",
            "--capacity",
            "40",
            "--surge-seconds",
            "2",
            "--after-seconds",
            "1",
            "--sessions-requests",
            "5",
            "--idle-clients",
            "200",
            "--waiting",
            "100",
            "--skip-scheduler",
            "--fhircluster",
            LAUNCHER,
            "--sim",
            SIM,
        ])
        .arg("--chart")
        .arg(&chart)
        .arg("--out-dir")
        .arg(&out_dir)
        .output()
        .expect("run fhircluster-load compare");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "compare failed:\n{stdout}\n{stderr}");
    assert!(started.elapsed() < Duration::from_secs(90));

    // The table: fhircluster's surge figures are there, nginx's are not.
    let row = |prefix: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("| {prefix}")))
            .unwrap_or_else(|| panic!("no row {prefix:?} in:\n{stdout}"))
            .to_string()
    };
    let goodput: Vec<String> = row("3× surge: heavy goodput")
        .split('|')
        .map(|c| c.trim().to_string())
        .collect();
    let fc: f64 = goodput[2].replace(',', "").parse().unwrap_or(0.0);
    assert!(fc > 0.0, "{goodput:?}");
    assert_eq!(goodput[3], "–", "nginx did not run: {goodput:?}");
    assert!(
        row("sessions: cache-id-unknown").contains("| 0 |"),
        "{stdout}"
    );
    assert!(row("RSS idle (MB)").ends_with("| met |"), "{stdout}");

    // The JSON: one round, every waiting request still waiting when RSS was read.
    let results: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("results.json")).expect("results.json"))
            .expect("results.json parses");
    let round = &results["rounds"][0];
    assert_eq!(results["rounds"].as_array().map(Vec::len), Some(1));
    assert_eq!(round["waiting_answered"], 0, "{round}");
    assert!(round["rss_idle_clients_mb"].as_f64().unwrap_or(0.0) > 0.0);
    assert!(round["surge"][0]["series"]
        .as_array()
        .is_some_and(|s| !s.is_empty()));

    // The chart: one line, for fhircluster.
    let svg = std::fs::read_to_string(&chart).expect("chart written");
    assert!(svg.starts_with("<svg"));
    assert_eq!(svg.matches("<polyline").count(), 1);
    assert!(svg.contains(">fhircluster<"));

    // Nothing left running: no fhircluster with the runner's data directories.
    let leftovers: Vec<String> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains("fhircluster-compare-") && !c.contains(LOAD))
        .collect();
    assert!(leftovers.is_empty(), "still running: {leftovers:?}");
}
