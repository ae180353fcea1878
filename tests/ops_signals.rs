//! Every common signal, sent to the real launcher running `fhirsmith-sim` processes: none ends
//! it by accident. `USR1`, `WINCH`, `ALRM` and `PIPE` leave it serving with the same
//! processes, each (but `PIPE`) logged as ignored with its reason (`USR2` upgrades in place:
//! `tests/upgrade.rs`); `HUP` restarts the processes
//! in turn; `QUIT` stops like `TERM`; a second stop signal during the drain cuts it short; signals
//! while the master starts, and while the processes are being stopped, are logged and change
//! nothing. After every stop no process the launcher started is left running. README's and
//! `--help`'s signal tables are the launcher's own (`signals::TABLE`).

use crate::common;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;
use fhircluster::signals::{Sig, TABLE};
use serde_json::json;

const SIGPIPE: i32 = 13;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The launcher's children, sorted.
fn children(c: &Cluster) -> Vec<i32> {
    let mut v = c.child_pids();
    v.sort_unstable();
    v
}

/// The cluster serves a tx request and a master path.
fn assert_serving(c: &Cluster, when: &str) {
    let r = c.get("/r4/metadata");
    assert_eq!(r.status, 200, "{when}: tx: {}", r.text());
    let r = c.get("/dashboard");
    assert_eq!(r.status, 200, "{when}: master path: {}", r.text());
}

/// Stops the launcher with SIGTERM: exit 0 and none of `pids` left.
fn stop_and_check_nothing_left(mut c: Cluster, pids: &[i32]) {
    c.signal(Sig::Term.number());
    let status = c.wait_exit(secs(30));
    assert_eq!(status.code(), Some(0), "{}", c.log_lines().join("\n"));
    let left = wait_gone(pids, secs(5));
    assert!(left.is_empty(), "still running after the stop: {left:?}");
}

#[test]
fn usr1_winch_alrm_and_pipe_are_ignored_and_the_same_processes_serve_on() {
    let mut c = cluster().workers(1).start();
    let before = children(&c);
    assert_eq!(before.len(), 2, "{before:?}");
    for (sig, why) in [
        (Sig::Usr1, "nothing to reopen"),
        (Sig::Winch, "nothing to resize"),
        (Sig::Alrm, "ignored"),
    ] {
        let mark = c.mark();
        c.signal(sig.number());
        let line = c.wait_for_after(mark, &format!("{sig}: ignored"), secs(10));
        assert!(line.contains(why), "{line}");
        assert_serving(&c, sig.name());
        assert_eq!(children(&c), before, "after {sig}");
    }
    // SIGPIPE has no line of its own: a signal sent after it (WINCH, a higher number, so it
    // can't be delivered first) is logged only if the launcher survived it.
    let mark = c.mark();
    c.signal(SIGPIPE);
    c.signal(Sig::Winch.number());
    c.wait_for_after(mark, "SIGWINCH: ignored", secs(10));
    assert_serving(&c, "SIGPIPE");
    assert_eq!(children(&c), before, "after SIGPIPE");
    assert!(
        before.iter().all(|&p| alive(p)),
        "{before:?}:\n{}",
        c.log_lines().join("\n")
    );
    c.wait_for("m0: ready", secs(1));
    stop_and_check_nothing_left(c, &before);
}

#[test]
fn hup_restarts_every_process_in_turn_and_leaves_none_of_the_old_ones() {
    let c = cluster().workers(1).start();
    let before = children(&c);
    let mark = c.mark();
    // A change the processes read (config.json outside server.cluster).
    let mut config = c.config.clone();
    merge(
        &mut config,
        &serde_json::json!({"library": {"reloaded": 1}}),
    );
    write_config(&c.data_dir(), &config);
    c.signal(Sig::Hup.number());
    c.wait_for_after(mark, "SIGHUP: reloading the settings", secs(10));
    c.wait_for_after(mark, "rolling restart done", secs(30));
    let left = wait_gone(&before, secs(5));
    assert!(left.is_empty(), "old processes still running: {left:?}");
    let after = children(&c);
    assert_eq!(after.len(), 2, "{after:?}");
    assert_serving(&c, "after SIGHUP");
    stop_and_check_nothing_left(c, &after);
}

#[test]
fn quit_stops_like_term_workers_first_then_the_master() {
    // spec: STOP-1, STOP-5, STOP-6, STOP-9 (SIGQUIT, fhircluster's own)
    let mut c = cluster().workers(2).start();
    let pids = children(&c);
    c.signal(Sig::Quit.number());
    let status = c.wait_exit(secs(30));
    assert_eq!(status.code(), Some(0), "{}", c.log_lines().join("\n"));
    assert!(c.line_index("SIGQUIT: stopping").is_some());
    let m0 = c.must_index("m0: stopping (SIGTERM)");
    assert!(c.must_index("tx1: exited") < m0 && c.must_index("tx2: exited") < m0);
    assert!(c.line_index("draining").is_some_and(|d| d < m0));
    assert!(wait_gone(&pids, secs(5)).is_empty());
}

