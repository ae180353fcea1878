//! `fhircluster print haproxy`, run: HAProxy's own check (`haproxy -c`) accepts the printed
//! configuration, and a real HAProxy (started here in the foreground, stopped by its pid) runs
//! it in front of three launchers on loopback (`hostPrefix` a, b, c, with their `/readyz` on
//! `adminAddress` as the health check and their agents on `agentAddress`, DEC-89): every
//! cache-id session stays on its host (the sim's `X-Served-By`), other tx requests spread over
//! the hosts, and a host stopped under load with `lameDuckSeconds` (DEC-88) loses no request;
//! once it is gone, its ids get `cache-id-unknown` from another host; the same for a host killed
//! outright, whose new sessions go to the others at once. A host whose slots other
//! clients hold (straight to its port) gets a measured smaller share of the requests through
//! HAProxy, its agent's weight read back from HAProxy's stats socket. Without haproxy installed
//! these tests fail, saying so (.ci/run installs it).

use crate::common;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
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
    host_with(prefix, json!({ "lameDuckSeconds": lame_duck }))
}

/// A host whose `server.cluster` also has `cluster`'s settings.
fn host_with(prefix: &str, cluster_settings: serde_json::Value) -> Host {
    let (admin, agent) = (free_port(), free_port());
    let c = cluster()
        .workers(1)
        .config(json!({ "server": { "cluster": {
            "hostPrefix": prefix,
            "adminAddress": admin,
            "agentAddress": agent,
            "drainSeconds": 5
        } } }))
        .config(json!({ "server": { "cluster": cluster_settings } }))
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

/// A free loopback address for HAProxy, and its printed configuration for hosts a, b and c.
fn three_hosts_config(a: &Host, b: &Host, c: &Host) -> (SocketAddr, String) {
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let mut args = vec!["--listen".to_string(), addr.to_string()];
    for (prefix, host) in [("a", a), ("b", b), ("c", c)] {
        args.extend(["--host".to_string(), host.spec(prefix)]);
    }
    (addr, print_haproxy(&args))
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
    let (addr, config) = three_hosts_config(&a, &b, &cc);
    let hp = Haproxy::start(&config, addr);

    // Sessions started through HAProxy land on every host (leastconn), each id its host's.
    let ids = sessions_on_every_host(addr, "abc");
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

    // Host b stopped under load with its lame duck, then host c killed outright.
    let mut cc = cc;
    common::a_lame_duck_stop_and_a_kill_behind(addr, &mut b.c, &mut cc.c, &ids);
    drop(hp);
    drop(a);
}

/// Host `server`'s weight in `backend` as HAProxy has it now (`show servers state`, its
/// `srv_uweight`), through the stats socket at `sock`.
fn haproxy_weight(sock: &std::path::Path, backend: &str, server: &str) -> Option<u32> {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(sock).ok()?;
    s.write_all(format!("show servers state {backend}\n").as_bytes())
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let header: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("# be_id"))?
        .split_whitespace()
        .skip(1)
        .collect();
    let (name, weight) = (
        header.iter().position(|c| *c == "srv_name")?,
        header.iter().position(|c| *c == "srv_uweight")?,
    );
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cols| cols.get(name) == Some(&server))?
        .get(weight)?
        .parse()
        .ok()
}

#[test]
fn a_host_whose_slots_other_clients_hold_gets_fewer_new_sessions_through_haproxy() {
    // spec: DEC-89: the weight is the host's own view of its slots, which counts the requests
    // that never passed through HAProxy (HAProxy's connection count is only its own).
    let slots = json!({ "maxOutstanding": 4, "fastLaneExtra": 0, "upstreamTimeoutSeconds": 30 });
    let (a, b, cc) = (
        host_with("a", slots.clone()),
        host_with("b", slots.clone()),
        host_with("c", slots),
    );
    let (addr, config) = three_hosts_config(&a, &b, &cc);
    // The test's own look at HAProxy's weights: its stats socket.
    let sockdir = tempfile::tempdir().expect("socket dir");
    let sock = sockdir.path().join("admin.sock");
    let config = config.replacen(
        "global\n",
        &format!("global\n    stats socket {} level admin\n", sock.display()),
        1,
    );
    let hp = Haproxy::start(&config, addr);
    poll("host a at its full weight", secs(30), || {
        (haproxy_weight(&sock, "fhir_tx", "a")? == 100).then_some(())
    });
    // Other clients hold 6 of host a's 8 slots, straight to its port: HAProxy counts none.
    let a_addr = a.c.addr();
    for _ in 0..6 {
        std::thread::spawn(move || {
            request(a_addr, "GET", "/r4/ValueSet/$expand?_sim_hang=1", &[], b"")
        });
    }
    poll("host a's weight at 25% in HAProxy", secs(20), || {
        (haproxy_weight(&sock, "fhir_tx", "a")? <= 25).then_some(())
    });
    // Clients through HAProxy, 6 at once, 10 requests each, each response lasting a second.
    let on = Arc::new(Mutex::new(std::collections::BTreeMap::<char, u32>::new()));
    let clients: Vec<_> = (0..6)
        .map(|_| {
            let on = on.clone();
            std::thread::spawn(move || {
                for _ in 0..10 {
                    let r = request(addr, "GET", "/r4/metadata?_sim_stream=1", &[], b"");
                    assert_eq!(r.status, 200, "{}", r.text());
                    let host = r.served_by().chars().next().unwrap_or('?');
                    *on.lock().expect("lock").entry(host).or_default() += 1;
                }
            })
        })
        .collect();
    for c in clients {
        c.join().expect("client");
    }
    let on = on.lock().expect("lock").clone();
    eprintln!("60 requests through HAProxy with host a at 25% of its slots free: {on:?}");
    let on_a = on.get(&'a').copied().unwrap_or(0);
    // An even share would be 20 of 60; by the weights (25% against the others' free share as
    // they fill), about 10.
    assert!(on_a < 15, "host a took {on_a} of 60: {on:?}");
    drop(hp);
}
