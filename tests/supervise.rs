//! Supervision end to end: the real `fhircluster` running `fhirsmith-sim` processes on loopback.
//! Start order and readiness, what each child is given, tagged output, restarts with backoff,
//! giving up on a master that never gets ready, start-up failures, and the launcher's idle
//! memory. The orderly stop is in `tests/stop.rs`.
//!
//! Order is asserted on the launcher's own log lines (one stream, written in order); times only
//! with generous bounds.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

const SIGTERM: i32 = 15;

#[test]
fn the_master_is_ready_before_any_worker_starts_workers_start_one_at_a_time_and_only_then_the_port_listens(
) {
    // spec: LAUNCH-2, LAUNCH-3, LAUNCH-6, LAUNCH-7, LAUNCH-11
    let began = Instant::now();
    let mut c = cluster()
        .workers(2)
        .env("SIM_START_DELAY_MS_m0", "1500")
        .env("SIM_START_DELAY_MS_tx1", "700")
        .env("SIM_START_DELAY_MS_tx2", "700")
        .spawn();
    // Until the master is ready (1.5 s at the earliest) nothing accepts on the client port.
    loop {
        let master_ready_logged = c.line_index("m0: ready").is_some();
        if accepting(c.port) {
            assert!(
                began.elapsed() >= Duration::from_millis(1200),
                "the port accepted {:?} after the start, before the master could be ready",
                began.elapsed()
            );
            c.wait_for("m0: ready", secs(5));
            break;
        }
        if master_ready_logged && c.line_index("listening on port").is_some() {
            c.wait_until_listening(secs(5));
            break;
        }
        assert!(began.elapsed() < secs(20), "{}", c.log_lines().join("\n"));
        std::thread::sleep(Duration::from_millis(20));
    }
    c.wait_for("tx2: ready", secs(20));

    let started_master = c.must_index("m0: starting the master");
    assert!(
        c.log_lines()[started_master].contains("maxStartFailures 6"),
        "LAUNCH-11"
    );
    let m0_ready = c.must_index("m0: ready");
    let listening = c.must_index("listening on port");
    let tx1_started = c.must_index("tx1: started");
    let tx1_ready = c.must_index("tx1: ready");
    let tx2_started = c.must_index("tx2: started");
    assert!(
        m0_ready < listening,
        "the listener opens after the master is ready"
    );
    assert!(
        m0_ready < tx1_started,
        "no worker before the master is ready"
    );
    assert!(
        tx1_ready < tx2_started,
        "tx2 starts only once tx1 is ready:\n{}",
        c.log_lines().join("\n")
    );
    assert_eq!(c.get("/r4/metadata").status, 200);
}

