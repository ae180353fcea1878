//! systemd's notify protocol end to end: the test plays systemd, binding the `NOTIFY_SOCKET`
//! datagram socket itself, and watches what the real launcher sends as the cluster starts, loses
//! a worker, runs, and stops. Also: the children never see the launcher's notify variables, and a
//! launcher without (or with a dead) notify socket runs and stops as usual.

mod common;

use std::os::unix::net::UnixDatagram;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;

const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;

/// One datagram as the test's "systemd" received it.
#[derive(Clone, Debug)]
struct Note {
    at: Instant,
    text: String,
    /// For a `READY=1`: whether the front door accepted a connection, and the master answered
    /// on its own port, at the moment it arrived.
    port_accepting: bool,
    master_answering: bool,
}

/// Receives datagrams on `sock` until it is dropped or `stop` is set, recording each.
fn collect(sock: UnixDatagram, front: u16, master: u16) -> Arc<Mutex<Vec<Note>>> {
    let notes = Arc::new(Mutex::new(Vec::new()));
    let out = notes.clone();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("read timeout");
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 4096];
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(120) {
            let Ok(n) = sock.recv(&mut buf) else {
                if Arc::strong_count(&out) == 1 {
                    return;
                }
                continue;
            };
            let text = String::from_utf8_lossy(&buf[..n]).into_owned();
            let ready = text.lines().any(|l| l == "READY=1");
            let note = Note {
                at: Instant::now(),
                port_accepting: ready && accepting(front),
                master_answering: ready && get_direct(master, "/sim/info").status == 200,
                text,
            };
            out.lock().map(|mut v| v.push(note)).ok();
        }
    });
    notes
}

fn snapshot(notes: &Arc<Mutex<Vec<Note>>>) -> Vec<Note> {
    notes.lock().map(|v| v.clone()).unwrap_or_default()
}

fn has_line(n: &Note, line: &str) -> bool {
    n.text.lines().any(|l| l == line)
}

