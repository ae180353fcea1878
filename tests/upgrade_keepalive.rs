//! Keep-alive clients that never retry, across 20 in-place upgrades (#25): each sends its
//! requests one after another on one connection (GETs and POSTs with bodies, some with pauses
//! long enough to be parked), and a request that fails is counted, not sent again. The upgrade
//! hands their idle connections over through the `execve` (`proxy::conn::handed`), so every
//! request is answered on the connection it was sent on and no client ever reconnects; a
//! connection that had sent half a head as the upgrade began keeps those bytes.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;
use crate::upgrade::Bin;

/// What the clients saw.
#[derive(Default)]
struct Seen {
    ok: AtomicU64,
    failed: Mutex<Vec<String>>,
    /// Of those, answered whole but with `Connection: close` (the next request would fail).
    closed_after: AtomicU64,
    /// A client's connection closed under it: it opened another (counted, for the measure; a
    /// client of this kind would have failed every request after).
    reconnects: AtomicU64,
}

const POST_PATH: &str = "/r4/CodeSystem/$validate-code";

/// Client `k` until `stop`: one connection, requests one after another; every third a POST
/// with a body of its own length, checked whole at the process. Pauses of its own between
/// requests: none, short, or over a second (hyper parks it, then the lobby holds it). Returns
/// its connection's local port (0: it had to open another).
fn client(
    k: usize,
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    seen: Arc<Seen>,
) -> std::thread::JoinHandle<u16> {
    std::thread::spawn(move || {
        let pause = [0, 0, 20, 150, 600, 1300][k % 6];
        let mut conn = Conn::open(addr).expect("connect");
        let port = conn.stream.local_addr().expect("local").port();
        let mut i = 0usize;
        while !stop.load(Ordering::Relaxed) {
            i += 1;
            let post = i % 3 == 0;
            let body = vec![b'x'; 100 + (k * 37 + i) % 900];
            // Client 1's GETs are slow (`$expand`): one is often in progress as a drain begins.
            let get = if k == 1 { EXPAND } else { LOOKUP };
            let sent = if post {
                conn.send(
                    "POST",
                    POST_PATH,
                    &[("Content-Type", "application/json")],
                    &body,
                    true,
                )
            } else {
                conn.send("GET", get, &[], b"", true)
            };
            let r = if sent.is_ok() {
                conn.read()
            } else {
                Response {
                    status: 0,
                    headers: Default::default(),
                    body: Vec::new(),
                }
            };
            let whole =
                !post || r.header("x-sim-body-length") == Some(body.len().to_string().as_str());
            let closing = r
                .header("connection")
                .is_some_and(|v| v.eq_ignore_ascii_case("close"));
            if r.status == 200 && whole && !closing {
                seen.ok.fetch_add(1, Ordering::Relaxed);
            } else {
                if r.status == 200 && whole {
                    seen.closed_after.fetch_add(1, Ordering::Relaxed);
                }
                let what = if post { "POST" } else { "GET" };
                seen.failed.lock().expect("failed").push(format!(
                    "client {k} request {i} ({what}): {} {}{}",
                    r.status,
                    if closing { "Connection: close " } else { "" },
                    r.text()
                ));
            }
            if r.status == 0 || closing {
                seen.reconnects.fetch_add(1, Ordering::Relaxed);
                match Conn::open(addr) {
                    Ok(c) => conn = c,
                    Err(_) => return 0,
                }
            }
            if pause > 0 {
                // The client's own pacing (not a wait for the launcher).
                std::thread::sleep(Duration::from_millis(pause));
            }
        }
        let now = conn.stream.local_addr().map_or(0, |a| a.port());
        if now == port {
            port
        } else {
            0
        }
    })
}

