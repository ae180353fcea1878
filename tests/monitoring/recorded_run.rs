//! The alert rules on series recorded from real runs, in a memory cgroup with a limit of its own
//! and in one without (`tests/common/cgroup.rs`), so the memory rule is proved both ways: a surge
//! of refusals, the master killed and slow to be ready, memory over the refusal threshold, a
//! refused reload, then the launcher stopped (its scrapes failing: `up` 0). Which alerts fire at
//! each checked minute is worked out from the recorded values, and promtool must agree;
//! FhirclusterDown is silent while the launcher answers and fires once it has been down for
//! its `for:`, and on the same run with no `up` at all (`absent`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use super::recording::*;
use super::{annotations, monitoring, promtool, RULES};
use crate::common::*;

/// The memory limit of the cgroup the run gets, in MiB, when it has one.
const LIMIT_MB: u64 = 1000;

#[test]
fn the_alert_rules_fire_on_series_recorded_from_a_real_run_without_a_cgroup_limit() {
    // The processes measured against the limit their guards report (1 MiB), as without
    // MemoryMax: the rule's per-process branch.
    alert_rules_on_a_recorded_run(None);
}

#[test]
fn the_alert_rules_fire_on_series_recorded_from_a_real_run_with_a_cgroup_limit() {
    // The cgroup measured against its own limit: the rule's cgroup branch.
    alert_rules_on_a_recorded_run(Some(LIMIT_MB));
}

