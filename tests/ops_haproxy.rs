//! `fhircluster print haproxy`, run: HAProxy's own check (`haproxy -c`) accepts the printed
//! configuration, and a real HAProxy (started here in the foreground, stopped by its pid) runs
//! it in front of three launchers on loopback (`hostPrefix` a, b, c, with their `/readyz` on
//! `adminAddress` as the health check and their agents on `agentAddress`, DEC-89): every
//! cache-id session stays on its host (the sim's `X-Served-By`), other tx requests spread over
//! the hosts, and a host stopped under load with `lameDuckSeconds` (DEC-88) loses no request;
//! once it is gone, its ids get `cache-id-unknown` from another host. Without haproxy installed
//! these tests fail, saying so (.ci/run installs it).

use crate::common;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use serde_json::json;

const SIGTERM: i32 = 15;

/// A running HAProxy this test started; stopped (its pid only) when dropped.
struct Haproxy {
    child: Child,
    _dir: tempfile::TempDir,
    addr: SocketAddr,
}

/// `haproxy -c -f` on `config`: its exit status 0, or the test fails with what it said.
fn haproxy_accepts(config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("haproxy dir");
    let path = dir.path().join("haproxy.cfg");
    std::fs::write(&path, config).expect("write haproxy.cfg");
    let out = run_bounded(
        Command::new("haproxy").arg("-c").arg("-f").arg(&path),
        Duration::from_secs(20),
    );
    assert!(
        out.code.is_some(),
        "haproxy is not installed (or not on PATH): these tests run the printed configuration \
         with a real HAProxy; .ci/run installs it (apt-get install -y haproxy)"
    );
    assert_eq!(out.code, Some(0), "haproxy -c:\n{}\n{config}", out.all());
    dir
}

impl Haproxy {
    fn start(config: &str, addr: SocketAddr) -> Haproxy {
        let dir = haproxy_accepts(config);
        let child = Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(dir.path().join("haproxy.cfg"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start haproxy");
        let mut h = Haproxy {
            child,
            _dir: dir,
            addr,
        };
        let up = eventually(Duration::from_secs(10), || {
            std::net::TcpStream::connect(addr).is_ok() || matches!(h.child.try_wait(), Ok(Some(_)))
        });
        assert!(
            up && matches!(h.child.try_wait(), Ok(None)),
            "haproxy did not start"
        );
        h
    }

    fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
        request(self.addr, method, path, headers, body)
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        unsafe_kill(self.child.id() as i32, SIGTERM);
        if !eventually(Duration::from_secs(5), || {
            matches!(self.child.try_wait(), Ok(Some(_)))
        }) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `fhircluster print haproxy ARGS`' output; the test fails with its stderr otherwise.
fn print_haproxy(args: &[String]) -> String {
    let out = run_bounded(
        Command::new(LAUNCHER)
            .arg("print")
            .arg("haproxy")
            .args(args),
        Duration::from_secs(20),
    );
    assert_eq!(out.code, Some(0), "print haproxy: {}", out.all());
    out.stdout
}

/// One host's launcher: its prefix, with its own admin and agent ports.
struct Host {
    c: Cluster,
    admin: u16,
    agent: u16,
}

fn host(prefix: &str, lame_duck: u64) -> Host {
    let (admin, agent) = (free_port(), free_port());
    let c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": {
            "hostPrefix": prefix,
            "adminAddress": admin,
            "agentAddress": agent,
            "lameDuckSeconds": lame_duck,
            "drainSeconds": 5
        } } }))
        .start();
    Host { c, admin, agent }
}

impl Host {
    fn spec(&self, prefix: &str) -> String {
        format!(
            "{prefix}=127.0.0.1:{},admin={},agent={}",
            self.c.port, self.admin, self.agent
        )
    }
}

/// The host code part of a cache-id or instance code: `atx1.x.y` → `atx1`.
fn issuer(id: &str) -> &str {
    id.split('.').next().unwrap_or("")
}

#[test]
fn the_printed_haproxy_config_for_one_host_and_for_many_passes_haproxy_c() {
    // One host: this one's settings (its admin and agent addresses).
    let one = print_haproxy(&[
        "--admin-address".into(),
        "9100".into(),
        "--listen".into(),
        ":8080".into(),
    ]);
    assert!(one.contains("check port 9100"), "{one}");
    haproxy_accepts(&one);
    // Many, with prefixes that begin alike.
    let many = print_haproxy(&[
        "--host".into(),
        "a=10.0.0.11:3000,admin=9100,agent=9101".into(),
        "--host".into(),
        "ab=10.0.0.12:3000,admin=9100,agent=9101".into(),
        "--master-host".into(),
        "ab".into(),
    ]);
    assert!(
        many.contains("backend fhir_master\n    option httpchk GET /readyz\n    server ab "),
        "{many}"
    );
    haproxy_accepts(&many);
    // Without an admin port, no health check can be written: refused, naming the setting.
    let out = run_bounded(
        Command::new(LAUNCHER).args(["print", "haproxy", "--host", "a=10.0.0.11:3000"]),
        Duration::from_secs(20),
    );
    assert_eq!(out.code, Some(1), "{}", out.all());
    assert!(out.stderr.contains("adminAddress"), "{}", out.all());
}