fn dump(notes: &[Note], t0: Instant) -> String {
    notes
        .iter()
        .map(|n| format!("{:>6} ms {:?}", (n.at - t0).as_millis(), n.text))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn ready_status_watchdog_and_stopping_reach_the_notify_socket_and_no_child_inherits_it() {
    // spec: LAUNCH-6 (READY only once the master is ready and the port open), STOP-1
    let dir = tempfile::tempdir().expect("socket dir");
    let path = dir.path().join("notify");
    let sock = UnixDatagram::bind(&path).expect("bind the notify socket");
    let path = path.to_str().expect("utf-8 path").to_string();

    let t0 = Instant::now();
    let mut c = cluster()
        .workers(1)
        .env("NOTIFY_SOCKET", &path)
        .env("WATCHDOG_USEC", "500000")
        .env("SIM_START_DELAY_MS_m0", "1500")
        .spawn();
    let notes = collect(sock, c.port, c.internal);
    c.wait_for("tx1: ready", Duration::from_secs(20));
    c.wait_until_listening(Duration::from_secs(10));

    // READY=1 once, only after the master was ready and the port accepted connections.
    assert!(
        eventually(Duration::from_secs(5), || snapshot(&notes)
            .iter()
            .any(|n| has_line(n, "STATUS=2/2 ready, 0 queued"))),
        "no STATUS with both processes ready:\n{}",
        dump(&snapshot(&notes), t0)
    );
    let all = snapshot(&notes);
    let readies: Vec<&Note> = all.iter().filter(|n| has_line(n, "READY=1")).collect();
    assert_eq!(readies.len(), 1, "one READY=1:\n{}", dump(&all, t0));
    let ready = readies[0];
    assert!(
        ready.at - t0 >= Duration::from_millis(1500),
        "READY=1 came before the master's start delay was over:\n{}",
        dump(&all, t0)
    );
    assert!(
        ready.port_accepting && ready.master_answering,
        "at READY=1 the port accepts and the master answers: {ready:?}"
    );
    assert!(
        all[0].text.contains("READY=1"),
        "nothing is sent before READY=1:\n{}",
        dump(&all, t0)
    );
    assert!(
        ready.text.lines().any(|l| l.starts_with("STATUS=")
            && l.ends_with(" ready, 0 queued")
            && l.contains("/2 ")),
        "READY=1 carries a STATUS line: {:?}",
        ready.text
    );

    // The children have none of the launcher's notify variables; the launcher has them.
    let launcher_env = environ_of(c.pid());
    assert_eq!(
        launcher_env.get("NOTIFY_SOCKET").map(String::as_str),
        Some(path.as_str())
    );
    for code in ["m0", "tx1"] {
        let env = environ_of(c.pid_of(code));
        assert!(
            env.contains_key("FHIRSMITH_ROLE"),
            "{code}'s environment was read: {env:?}"
        );
        for var in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] {
            assert!(!env.contains_key(var), "{code} inherited {var}");
        }
    }

    // WATCHDOG=1 every WATCHDOG_USEC / 2 (250 ms): several a second, never a gap systemd would
    // take for a hang (500 ms). The 2 s watched is the check, not a wait for a state.
    std::thread::sleep(Duration::from_millis(2000));
    let all = snapshot(&notes);
    let pings: Vec<Instant> = all
        .iter()
        .filter(|n| has_line(n, "WATCHDOG=1"))
        .map(|n| n.at)
        .collect();
    assert!(pings.len() >= 6, "WATCHDOG=1 pings:\n{}", dump(&all, t0));
    let longest = pings
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default();
    assert!(
        longest < Duration::from_millis(500),
        "a gap of {longest:?} between pings:\n{}",
        dump(&all, t0)
    );

    // A worker dies: a STATUS line with one fewer ready, then all ready again once restarted.
    let killed_at = Instant::now();
    unsafe_kill(c.pid_of("tx1"), SIGKILL);
    let fewer = |n: &Note| n.at > killed_at && has_line(n, "STATUS=1/2 ready, 0 queued");
    assert!(
        eventually(Duration::from_secs(5), || snapshot(&notes)
            .iter()
            .any(fewer)),
        "no STATUS with tx1 gone:\n{}",
        dump(&snapshot(&notes), t0)
    );
    let fewer_at = snapshot(&notes)
        .iter()
        .find(|n| fewer(n))
        .map(|n| n.at)
        .expect("found above");
    assert!(
        eventually(Duration::from_secs(10), || snapshot(&notes).iter().any(
            |n| n.at > fewer_at && has_line(n, "STATUS=2/2 ready, 0 queued")
        )),
        "no STATUS with tx1 back:\n{}",
        dump(&snapshot(&notes), t0)
    );

    // SIGTERM: STOPPING=1, and after it no READY and no STATUS claiming readiness.
    let term_at = Instant::now();
    c.signal(SIGTERM);
    let status = c.wait_exit(Duration::from_secs(20));
    assert_eq!(status.code(), Some(0));
    // A datagram of the test's own, sent after the exit, arrives after everything the launcher
    // sent: once it is in, so is the rest.
    const END: &str = "TEST-END=1";
    UnixDatagram::unbound()
        .and_then(|s| s.send_to(END.as_bytes(), &path))
        .expect("send the end marker");
    wait_until(
        "the end marker at the notify socket",
        Duration::from_secs(5),
        || snapshot(&notes).iter().any(|n| has_line(n, END)),
    );
    let all = snapshot(&notes);
    let stopping = all
        .iter()
        .position(|n| n.at >= term_at && has_line(n, "STOPPING=1"))
        .unwrap_or_else(|| panic!("no STOPPING=1:\n{}", dump(&all, t0)));
    for n in &all[stopping + 1..] {
        assert!(
            !n.text.contains("READY=1") && !n.text.contains(" ready, "),
            "after STOPPING=1: {:?}\n{}",
            n.text,
            dump(&all, t0)
        );
    }
}

#[test]
fn without_a_notify_socket_or_with_a_dead_one_the_launcher_runs_and_stops_as_usual() {
    let dir = tempfile::tempdir().expect("socket dir");
    let nobody = dir.path().join("nobody-listens");
    let nobody = nobody.to_str().expect("utf-8 path");
    for env in [
        vec![("WATCHDOG_USEC", "500000")],
        vec![("NOTIFY_SOCKET", nobody), ("WATCHDOG_USEC", "500000")],
        vec![("NOTIFY_SOCKET", "not-an-absolute-path")],
    ] {
        let mut b = cluster().workers(1);
        for (k, v) in &env {
            b = b.env(k, v);
        }
        let mut c = b.start();
        for _ in 0..3 {
            let r = c.get("/r4/metadata");
            assert_eq!(r.status, 200, "{env:?}: {}", r.text());
        }
        c.signal(SIGTERM);
        let status = c.wait_exit(Duration::from_secs(20));
        assert_eq!(
            status.code(),
            Some(0),
            "{env:?}:\n{}",
            c.log_lines().join("\n")
        );
        let log = c.log_lines().join("\n");
        assert!(
            !log.contains("ERROR") && !log.contains("panicked"),
            "{env:?}:\n{log}"
        );
    }
}