/// A request that never gets an answer (the sim's `_sim_hang`), held open on its own connection.
fn hanging_request(c: &Cluster) -> TcpStream {
    let mut s = TcpStream::connect(c.addr()).expect("connect");
    s.write_all(b"GET /r4/metadata?_sim_hang=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("send");
    s
}

/// `first` begins the stop with a request hanging and `drainSeconds` 120; `second` during the
/// drain ends it at once.
fn a_second_signal_cuts_the_drain_short(first: Sig, second: Sig) {
    // spec: STOP-4 (cut short before drainSeconds, on a second signal), STOP-5, STOP-6
    let admin = free_port();
    let mut c = cluster()
        .workers(1)
        .config(json!({"server": {"cluster": {"drainSeconds": 120}}}))
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start();
    let pids = children(&c);
    let _held = hanging_request(&c);
    assert!(
        eventually(secs(10), || front_in_flight(admin) >= 1),
        "the hanging request never reached a process"
    );
    c.signal(first.number());
    c.wait_for("draining", secs(10));
    let began = Instant::now();
    c.signal(second.number());
    let status = c.wait_exit(secs(60));
    let took = began.elapsed();
    assert_eq!(status.code(), Some(0), "{}", c.log_lines().join("\n"));
    assert!(
        took < secs(30),
        "the second {second} did not cut the 120 s drain short: {took:?}"
    );
    let line = &c.log_lines()[c.must_index(&format!("{second} again: stopping now"))];
    assert!(line.contains("drain is cut short"), "{line}");
    assert!(
        c.line_index(&format!("{first}: stopping")).is_some(),
        "{}",
        c.log_lines().join("\n")
    );
    // The processes still stop in order after it.
    let m0 = c.must_index("m0: stopping (SIGTERM)");
    assert!(c.must_index("tx1: exited") < m0);
    assert!(wait_gone(&pids, secs(5)).is_empty());
}

/// Requests the front door has at work on the processes, from the launcher's own `/status`.
fn front_in_flight(admin: u16) -> u64 {
    let r = admin_get(admin, "/status");
    let v: serde_json::Value = serde_json::from_str(&r.text()).unwrap_or_default();
    v["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["frontInFlight"].as_u64())
        .sum()
}

#[test]
fn a_second_sigterm_or_sigint_during_the_drain_stops_at_once() {
    a_second_signal_cuts_the_drain_short(Sig::Term, Sig::Int);
}

#[test]
fn a_second_sigquit_during_a_drain_begun_by_sigint_stops_at_once() {
    a_second_signal_cuts_the_drain_short(Sig::Int, Sig::Quit);
}

#[test]
fn signals_while_the_master_starts_are_logged_and_it_starts_on() {
    let mut c = cluster()
        .workers(1)
        .env("SIM_START_DELAY_MS_m0", "5000")
        .spawn();
    c.wait_for("m0: started", secs(10));
    for (sig, needle) in [
        (Sig::Usr1, "SIGUSR1: ignored"),
        (Sig::Usr2, "SIGUSR2: ignored"),
        (Sig::Winch, "SIGWINCH: ignored"),
        (Sig::Alrm, "SIGALRM: ignored"),
        (Sig::Hup, "SIGHUP: ignored: the master is not ready yet"),
    ] {
        let mark = c.mark();
        c.signal(sig.number());
        c.wait_for_after(mark, needle, secs(10));
    }
    assert!(
        c.line_index("listening on port").is_none(),
        "the master's start delay is 5 s; the signals took longer:\n{}",
        c.log_lines().join("\n")
    );
    c.wait_for("tx1: ready", secs(30));
    c.wait_until_listening(secs(10));
    assert_serving(&c, "after the start");
    let pids = children(&c);
    stop_and_check_nothing_left(c, &pids);
}

#[test]
fn signals_while_the_processes_stop_are_logged_and_the_stop_goes_on() {
    // spec: STOP-8
    let mut c = cluster()
        .workers(1)
        .config(json!({"server": {"cluster": {"killSeconds": 3}}}))
        .env("SIM_IGNORE_SIGTERM_tx1", "1")
        .start();
    let pids = children(&c);
    c.signal(Sig::Term.number());
    c.wait_for("tx1: stopping (SIGTERM)", secs(10));
    let mark = c.mark();
    c.signal(Sig::Usr1.number());
    c.signal(Sig::Int.number());
    c.wait_for_after(mark, "SIGUSR1: ignored", secs(5));
    c.wait_for_after(
        mark,
        "SIGINT: ignored: already stopping the processes",
        secs(5),
    );
    let status = c.wait_exit(secs(30));
    assert_eq!(status.code(), Some(0), "{}", c.log_lines().join("\n"));
    let killed = &c.log_lines()[c.must_index("tx1: exited")];
    assert!(killed.contains("SIGKILL"), "{killed}");
    assert!(wait_gone(&pids, secs(5)).is_empty());
}

#[test]
fn readme_and_help_carry_the_launchers_signal_table() {
    let readme = crate_file("README.md");
    let help = run_bounded(std::process::Command::new(LAUNCHER).arg("--help"), secs(20));
    assert_eq!(help.code, Some(0), "{}", help.all());
    for (sig, what) in TABLE {
        let row = format!("| {sig} | {what} |");
        assert!(readme.contains(&row), "README.md lacks the row {row:?}");
        assert!(
            help.stdout.contains(sig) && help.stdout.contains(what),
            "--help lacks {sig}: {what}\n{}",
            help.stdout
        );
    }
}
