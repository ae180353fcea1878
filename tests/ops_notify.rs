//! systemd's notify protocol end to end: the test plays systemd, binding the `NOTIFY_SOCKET`
//! datagram socket itself, and watches what the real launcher sends, and in what order, as the
//! cluster starts (`EXTEND_TIMEOUT_USEC=` while the master loads, then `READY=1`), loses a worker,
//! reloads (`RELOADING=1` with `MONOTONIC_USEC=`, then `READY=1` once the rolling restart is over,
//! or at once when the settings are refused), upgrades in place (`SIGUSR2`: `RELOADING=1` saying
//! so, then the new program's `READY=1`), and stops. Also: the children never see the
//! launcher's notify variables, and a launcher without (or with a dead) notify socket runs and
//! stops as usual.

use crate::common;

use std::os::unix::net::UnixDatagram;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use fhircluster::ops::notify::monotonic_usec;

const SIGHUP: i32 = 1;
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

/// Waits (5 s at most) for a `RELOADING=1` followed by a `READY=1`: the notes so far, and where
/// the first `RELOADING=1` is.
fn reloading_then_ready(notes: &Arc<Mutex<Vec<Note>>>, t0: Instant) -> (Vec<Note>, usize) {
    let found = |all: &[Note]| {
        let r = all.iter().position(|n| has_line(n, "RELOADING=1"))?;
        all[r..].iter().any(|n| has_line(n, "READY=1")).then_some(r)
    };
    if !eventually(Duration::from_secs(5), || found(&snapshot(notes)).is_some()) {
        panic!(
            "no RELOADING=1 then READY=1:\n{}",
            dump(&snapshot(notes), t0)
        );
    }
    let all = snapshot(notes);
    let r = found(&all).unwrap_or(0);
    (all, r)
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
    // Before READY=1: only what says the master is loading.
    let before: Vec<&Note> = all.iter().take_while(|n| !has_line(n, "READY=1")).collect();
    for n in &before {
        assert!(
            n.text.lines().all(|l| l.starts_with("STATUS=starting: ")
                || l == "EXTEND_TIMEOUT_USEC=30000000"
                || l == "WATCHDOG=1"),
            "before READY=1: {:?}\n{}",
            n.text,
            dump(&all, t0)
        );
    }
    assert!(
        before
            .iter()
            .any(|n| has_line(n, "EXTEND_TIMEOUT_USEC=30000000"))
            && before
                .iter()
                .any(|n| has_line(n, "STATUS=starting: the master is loading")),
        "the master's load extends systemd's start timeout:\n{}",
        dump(&all, t0)
    );
    assert!(
        !all.iter()
            .skip(before.len())
            .any(|n| n.text.contains("EXTEND_TIMEOUT_USEC")),
        "no extension once ready:\n{}",
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

/// A cluster whose notify socket the test holds, started and past its READY=1.
fn notified_cluster(
    workers: u32,
    env: &[(&str, &str)],
) -> (Cluster, Arc<Mutex<Vec<Note>>>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("socket dir");
    let path = dir.path().join("notify");
    let sock = UnixDatagram::bind(&path).expect("bind the notify socket");
    let mut b = cluster()
        .workers(workers)
        .env("NOTIFY_SOCKET", path.to_str().expect("utf-8 path"));
    for (k, v) in env {
        b = b.env(k, v);
    }
    let c = b.start();
    let notes = collect(sock, c.port, c.internal);
    (c, notes, dir)
}

#[test]
fn sighup_sends_reloading_with_the_monotonic_time_then_ready_once_the_rolling_restart_is_done() {
    // Every start of the master takes 2 s, so the rolling restart's last step does too.
    let (mut c, notes, _dir) = notified_cluster(1, &[("SIM_START_DELAY_MS_m0", "2000")]);
    // A change the processes read (config.json outside server.cluster): they restart in turn.
    let mut config = c.config.clone();
    merge(
        &mut config,
        &serde_json::json!({"library": {"reloaded": 1}}),
    );
    write_config(&c.data_dir(), &config);
    let t0 = Instant::now();
    let before_usec = monotonic_usec();
    let mark = c.mark();
    c.signal(SIGHUP);
    let sent_at = Instant::now();
    let after_usec = monotonic_usec();
    c.wait_for_after(mark, "rolling restart done", Duration::from_secs(30));
    assert!(
        eventually(Duration::from_secs(5), || snapshot(&notes)
            .iter()
            .any(|n| n.at >= sent_at && has_line(n, "READY=1"))),
        "no READY=1 after the reload:\n{}",
        dump(&snapshot(&notes), t0)
    );
    let all = snapshot(&notes);
    let reloading = all
        .iter()
        .position(|n| has_line(n, "RELOADING=1"))
        .unwrap_or_else(|| panic!("no RELOADING=1:\n{}", dump(&all, t0)));
    let r = &all[reloading];
    let usec: u64 = r
        .text
        .lines()
        .find_map(|l| l.strip_prefix("MONOTONIC_USEC="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("RELOADING=1 without MONOTONIC_USEC: {:?}", r.text));
    assert!(
        usec >= before_usec && usec <= after_usec + 5_000_000,
        "MONOTONIC_USEC={usec} not the time of the SIGHUP ({before_usec}..{after_usec})"
    );
    let ready = reloading
        + all[reloading..]
            .iter()
            .position(|n| has_line(n, "READY=1"))
            .unwrap_or_else(|| panic!("no READY=1 after RELOADING=1:\n{}", dump(&all, t0)));
    assert_eq!(
        all.iter().filter(|n| has_line(n, "RELOADING=1")).count(),
        1,
        "{}",
        dump(&all, t0)
    );
    assert!(
        all[ready].at - r.at >= Duration::from_millis(2000),
        "READY=1 came before the master's restart (2 s) was over:\n{}",
        dump(&all, t0)
    );
    assert!(
        all[reloading..ready]
            .iter()
            .any(|n| has_line(n, "EXTEND_TIMEOUT_USEC=30000000")),
        "the reload extends systemd's timeout while it runs:\n{}",
        dump(&all, t0)
    );
    assert!(
        all[ready]
            .text
            .lines()
            .any(|l| l == "STATUS=2/2 ready, 0 queued"),
        "{:?}",
        all[ready].text
    );
    std::thread::sleep(Duration::from_millis(1500));
    let all = snapshot(&notes);
    assert!(
        !all[ready + 1..]
            .iter()
            .any(|n| n.text.contains("EXTEND_TIMEOUT_USEC") || n.text.contains("READY=1")),
        "nothing more once the reload is over:\n{}",
        dump(&all, t0)
    );
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(Duration::from_secs(20)).code(), Some(0));
}

#[test]
fn a_refused_reload_answers_ready_at_once_saying_so_and_restarts_nothing() {
    let (mut c, notes, _dir) = notified_cluster(1, &[]);
    let t0 = Instant::now();
    let pids = c.child_pids();
    std::fs::write(c.data_dir().join("config.json"), "{ not json").expect("write config");
    let mark = c.mark();
    c.signal(SIGHUP);
    c.wait_for_after(mark, "the settings were refused", Duration::from_secs(10));
    let (all, r) = reloading_then_ready(&notes, t0);
    let ready = &all[r..]
        .iter()
        .find(|n| has_line(n, "READY=1"))
        .expect("found above");
    assert!(
        ready
            .text
            .lines()
            .any(|l| l.starts_with("STATUS=reload refused, running as before: ")),
        "{:?}",
        ready.text
    );
    assert!(ready.at - all[r].at < Duration::from_secs(2), "at once");
    assert_eq!(c.child_pids(), pids, "nothing restarted");
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(Duration::from_secs(20)).code(), Some(0));
}

#[test]
fn while_the_master_is_down_between_starts_no_extension_is_sent() {
    // The master fails its first start after 1.5 s, waits out a 1 s backoff, then starts.
    let once = tempfile::tempdir().expect("once dir");
    let dir = tempfile::tempdir().expect("socket dir");
    let path = dir.path().join("notify");
    let sock = UnixDatagram::bind(&path).expect("bind the notify socket");
    let t0 = Instant::now();
    let mut c = cluster()
        .workers(0)
        .env("NOTIFY_SOCKET", path.to_str().expect("utf-8 path"))
        // Ticks of 100 ms, so the second between the starts is seen.
        .env("WATCHDOG_USEC", "200000")
        .env("SIM_ONCE_DIR", &once.path().display().to_string())
        .env("SIM_START_DELAY_MS_m0", "1500")
        .env("SIM_FAIL_AT_START_m0", "3")
        .spawn();
    let notes = collect(sock, c.port, c.internal);
    c.wait_for("m0: ready", Duration::from_secs(20));
    c.wait_until_listening(Duration::from_secs(10));
    assert!(
        eventually(Duration::from_secs(5), || snapshot(&notes)
            .iter()
            .any(|n| has_line(n, "READY=1"))),
        "{}",
        dump(&snapshot(&notes), t0)
    );
    let all = snapshot(&notes);
    let down = all
        .iter()
        .position(|n| has_line(n, "STATUS=starting: the master is not running"))
        .unwrap_or_else(|| panic!("no STATUS for the master down:\n{}", dump(&all, t0)));
    let up_again = down
        + all[down..]
            .iter()
            .position(|n| has_line(n, "STATUS=starting: the master is loading"))
            .unwrap_or_else(|| panic!("no STATUS for its second start:\n{}", dump(&all, t0)));
    assert!(
        !all[down..up_again]
            .iter()
            .any(|n| n.text.contains("EXTEND_TIMEOUT_USEC")),
        "an extension while the master was not running:\n{}",
        dump(&all, t0)
    );
    assert!(
        all[up_again].text.contains("EXTEND_TIMEOUT_USEC=30000000"),
        "one at once when it starts again:\n{}",
        dump(&all, t0)
    );
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(Duration::from_secs(20)).code(), Some(0));
}