#[test]
fn each_process_gets_its_role_code_port_environment_and_node_flags() {
    // spec: ROLE-1, ROLE-2, ROLE-3, ROLE-4, ROLE-5, ROLE-6, ROLE-7, ROLE-8, LAUNCH-12, DEC-19
    // The command is `node <FHIRsmith's folder>/server.js`, with a `node` of ours first on PATH
    // that runs the sim: the node flags then go where node takes them, after the program.
    let bin = fake_node_dir();
    let folder = fhirsmith_folder();
    let script = folder.path().join("server.js").display().to_string();
    let c = cluster()
        .workers(2)
        .command(&["node", &script])
        .env("PATH", &path_with(bin.path()))
        .arg("--")
        .arg("--max-old-space-size=300")
        .start();
    let data_dir = c.data_dir().display().to_string();
    for (n, (role, code)) in [("master", "m0"), ("tx-worker", "tx1"), ("tx-worker", "tx2")]
        .into_iter()
        .enumerate()
    {
        let port = c.internal + n as u16;
        let info = get_direct(port, "/sim/info").json();
        let ctx = format!("{code}: {info:#}");
        assert_eq!(info["role"], role, "{ctx}");
        assert_eq!(info["code"], code, "{ctx}");
        assert_eq!(info["port"], port, "{ctx}");
        assert_eq!(info["channel"], true, "{ctx}");
        assert_eq!(info["dataDir"], data_dir.as_str(), "{ctx}");
        let argv: Vec<&str> = info["argv"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let role_flag = format!("--role={role}");
        let code_flag = format!("--instance-code={code}");
        let port_flag = format!("--port={port}");
        for want in [
            "--max-old-space-size=300",
            "--expose-gc",
            script.as_str(),
            role_flag.as_str(),
            code_flag.as_str(),
            port_flag.as_str(),
        ] {
            assert!(argv.contains(&want), "argv lacks {want}: {ctx}");
        }
        let pos = |a: &str| argv.iter().position(|x| *x == a);
        assert!(
            pos("--expose-gc") < pos(&script) && pos("--max-old-space-size=300") < pos(&script),
            "node flags go before the script: {ctx}"
        );
        let env = &info["env"];
        assert_eq!(env["FHIRSMITH_ROLE"], role, "{ctx}");
        assert_eq!(env["FHIRSMITH_INSTANCE_CODE"], code, "{ctx}");
        assert_eq!(env["PORT"], port.to_string(), "{ctx}");
        assert_eq!(env["FHIRSMITH_DATA_DIR"], data_dir.as_str(), "{ctx}");
        assert_eq!(env["NODE_CHANNEL_FD"], "3", "{ctx}");
    }
    // Through the front door, a non-tx path reaches the master.
    let via_front = c.get("/sim/info");
    assert_eq!(via_front.status, 200);
    assert_eq!(via_front.json()["code"], "m0");
}

#[test]
fn a_config_instance_code_names_the_master_and_flags_reach_a_wrapper_in_the_environment() {
    // spec: ROLE-2, ROLE-4, ROLE-6, LAUNCH-12
    let c = cluster()
        .workers(1)
        .config(json!({"modules": {"tx": {"instanceCode": "alpha"}}}))
        .arg("--")
        .arg("--max-old-space-size=300")
        .start_codes(&["alpha", "tx1"]);
    let m = get_direct(c.internal, "/sim/info").json();
    assert_eq!(m["code"], "alpha", "{m:#}");
    let w = get_direct(c.internal + 1, "/sim/info").json();
    assert_eq!(
        w["code"], "tx1",
        "the config's code belongs to the master: {w:#}"
    );
    for info in [&m, &w] {
        let flags = info["env"]["FHIRCLUSTER_NODE_FLAGS"].as_str().unwrap_or("");
        assert!(
            flags.contains("--max-old-space-size=300") && flags.contains("--expose-gc"),
            "{info:#}"
        );
    }
}

#[test]
fn child_output_is_passed_on_tagged_with_the_instance_code() {
    // spec: LAUNCH-2 (the launcher's log), ROLE-4
    let mut c = cluster().workers(1).start();
    let m = c.wait_for("[m0] ", secs(10));
    let w = c.wait_for("[tx1] ", secs(10));
    assert!(m.starts_with("[m0] ") && m.contains("listening"), "{m}");
    assert!(w.starts_with("[tx1] ") && w.contains("listening"), "{w}");
}

#[test]
fn a_crashing_worker_is_restarted_with_a_growing_wait_and_the_master_untouched() {
    // spec: RESTART-1, RESTART-2, RESTART-4, RESTART-6, RESTART-10
    let c = cluster()
        .workers(2)
        .env("SIM_EXIT_AFTER_MS_tx1", "800")
        .start();
    let master_pid = c.logged_pid("m0").expect("the master's pid in the log");
    let tx2_pid = c.logged_pid("tx2").expect("tx2's pid in the log");
    let mut starts = vec![Instant::now()];
    let mut pids = vec![c.logged_pid("tx1").expect("tx1's pid")];
    for n in 2..=4 {
        c.wait_for_count("tx1: started", n, secs(20));
        starts.push(Instant::now());
        c.wait_for_count("tx1: ready", n, secs(10));
        // RESTART-6: same role, code and port; a new process.
        let info = get_direct(c.internal + 1, "/sim/info").json();
        assert_eq!(info["code"], "tx1", "{info:#}");
        assert_eq!(info["role"], "tx-worker", "{info:#}");
        assert_eq!(info["port"], c.internal + 1, "{info:#}");
        let pid = info["pid"].as_i64().unwrap_or(0) as i32;
        assert!(
            !pids.contains(&pid),
            "a restart is a new process: {pids:?} {pid}"
        );
        pids.push(pid);
    }
    let waits: Vec<String> = c
        .log_lines()
        .iter()
        .filter(|l| l.contains("tx1: starting again in"))
        .cloned()
        .collect();
    assert!(waits.len() >= 3, "{waits:?}");
    for (line, want) in waits.iter().zip(["in 1 s", "in 2 s", "in 4 s"]) {
        assert!(
            line.contains(want) && line.contains("failing"),
            "{line} lacks {want}"
        );
    }
    // Each gap is the run (0.8 s after ready) plus the wait: 1, 2, 4 s.
    for (i, want) in [1.0f64, 2.0, 4.0].into_iter().enumerate() {
        let gap = (starts[i + 1] - starts[i]).as_secs_f64();
        let lower = if i == 0 { want } else { want + 0.8 };
        assert!(
            gap >= lower - 0.3 && gap <= want + 0.8 + 3.0,
            "gap {} was {gap:.2} s, expected about {want} s + the run",
            i + 1
        );
    }
    // The master and the other worker were never touched.
    assert_eq!(c.line_indices("m0: started").len(), 1);
    assert_eq!(c.line_indices("tx2: started").len(), 1);
    assert!(alive(master_pid) && alive(tx2_pid));
    assert_eq!(
        get_direct(c.internal, "/sim/info").json()["pid"],
        master_pid
    );
    assert_eq!(c.get("/r4/metadata").status, 200);
}

#[test]
fn a_master_that_exits_after_ready_is_started_again_and_the_workers_keep_running() {
    // spec: RESTART-1, RESTART-9, RESTART-11, LAUNCH-6 (the listener stays)
    let once = tempfile::tempdir().expect("once dir");
    let mut c = cluster()
        .workers(2)
        .env("SIM_ONCE_DIR", &once.path().display().to_string())
        .env("SIM_EXIT_AFTER_MS_m0", "1500")
        .start();
    let workers = [
        c.logged_pid("tx1").expect("tx1 pid"),
        c.logged_pid("tx2").expect("tx2 pid"),
    ];
    let first_master = c.logged_pid("m0").expect("m0 pid");
    c.wait_for("m0: exited", secs(10));
    c.wait_for("m0: starting again in 1 s", secs(5));
    c.wait_for_count("m0: ready", 2, secs(10));
    let second_master = c.logged_pid("m0").expect("m0 pid");
    assert_ne!(first_master, second_master);
    assert!(
        workers.iter().all(|p| alive(*p)),
        "the workers kept running"
    );
    assert_eq!(c.line_indices("tx1: started").len(), 1);
    assert_eq!(c.line_indices("tx2: started").len(), 1);
    assert_eq!(
        get_direct(c.internal, "/sim/info").json()["pid"],
        second_master
    );
    assert_eq!(c.get("/sim/info").json()["code"], "m0");
}

#[test]
fn a_master_that_never_gets_ready_is_given_up_with_an_error_exit_1_and_nothing_listened() {
    // spec: RESTART-7, RESTART-3, LAUNCH-6, DEC-12, CONF-18 (a count other than 0)
    let began = Instant::now();
    let mut c = cluster()
        .workers(1)
        .config(json!({"server": {"cluster": {"maxStartFailures": 3}}}))
        .env("SIM_FAIL_AT_START_m0", "1")
        .spawn();
    let status = loop {
        assert!(!accepting(c.port), "something listened on the client port");
        if let Ok(Some(status)) = c.child.try_wait() {
            break status;
        }
        assert!(
            began.elapsed() < secs(30),
            "still running:\n{}",
            c.log_lines().join("\n")
        );
        std::thread::sleep(Duration::from_millis(25));
    };
    assert_eq!(status.code(), Some(1), "{}", c.log_lines().join("\n"));
    // Waits of 1 and 2 s between the three starts.
    assert!(
        began.elapsed() >= Duration::from_millis(2700),
        "{:?}",
        began.elapsed()
    );
    c.wait_output_end(secs(5));
    let error = c.must_index("ERROR");
    let line = &c.log_lines()[error];
    assert!(
        line.contains("maxStartFailures") && line.contains('3'),
        "{line}"
    );
    assert_eq!(c.line_indices("m0: started").len(), 3);
    assert!(c.line_index("tx1: started").is_none());
    assert!(c.line_index("listening on port").is_none());
}

#[test]
fn a_server_program_that_cannot_be_executed_is_retried_with_backoff_then_given_up() {
    // spec: RESTART-2, RESTART-7, DEC-12 (no hot loop on a command that can't start)
    use std::os::unix::fs::PermissionsExt;
    let bin = tempfile::tempdir().expect("temp bin dir");
    let server = bin.path().join("server");
    // Executable, so the start-up check passes, but its interpreter is missing: exec fails.
    std::fs::write(&server, "#!/nonexistent/interpreter\n").expect("write server");
    std::fs::set_permissions(&server, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let began = Instant::now();
    let mut c = cluster()
        .workers(1)
        .command(&[&server.display().to_string()])
        .config(json!({"server": {"cluster": {"maxStartFailures": 3}}}))
        .spawn();
    let status = c.wait_exit(secs(30));
    let took = began.elapsed();
    assert_eq!(status.code(), Some(1), "{}", c.log_lines().join("\n"));
    assert!(
        took >= Duration::from_millis(2700),
        "waits of 1 and 2 s: {took:?}"
    );
    c.wait_output_end(secs(5));
    let tries = c.line_indices("m0: could not start");
    assert_eq!(tries.len(), 3, "{}", c.log_lines().join("\n"));
    assert!(c.log_lines()[tries[0]].contains(&server.display().to_string()));
    assert!(c.line_index("ERROR").is_some());
    assert!(c.line_index("listening on port").is_none());
}

#[test]
fn the_launchers_own_memory_stays_small_when_idle() {
    // A master and two workers, idle: the launcher's resident set (printed for the report).
    let c = cluster().workers(2).start();
    for _ in 0..20 {
        assert_eq!(c.get("/r4/metadata").status, 200);
    }
    let kib = steady_rss(c.pid()) / 1024;
    eprintln!(
        "launcher idle VmRSS: {kib} KiB ({:.1} MiB)",
        kib as f64 / 1024.0
    );
    assert!(kib > 0 && kib <= 30 * 1024, "VmRSS {kib} KiB");
    // And its CPU while idle (status messages every second from three processes).
    let before = cpu_ticks(c.pid()).expect("the launcher's CPU time");
    // The 3 s measured is the check (CPU used over a span), not a wait for a state.
    std::thread::sleep(secs(3));
    let used = cpu_ticks(c.pid()).expect("the launcher's CPU time") - before;
    eprintln!("launcher idle CPU: {used} ticks (1/100 s) in 3 s");
    assert!(used <= 30, "{used} ticks of CPU in 3 s idle");
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, utime 14 and stime 15 (1-based) of the whole line.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

#[test]
fn readiness_comes_from_the_channel_even_when_health_and_requests_are_refused() {
    // spec: LAUNCH-3, LAUNCH-5
    let c = cluster()
        .workers(1)
        .env("SIM_REFUSE_HEALTH", "1")
        .env("SIM_REFUSE_m0", "1")
        .start();
    assert_eq!(get_direct(c.internal, "/health").status, 503);
    assert_eq!(get_direct(c.internal + 1, "/health").status, 503);
    // Both counted ready from their channel alone (`start` waited for it), the refusing master
    // included, and the front door is open.
    assert_eq!(get_direct(c.internal, "/r4/metadata").status, 503);
    assert!(c.log_lines().iter().any(|l| l.contains("m0: ready")));
    assert_ne!(c.get("/r4/metadata").status, 0);
}

#[test]
fn the_client_port_in_use_is_an_error_exit_1_and_every_process_stops() {
    // spec: DEC-12, LAUNCH-6, STOP-5
    let mut c = cluster()
        .workers(1)
        .env("SIM_START_DELAY_MS_m0", "1000")
        .spawn();
    // Taken after the start (one taken before stops the start: reliability_orphans.rs), while
    // the master takes 1 s to get ready.
    c.wait_for("m0: started", secs(10));
    let held = std::net::TcpListener::bind(("0.0.0.0", c.port)).expect("hold the client port");
    let status = c.wait_exit(secs(30));
    assert_eq!(status.code(), Some(1), "{}", c.log_lines().join("\n"));
    c.wait_output_end(secs(5));
    let line = &c.log_lines()[c.must_index("cannot listen")];
    assert!(
        line.contains("server.port") && line.contains(&c.port.to_string()),
        "{line}"
    );
    let pids: Vec<i32> = ["m0", "tx1"]
        .iter()
        .filter_map(|code| c.logged_pid(code))
        .collect();
    assert!(!pids.is_empty());
    assert!(
        wait_gone(&pids, secs(2)).is_empty(),
        "{pids:?} left running"
    );
    drop(held);
}

#[test]
fn zero_workers_runs_the_master_alone() {
    // spec: CONF-6, CONF-4, STOP-9
    let mut c = cluster().workers(0).start();
    assert_eq!(c.child_pids().len(), 1);
    let r = c.get("/r4/metadata");
    assert_eq!((r.status, r.served_by()), (200, "m0"));
    assert!(c.line_index("tx1:").is_none());
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(secs(20)).code(), Some(0));
}