#[test]
fn twenty_upgrades_hand_over_every_idle_keep_alive_connection() {
    // spec: DEC-43
    // #25: beyond the spec (STOP-2 closes idle connections at a stop; an upgrade is no stop).
    let bin = Bin::new();
    let c = cluster()
        .workers(2)
        .config(serde_json::json!({"server": {"cluster": {"proxyThreads": 2}}}))
        .env("SIM_COST_EXPAND_MS", "200")
        .start_wrapped(&bin.wrap());
    let addr = c.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Seen::default());
    let clients: Vec<_> = (0..6)
        .map(|k| client(k, addr, stop.clone(), seen.clone()))
        .collect();
    wait_until("the clients under way", secs(30), || {
        seen.ok.load(Ordering::Relaxed) > 20
    });
    // A connection that has sent half a head as each upgrade begins: the rest after it.
    let mut partial = Conn::open(addr).expect("connect");
    let partial_port = partial.stream.local_addr().expect("local").port();
    let mut partial_failed = Vec::new();
    for n in 1..=20 {
        bin.replace_with(Path::new(LAUNCHER));
        partial
            .stream
            .write_all(b"GET /r4/metadata HTTP/1.1\r\nHo")
            .expect("half a head");
        let mark = c.mark();
        unsafe_kill(c.child.id() as i32, libc::SIGUSR2);
        c.wait_for_after(mark, "upgraded in place", secs(60));
        partial
            .stream
            .write_all(b"st: localhost\r\n\r\n")
            .expect("the rest of the head");
        let r = partial.read();
        if r.status != 200 {
            partial_failed.push(format!("upgrade {n}: {} {}", r.status, r.text()));
            partial = Conn::open(addr).expect("connect");
        }
        let served = seen.ok.load(Ordering::Relaxed);
        wait_until("the clients served on", secs(30), || {
            seen.ok.load(Ordering::Relaxed) > served + 10
        });
    }
    stop.store(true, Ordering::Relaxed);
    let ports: Vec<u16> = clients
        .into_iter()
        .map(|t| t.join().expect("client"))
        .collect();
    let failed = seen.failed.lock().expect("failed").clone();
    let ok = seen.ok.load(Ordering::Relaxed);
    let reconnects = seen.reconnects.load(Ordering::Relaxed);
    let total = ok + failed.len() as u64;
    let closed_after = seen.closed_after.load(Ordering::Relaxed);
    println!(
        "upgrade_keepalive: 20 upgrades, 6 non-retrying keep-alive clients: {} of {total} \
         requests failed ({} unanswered, {closed_after} answered with Connection: close), \
         {reconnects} reconnects; half-head connection: {} of 20 failed",
        failed.len(),
        failed.len() as u64 - closed_after,
        partial_failed.len()
    );
    for f in failed.iter().take(30) {
        println!("  {f}");
    }
    let log = c.log_lines();
    let handed: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("upgrade: executing"))
        .collect();
    for l in handed.iter().take(3) {
        println!("  {l}");
    }
    assert!(
        failed.is_empty() && partial_failed.is_empty(),
        "{} of {total} failed: {:?}; half-head: {partial_failed:?}",
        failed.len(),
        &failed[..failed.len().min(10)]
    );
    assert_eq!(reconnects, 0);
    assert!(
        ports.iter().all(|&p| p != 0),
        "every client on the connection it opened: {ports:?}"
    );
    assert_eq!(
        partial.stream.local_addr().expect("local").port(),
        partial_port
    );
    report_figures(
        "upgrade_keepalive::twenty_upgrades_hand_over_every_idle_keep_alive_connection",
        "20 in-place upgrades, 6 keep-alive clients that never retry (GET, 200 ms $expand, POST \
         with bodies, paced 0 to 1.3 s) and one with half a head sent as each upgrade begins",
        20,
        total + 20,
        0,
        "every request answered on the connection it was sent on; 0 reconnects, same local ports",
    );
}