#[test]
fn usr2_sends_reloading_saying_upgrade_then_the_new_program_says_ready() {
    // The upgrade runs the binary at the launcher's own path again (the same file here): the
    // order of the messages is what systemd sees of any upgrade.
    let (mut c, notes, _dir) = notified_cluster(1, &[]);
    let t0 = Instant::now();
    let pid = c.child.id();
    let before_usec = monotonic_usec();
    let mark = c.mark();
    c.signal(libc::SIGUSR2);
    c.wait_for_after(mark, "upgraded in place", Duration::from_secs(60));
    let after_usec = monotonic_usec();
    let (all, r) = reloading_then_ready(&notes, t0);
    let text = &all[r].text;
    assert!(
        text.lines()
            .any(|l| l.starts_with("STATUS=upgrading in place")),
        "{text:?}"
    );
    let usec: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MONOTONIC_USEC="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("RELOADING=1 without MONOTONIC_USEC: {text:?}"));
    assert!(
        (before_usec..=after_usec).contains(&usec),
        "MONOTONIC_USEC={usec} not during the upgrade ({before_usec}..{after_usec})"
    );
    let ready = all[r..]
        .iter()
        .find(|n| has_line(n, "READY=1"))
        .expect("READY=1");
    assert!(ready.port_accepting, "READY=1 before the port accepted");
    assert!(
        ready
            .text
            .lines()
            .any(|l| l == "STATUS=2/2 ready, 0 queued"),
        "{:?}",
        ready.text
    );
    // systemd's MAINPID is still right: the same process.
    assert_eq!(c.child.id(), pid);
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(Duration::from_secs(20)).code(), Some(0));
}