#[test]
fn three_hosts_behind_haproxy_keep_their_sessions_spread_the_rest_and_a_lame_duck_stop_loses_nothing(
) {
    // spec: DEC-88, DEC-89, ROUTE-3a (one level up: a cache-id to its issuer's host)
    let a = host("a", 8);
    let mut b = host("b", 8);
    let cc = host("c", 8);
    let port = free_port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let config = print_haproxy(&[
        "--listen".into(),
        addr.to_string(),
        "--host".into(),
        a.spec("a"),
        "--host".into(),
        b.spec("b"),
        "--host".into(),
        cc.spec("c"),
    ]);
    let hp = Haproxy::start(&config, addr);

    // Sessions started through HAProxy land on every host (leastconn), each id its host's.
    let mut ids: Vec<String> = Vec::new();
    poll("sessions on all three hosts", secs(30), || {
        let r = hp.request("POST", "/r4/$cache-control", &[], b"{}");
        if r.status == 200 {
            let id = r.header("x-cache-id").unwrap_or("").to_string();
            assert_eq!(issuer(&id), r.served_by(), "{id}");
            ids.push(id);
        }
        let hosts: std::collections::BTreeSet<char> =
            ids.iter().filter_map(|i| i.chars().next()).collect();
        (hosts.len() == 3 && ids.len() >= 9).then_some(())
    });
    // Every id goes to the process that issued it, on its host, every time.
    for id in &ids {
        for _ in 0..2 {
            let r = hp.request("GET", "/r4/CodeSystem/$lookup", &[("X-Cache-Id", id)], b"");
            assert_eq!(
                (r.status, r.served_by()),
                (200, issuer(id)),
                "{id}: {}",
                r.text()
            );
        }
    }
    // The master's paths: the designated master host's (the first).
    let r = hp.request("POST", "/r4/$closure", &[], b"{}");
    assert_eq!(r.served_by(), "am0", "{} {}", r.status, r.text());

    // Load (new sessions and host a's and c's sessions) while host b stops with its lame duck.
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let served = Arc::new(Mutex::new(std::collections::BTreeMap::<String, u64>::new()));
    let kept: Vec<String> = ids
        .iter()
        .filter(|i| !i.starts_with('b'))
        .cloned()
        .collect();
    let workers: Vec<_> = (0..4)
        .map(|n| {
            let (stop, failures, served, kept) =
                (stop.clone(), failures.clone(), served.clone(), kept.clone());
            std::thread::spawn(move || {
                let mut i = n;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    let r = if i % 2 == 0 {
                        let id = &kept[i % kept.len()];
                        let r = request(
                            addr,
                            "GET",
                            "/r4/CodeSystem/$lookup",
                            &[("X-Cache-Id", id)],
                            b"",
                        );
                        if r.status == 200 && r.served_by() != issuer(id) {
                            failures
                                .lock()
                                .expect("lock")
                                .push(format!("{id} on {}", r.served_by()));
                        }
                        r
                    } else {
                        request(addr, "GET", "/r4/metadata", &[], b"")
                    };
                    if r.status != 200 {
                        failures
                            .lock()
                            .expect("lock")
                            .push(format!("{} {}", r.status, r.text()));
                    }
                    let host = r
                        .served_by()
                        .chars()
                        .next()
                        .map(String::from)
                        .unwrap_or_default();
                    *served.lock().expect("lock").entry(host).or_default() += 1;
                }
            })
        })
        .collect();
    wait_until("load on host b", secs(10), || {
        served
            .lock()
            .expect("lock")
            .get("b")
            .is_some_and(|n| *n > 3)
    });
    let mark = b.c.mark();
    b.c.signal(SIGTERM);
    b.c.wait_for_after(mark, "lame duck over", secs(30));
    assert_eq!(b.c.wait_exit(secs(30)).code(), Some(0));
    // A little more load with host b gone, then the tally.
    let before = served.lock().expect("lock").values().sum::<u64>();
    wait_until("more requests with host b gone", secs(10), || {
        served.lock().expect("lock").values().sum::<u64>() > before + 20
    });
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("load thread");
    }
    let failures = failures.lock().expect("lock").clone();
    let served = served.lock().expect("lock").clone();
    eprintln!("served by host during b's stop: {served:?}");
    assert!(failures.is_empty(), "{} lost: {failures:?}", failures.len());

    // Host b gone: its ids get cache-id-unknown from another host; the others carry on.
    for id in ids.iter().filter(|i| i.starts_with('b')) {
        let r = hp.request("GET", "/r4/CodeSystem/$lookup", &[("X-Cache-Id", id)], b"");
        assert!(r.is_cache_id_unknown(), "{id}: {} {}", r.status, r.text());
        assert!(!r.served_by().starts_with('b'), "{id}: {}", r.served_by());
    }
    drop(hp);
    drop((a, cc));
}
