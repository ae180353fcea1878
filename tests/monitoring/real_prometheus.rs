//! The shipped alert rules in a real Prometheus (package `prometheus`) scraping a real launcher,
//! which is then stopped: FhirclusterDown is neither pending nor firing while the launcher
//! answers, goes pending once the scrape fails, and fires after its `for: 1m`. Prometheus runs
//! here as a child with its own data directory and ports, and is stopped by its pid.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{monitoring, RULES};
use crate::common::*;

/// A Prometheus this test started; killed (its pid only) when dropped.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Scrapes `target` every second as job `fhircluster`, evaluating the rules every second.
    fn start(target: &str) -> Prometheus {
        let dir = tempfile::tempdir().expect("prometheus dir");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
                 rule_files: [{rules:?}]\n\
                 scrape_configs: [{{job_name: fhircluster, static_configs: [{{targets: [{target:?}]}}]}}]\n",
                rules = monitoring(RULES).to_string_lossy(),
            ),
        )
        .expect("prometheus.yml");
        let port = free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("prometheus (package prometheus) is needed: {e}"));
        let p = Prometheus {
            child,
            port,
            _dir: dir,
        };
        wait_until("prometheus ready", secs(30), || {
            accepting(port) && get_direct(port, "/-/ready").status == 200
        });
        p
    }

    fn api(&self, path: &str) -> Value {
        let r = get_direct(self.port, path);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        r.json()["data"].clone()
    }

    /// FhirclusterDown's state: None, "pending" or "firing".
    fn down_alert(&self) -> Option<String> {
        self.api("/api/v1/alerts")["alerts"]
            .as_array()?
            .iter()
            .find(|a| a["labels"]["alertname"] == "FhirclusterDown")
            .and_then(|a| a["state"].as_str().map(String::from))
    }

    /// When the rules were last evaluated (Prometheus's own timestamp), once they have been.
    fn last_evaluation(&self) -> Option<String> {
        let groups = self.api("/api/v1/rules")["groups"].clone();
        let at = groups[0]["lastEvaluation"].as_str()?;
        (!at.starts_with("0001")).then(|| at.to_string())
    }

    /// The `up` value of the one fhircluster target, when Prometheus has one.
    fn up(&self) -> Option<f64> {
        let data = self.api("/api/v1/query?query=up%7Bjob%3D%22fhircluster%22%7D");
        data["result"][0]["value"][1].as_str()?.parse().ok()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_real_prometheus_pages_once_the_launcher_has_been_down_for_a_minute_and_not_before() {
    let admin = free_port();
    let mut c = cluster()
        .workers(1)
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start();
    let prom = Prometheus::start(&format!("127.0.0.1:{admin}"));

    // Up, scraped and the rules evaluated several times over: nothing pending, nothing firing.
    wait_until("the launcher scraped up", secs(30), || {
        prom.up() == Some(1.0)
    });
    // A fresh Prometheus evaluates its rules before its first scrape (a few seconds): then
    // `absent(up)` holds and the alert is pending, which its `for:` keeps from paging. From the
    // first evaluation after a scrape on, it must be gone and stay gone.
    let scraped_by = prom.last_evaluation();
    wait_until("an evaluation after the first scrape", secs(30), || {
        assert_ne!(prom.down_alert().as_deref(), Some("firing"));
        prom.last_evaluation() != scraped_by && prom.last_evaluation().is_some()
    });
    let mut evaluations = std::collections::BTreeSet::new();
    wait_until("four evaluations of the rules", secs(30), || {
        assert_eq!(
            prom.down_alert(),
            None,
            "FhirclusterDown while the launcher answers and has been scraped: {}\n{}",
            prom.api("/api/v1/alerts"),
            prom.api("/api/v1/rules")
        );
        evaluations.extend(prom.last_evaluation());
        evaluations.len() >= 4
    });

    c.signal(15);
    let status = c.wait_exit(secs(60));
    assert_eq!(status.code(), Some(0));
    let stopped = Instant::now();
    let pending = poll("FhirclusterDown pending", secs(20), || {
        (prom.down_alert().as_deref() == Some("pending")).then(Instant::now)
    });
    assert_eq!(prom.up(), Some(0.0), "the stopped target is down");
    let firing = poll("FhirclusterDown firing", secs(120), || {
        (prom.down_alert().as_deref() == Some("firing")).then(Instant::now)
    });
    let (to_pending, to_firing) = (pending - stopped, firing - stopped);
    eprintln!("FhirclusterDown: pending {to_pending:?}, firing {to_firing:?} after the stop");
    assert!(
        firing - pending >= Duration::from_secs(55),
        "fired {:?} after pending: its for: 1m",
        firing - pending
    );
}