#[test]
fn a_reload_that_upgrades_in_place_ends_ready_once_the_processes_restart_in_turn() {
    // spec: DEC-44: one SIGHUP taking proxyThreads by the upgrade and a change the processes
    // read: systemd hears RELOADING=1 and, last, READY=1 once the new program's rolling
    // restart (the master's 2 s start included) is over.
    let (mut c, notes, _dir) = notified_cluster(1, &[("SIM_START_DELAY_MS_m0", "2000")]);
    let mut config = c.config.clone();
    merge(
        &mut config,
        &serde_json::json!({"server": {"cluster": {"proxyThreads": 2}}, "library": {"v": 1}}),
    );
    write_config(&c.data_dir(), &config);
    let t0 = Instant::now();
    let mark = c.mark();
    c.signal(SIGHUP);
    c.wait_for_after(mark, "upgraded in place", Duration::from_secs(60));
    c.wait_for_after(mark, "rolling restart done", Duration::from_secs(60));
    let last_is_ready = |all: &[Note]| {
        all.iter()
            .rev()
            .find(|n| has_line(n, "READY=1") || has_line(n, "RELOADING=1"))
            .is_some_and(|n| has_line(n, "READY=1"))
    };
    assert!(
        eventually(Duration::from_secs(5), || last_is_ready(&snapshot(&notes))),
        "systemd is left reloading:\n{}",
        dump(&snapshot(&notes), t0)
    );
    let all = snapshot(&notes);
    let last_reloading = all
        .iter()
        .rposition(|n| has_line(n, "RELOADING=1"))
        .unwrap_or_else(|| panic!("no RELOADING=1:\n{}", dump(&all, t0)));
    let ready = &all[last_reloading..]
        .iter()
        .find(|n| has_line(n, "READY=1"))
        .expect("found above");
    assert!(
        ready.at - all[last_reloading].at >= Duration::from_millis(2000),
        "READY=1 came before the master's restart (2 s) was over:\n{}",
        dump(&all, t0)
    );
    assert!(
        ready
            .text
            .lines()
            .any(|l| l == "STATUS=2/2 ready, 0 queued"),
        "{:?}",
        ready.text
    );
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(Duration::from_secs(20)).code(), Some(0));
}