/// A real run in a memory cgroup of the test's own, with `limit_mb` or no limit: a surge of
/// refusals, the master killed and slow to be ready, memory over the refusal threshold, a
/// refused reload, then the launcher stopped; every scrape recorded, and promtool asked which
/// alerts fire at the checked minutes.
fn alert_rules_on_a_recorded_run(limit_mb: Option<u64>) {
    let name = if limit_mb.is_some() {
        "alerts-limited"
    } else {
        "alerts-unlimited"
    };
    let group = MemCgroup::for_test(name, limit_mb.map(|mb| mb * 1024 * 1024));
    let admin = free_port();
    let instance = format!("127.0.0.1:{admin}");
    let mut builder = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": {
            "queueSeconds": 0, "maxOutstanding": 1, "fastLaneExtra": 0, "normalMinSlots": 0,
            "recycleSeconds": 0
        } } }))
        // The master slow to be ready, so its restart leaves it not ready for several scrapes.
        .env("SIM_READY_DELAY_MS_m0", "3000")
        .arg("--admin-address")
        .arg(&admin.to_string());
    if limit_mb.is_none() {
        // A guard limit the processes are over from the start.
        builder = builder.env("SIM_MEMORY_LIMIT_MB", "1");
    }
    let mut c = builder.start_wrapped(&group.wrapper());
    let addr = c.addr();

    // The recorder: one scrape a second.
    let scrapes: Arc<Mutex<Vec<Scrape>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let stopping = Arc::new(AtomicBool::new(false));
    let recorder = {
        let (scrapes, done, stopping) = (scrapes.clone(), done.clone(), stopping.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                let m = try_scrape(admin, stopping.load(Ordering::Relaxed));
                scrapes.lock().expect("scrapes").push(m);
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };
    let count = || scrapes.lock().map(|s| s.len()).unwrap_or(0);
    let refusals = |m: &Scrape| {
        m.as_ref()
            .map_or(0.0, |m| m.sum("fhircluster_refusals_total", &[]))
    };
    let ready_m0 = |m: &Scrape| {
        m.as_ref()
            .and_then(|m| m.get("fhircluster_process_ready", &[("process", "m0")]))
    };
    let wait_scrapes = |n: usize| {
        let target = count() + n;
        wait_until("scrapes", secs(30), || count() >= target);
    };
    wait_scrapes(3);
    assert!(
        scrapes.lock().expect("scrapes").iter().all(Option::is_some),
        "the running launcher's scrapes all answered"
    );

    // A surge: two clients hold both slots (1 s each, again and again), six more are refused,
    // until three scrapes in a row each saw over 120 more refusals (over 1/s on the rule
    // test's minute).
    let surging = Arc::new(AtomicBool::new(true));
    let clients: Vec<_> = (0..8)
        .map(|i| {
            let surging = surging.clone();
            std::thread::spawn(move || {
                let path = if i < 2 {
                    "/r4/CodeSystem/$lookup?_sim_stream=1"
                } else {
                    "/r4/CodeSystem/$lookup"
                };
                while surging.load(Ordering::Relaxed) {
                    request(addr, "GET", path, &[], b"");
                }
            })
        })
        .collect();
    wait_until(
        "three scrapes in a row with over 120 refusals each",
        secs(40),
        || {
            let s = scrapes.lock().expect("scrapes");
            s.len() >= 4
                && s[s.len() - 4..]
                    .windows(2)
                    .all(|w| refusals(&w[1]) - refusals(&w[0]) > 120.0)
        },
    );
    surging.store(false, Ordering::Relaxed);
    for t in clients {
        let _ = t.join();
    }
    wait_scrapes(3);

    // The master killed: not ready while it waits and starts again (3 s to be ready).
    unsafe_kill(c.pid_of("m0"), 9);
    wait_until("m0 ready again", secs(30), || {
        let s = scrapes.lock().expect("scrapes");
        let n = s.len();
        n >= 3
            && s[n - 3..].iter().any(|m| ready_m0(m) == Some(0.0))
            && ready_m0(&s[n - 1]) == Some(1.0)
    });
    // The master over the memory threshold: 2 MiB of a 1 MiB guard limit, or 87% of the
    // cgroup's (its threshold 85%, the abort at 92%).
    let mb = limit_mb.map_or(2, |l| l * 87 / 100);
    let r = c.request("POST", &format!("/sim/alloc?mb={mb}"), &[], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    wait_scrapes(2);

    // A refused reload.
    std::fs::write(c.data_dir().join("config.json"), "{ not json").expect("write");
    c.signal(1);
    let reload_failed_scraped = |s: &[Scrape]| {
        s.iter().all(|m| {
            m.as_ref()
                .is_some_and(|m| m.value("fhircluster_config_last_reload_successful", &[]) == 0.0)
        })
    };
    wait_until("the refused reload scraped", secs(30), || {
        let s = scrapes.lock().expect("scrapes");
        s.len() >= 2 && reload_failed_scraped(&s[s.len() - 2..])
    });
    let reload_end = count() - 1;

    // The launcher stopped: the target down for three scrapes in a row.
    stopping.store(true, Ordering::Relaxed);
    c.signal(15);
    let status = c.wait_exit(secs(60));
    assert_eq!(status.code(), Some(0), "the launcher stopped in order");
    wait_until("three scrapes of the stopped launcher", secs(30), || {
        let s = scrapes.lock().expect("scrapes");
        s.len() >= 3 && s[s.len() - 3..].iter().all(Option::is_none)
    });
    done.store(true, Ordering::Relaxed);
    let _ = recorder.join();
    let scrapes = std::mem::take(&mut *scrapes.lock().expect("scrapes"));
    let n = scrapes.len();

    let rec = series(
        &scrapes,
        &[
            "fhircluster_process_ready",
            "fhircluster_process_info",
            "fhircluster_refusals_total",
            "fhircluster_cgroup_memory_bytes",
            "fhircluster_memory_refuse_threshold_bytes",
            "fhircluster_process_memory_bytes",
            "fhircluster_config_last_reload_successful",
        ],
        &instance,
    );
    let target = |labels: &[(&str, &str)]| -> BTreeMap<String, String> {
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .chain([
                ("job".to_string(), JOB.to_string()),
                ("instance".to_string(), instance.clone()),
            ])
            .collect()
    };
    let get = |name: &str, labels: &[(&str, &str)]| -> Vec<Option<f64>> {
        rec.get(&(name.to_string(), target(labels)))
            .cloned()
            .unwrap_or_else(|| vec![None; n])
    };

    // What each alert's condition is at scrape t, from the recorded values.
    let processes: Vec<String> = rec
        .keys()
        .filter(|(name, _)| name == "fhircluster_process_ready")
        .map(|(_, l)| l["process"].clone())
        .collect();
    let masters: Vec<String> = rec
        .keys()
        .filter(|(name, l)| name == "fhircluster_process_info" && l["role"] == "master")
        .map(|(_, l)| l["process"].clone())
        .collect();
    let target_down = |t: usize| at(&get("up", &[]), t) == Some(0.0);
    let down = |p: &str, t: usize| {
        at(&get("fhircluster_process_ready", &[("process", p)]), t) == Some(0.0)
    };
    let total_refusals = |t: usize| -> Option<f64> {
        let v: Vec<f64> = rec
            .iter()
            .filter(|((name, _), _)| name == "fhircluster_refusals_total")
            .filter_map(|(_, v)| at(v, t))
            .collect();
        (!v.is_empty()).then(|| v.iter().sum())
    };
    let refusing = |t: usize| -> Option<bool> {
        // Over 120 more in the last step: over 1/s on any reading of rate[2m]; none: 0/s.
        // The launcher stopped: no series, no rate, nothing fires.
        if t < 2 {
            return Some(false);
        }
        let (Some(a), Some(b), Some(c)) = (
            total_refusals(t - 2),
            total_refusals(t - 1),
            total_refusals(t),
        ) else {
            return Some(false).filter(|_| total_refusals(t).is_none());
        };
        let (d0, d1) = (b - a, c - b);
        match (d0 > 120.0 && d1 > 120.0, d0 == 0.0 && d1 == 0.0) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        }
    };
    let threshold = get("fhircluster_memory_refuse_threshold_bytes", &[]);
    let over = |p: &str, t: usize| -> bool {
        let v = at(
            &get(
                "fhircluster_process_memory_bytes",
                &[("process", p), ("kind", "private")],
            ),
            t,
        );
        matches!((v, at(&threshold, t)), (Some(v), Some(th)) if v > th)
    };
    let cgroup_over = |t: usize| -> bool {
        let v = at(
            &get("fhircluster_cgroup_memory_bytes", &[("kind", "anon")]),
            t,
        );
        matches!((v, at(&threshold, t)), (Some(v), Some(th)) if v > th)
    };
    let reload_failed =
        |t: usize| at(&get("fhircluster_config_last_reload_successful", &[]), t) == Some(0.0);

    // The checked minutes: the start, the surge, the master down, the refused reload, the end
    // (the launcher stopped).
    let surge = (3..n)
        .find(|&t| refusing(t - 1) == Some(true) && refusing(t) == Some(true))
        .expect("the surge in the recorded refusals");
    assert_eq!(
        masters,
        ["m0"],
        "the master's role from fhircluster_process_info"
    );
    let master_down = (1..n)
        .find(|&t| down("m0", t - 1) && down("m0", t))
        .expect("m0 not ready in two scrapes in a row");
    let end = n - 1;
    assert!(reload_failed(reload_end) && !reload_failed(0));
    assert!(
        (0..=reload_end).all(|t| !target_down(t)) && target_down(end) && target_down(end - 1),
        "up: {:?}",
        get("up", &[])
    );
    // The branch of the memory rule this run is for has something to fire on.
    match limit_mb {
        Some(_) => assert!(
            cgroup_over(reload_end) && cgroup_over(reload_end - 1),
            "the cgroup is not over its threshold: the cgroup branch would be untested: \
             threshold {:?}, anon {:?}",
            at(&threshold, reload_end),
            at(
                &get("fhircluster_cgroup_memory_bytes", &[("kind", "anon")]),
                reload_end
            )
        ),
        None => {
            assert!(
                (0..n).all(|t| !cgroup_over(t)),
                "no cgroup limit: no cgroup series"
            );
            assert!(
                processes
                    .iter()
                    .any(|p| over(p, reload_end) && over(p, reload_end - 1)),
                "no process over the 1 MiB guard limit's threshold: the memory alert would be \
                 untested: threshold {:?}",
                at(&threshold, reload_end),
            );
        }
    }

    let notes = annotations(&std::fs::read_to_string(monitoring(RULES)).expect("rules"));
    let alert = |name: &str, labels: BTreeMap<String, String>| -> Value {
        let mut ann = notes.get(name).cloned().unwrap_or_default();
        if let Some(p) = labels.get("process") {
            for v in ann.values_mut() {
                *v = v.replace("{{ $labels.process }}", p);
            }
        }
        let mut l = labels;
        let critical = ["FhirclusterMasterNotReady", "FhirclusterDown"].contains(&name);
        l.insert(
            "severity".into(),
            if critical { "critical" } else { "warning" }.into(),
        );
        json!({"exp_labels": l, "exp_annotations": ann})
    };
    const ALERTS: [&str; 6] = [
        "FhirclusterDown",
        "FhirclusterProcessDown",
        "FhirclusterMasterNotReady",
        "FhirclusterRefusing",
        "FhirclusterMemoryAboveRefuseThreshold",
        "FhirclusterReloadFailed",
    ];
    let mut checks = Vec::new();
    let mut checked = BTreeSet::new();
    for t in [0, surge, master_down, reload_end, end] {
        let held = |cond: &dyn Fn(usize) -> bool| t >= 1 && cond(t - 1) && cond(t);
        let mut expected: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
        if held(&target_down) {
            expected
                .entry("FhirclusterDown")
                .or_default()
                .push(alert("FhirclusterDown", target(&[])));
        }
        for p in &processes {
            if held(&|u| down(p, u)) {
                expected
                    .entry("FhirclusterProcessDown")
                    .or_default()
                    .push(alert("FhirclusterProcessDown", target(&[("process", p)])));
                if masters.contains(p) {
                    expected
                        .entry("FhirclusterMasterNotReady")
                        .or_default()
                        .push(alert(
                            "FhirclusterMasterNotReady",
                            target(&[("process", p)]),
                        ));
                }
            }
            if p != "launcher" && held(&|u| over(p, u)) {
                expected
                    .entry("FhirclusterMemoryAboveRefuseThreshold")
                    .or_default()
                    .push(alert(
                        "FhirclusterMemoryAboveRefuseThreshold",
                        target(&[("process", p), ("kind", "private")]),
                    ));
            }
        }
        if held(&cgroup_over) {
            expected
                .entry("FhirclusterMemoryAboveRefuseThreshold")
                .or_default()
                .push(alert("FhirclusterMemoryAboveRefuseThreshold", target(&[])));
        }
        let refusals_known = t < 1 || (refusing(t - 1).is_some() && refusing(t).is_some());
        if t >= 1 && refusing(t - 1) == Some(true) && refusing(t) == Some(true) {
            expected
                .entry("FhirclusterRefusing")
                .or_default()
                .push(alert("FhirclusterRefusing", target(&[])));
        }
        if reload_failed(t) {
            expected
                .entry("FhirclusterReloadFailed")
                .or_default()
                .push(alert("FhirclusterReloadFailed", target(&[])));
        }
        for name in ALERTS {
            if name == "FhirclusterRefusing" && !refusals_known {
                continue;
            }
            let exp = expected.remove(name).unwrap_or_default();
            if !exp.is_empty() {
                checked.insert(name);
            }
            checks
                .push(json!({"eval_time": format!("{t}m"), "alertname": name, "exp_alerts": exp}));
        }
    }
    assert_eq!(
        checked.len(),
        ALERTS.len(),
        "every alert fires at some checked minute: {checked:?}"
    );

    let input = |skip_up: bool| -> Vec<Value> {
        rec.iter()
            .filter(|((name, _), _)| !(skip_up && name == "up"))
            .map(|(k, v)| json!({"series": selector(k), "values": promtool_values(v)}))
            .collect()
    };
    // The same run with no target for the job at all (taken out of the scrape config, or its
    // service discovery finding none): `absent(up)` fires, with the job's label.
    let absent = json!({"eval_time": "2m", "alertname": "FhirclusterDown", "exp_alerts": [
        alert("FhirclusterDown", BTreeMap::from([("job".to_string(), JOB.to_string())]))
    ]});
    let test = json!({
        "rule_files": [monitoring(RULES).to_string_lossy()],
        "evaluation_interval": "1m",
        "tests": [
            {"interval": "1m", "input_series": input(false), "alert_rule_test": checks},
            {"interval": "1m", "input_series": input(true), "alert_rule_test": [absent]},
        ],
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("recorded-run.test.yml");
    // JSON is YAML: promtool reads it as written.
    std::fs::write(&file, serde_json::to_string_pretty(&test).expect("json")).expect("write");
    let (ok, text) = promtool(&["test", "rules", &file.to_string_lossy()]);
    assert!(
        ok,
        "promtool test rules on the recorded run:\n{text}\n{}",
        serde_json::to_string_pretty(&test).unwrap_or_default()
    );
    drop(group);
}