#[test]
fn an_upgrade_that_fails_serves_the_kept_connections_on() {
    // spec: DEC-43
    // #25: the execve fails (the test hook): the old program takes its idle connections back
    // and serves them, so a client that doesn't retry sees nothing either.
    let bin = Bin::new();
    let c = cluster()
        .workers(1)
        .env("FHIRCLUSTER_TEST_EXEC_FAIL", "1")
        .start_wrapped(&bin.wrap());
    let addr = c.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Seen::default());
    let clients: Vec<_> = (0..6)
        .map(|k| client(k, addr, stop.clone(), seen.clone()))
        .collect();
    wait_until("the clients under way", secs(30), || {
        seen.ok.load(Ordering::Relaxed) > 20
    });
    let mut partial = Conn::open(addr).expect("connect");
    for _ in 0..3 {
        bin.replace_with(Path::new(LAUNCHER));
        partial
            .stream
            .write_all(b"POST /r4/CodeSystem/$validate-code HTTP/1.1\r\nHost: x\r\nContent-")
            .expect("half a head");
        let mark = c.mark();
        c.signal(libc::SIGUSR2);
        c.wait_for_after(mark, "upgrade: cannot execute", secs(60));
        partial
            .stream
            .write_all(b"Length: 2\r\n\r\n{}")
            .expect("the rest");
        let r = partial.read();
        assert_eq!(r.status, 200, "{}\n{}", r.text(), c.log_lines().join("\n"));
        assert_eq!(r.header("x-sim-body-length"), Some("2"));
        let served = seen.ok.load(Ordering::Relaxed);
        wait_until("the clients served on", secs(30), || {
            seen.ok.load(Ordering::Relaxed) > served + 10
        });
    }
    stop.store(true, Ordering::Relaxed);
    let ports: Vec<u16> = clients
        .into_iter()
        .map(|t| t.join().expect("client"))
        .collect();
    let failed = seen.failed.lock().expect("failed").clone();
    assert!(failed.is_empty(), "{failed:?}");
    assert!(ports.iter().all(|&p| p != 0), "{ports:?}");
    assert!(
        c.log_lines()
            .iter()
            .any(|l| l.contains("client connection(s) handed over, as they were")),
        "{}",
        c.log_lines().join("\n")
    );
}

#[test]
fn an_upgrade_to_a_binary_that_takes_no_connections_closes_the_idle_ones_as_before() {
    // #25: a binary from before the handover of connections says only `1` to
    // --upgrade-formats; handed them it would leave them open and unserved, so they are closed
    // in the drain, as a stop closes them (STOP-2), and the client sees its connection end.
    let bin = Bin::new();
    let c = cluster().workers(1).start_wrapped(&bin.wrap());
    let mut idle = Conn::open(c.addr()).expect("connect");
    idle.send("GET", LOOKUP, &[], b"", true).expect("send");
    assert_eq!(idle.read().status, 200);
    bin.replace_with_script(&format!(
        "#!/bin/sh\n[ \"$1\" = --upgrade-formats ] && {{ echo 1; exit 0; }}\nexec '{LAUNCHER}' \"$@\"\n"
    ));
    let mark = c.mark();
    c.signal(libc::SIGUSR2);
    c.wait_for_after(mark, "upgraded in place", secs(60));
    let (_, ended) = idle.drain(secs(10));
    assert!(ended, "the idle connection was left open");
    c.wait_for_after(mark, "takes no client connections over", secs(10));
    assert_eq!(c.get(LOOKUP).status, 200);
}

#[test]
fn a_head_begun_before_upgrades_keeps_its_header_timeout() {
    // #25: a connection handed over keeps the time it has been idle: upgrade after upgrade
    // gives a head sent slowly no more than headerTimeoutSeconds from the last response.
    let bin = Bin::new();
    let c = cluster()
        .workers(1)
        .config(serde_json::json!({"server": {"cluster": {"headerTimeoutSeconds": 2}}}))
        .start_wrapped(&bin.wrap());
    let mut slow = Conn::open(c.addr()).expect("connect");
    let began = std::time::Instant::now();
    slow.stream
        .write_all(b"GET /r4/metadata HTTP/1.1\r\nHo")
        .expect("half a head");
    // Upgrades until 1.5 s of the 2 have passed (or the connection is cut meanwhile).
    let mut last = began;
    while began.elapsed() < Duration::from_millis(1500) {
        bin.replace_with(Path::new(LAUNCHER));
        let mark = c.mark();
        c.signal(libc::SIGUSR2);
        c.wait_for_after(mark, "upgraded in place", secs(60));
        last = std::time::Instant::now();
    }
    let (_, ended) = slow.drain(secs(10));
    let after_last = last.elapsed();
    assert!(ended, "the slow head was never cut off");
    // Counted from the accept: cut about 0.5 s after the last upgrade; counted anew by each
    // program, 2 s after it.
    assert!(
        after_last < Duration::from_millis(1300),
        "cut {after_last:?} after the last upgrade, {:?} after the head began",
        began.elapsed()
    );
}
