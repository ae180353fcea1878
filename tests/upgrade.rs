//! The in-place upgrade (`kill -USR2`, #16) with the real binaries: the launcher runs from a
//! copy of `fhircluster` in a temporary directory; the file is replaced by a fresh copy (a
//! rename, so the inode changes) and the launcher told to upgrade, under a steady mixed load
//! (keep-alive and new connections, cache-id sessions, `$expand` in progress). Afterwards the
//! launcher's pid and every child's are the same, `/proc/<pid>/exe` is the new file, no request
//! failed or was refused, every cache-id session still reaches its issuer; ten upgrades in a row
//! leak no fd, no memory and no child. With `proxyThreads` 2 (children would die of
//! `PR_SET_PDEATHSIG` had a runtime worker forked them). The refusals leave the old program
//! serving: a missing binary, one whose `--check` fails, one that doesn't read the state format,
//! a config.json moving the processes (`internalPort`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;

/// The launcher's directory, holding its binary (`fhircluster`).
pub(crate) struct Bin {
    dir: tempfile::TempDir,
}

impl Bin {
    pub(crate) fn new() -> Bin {
        let b = Bin {
            dir: tempfile::tempdir().expect("temp dir"),
        };
        std::fs::copy(LAUNCHER, b.path()).expect("copy fhircluster");
        b
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path().join("fhircluster")
    }

    /// Puts `content` (a copy of the launcher, or a script) at the launcher's path by a rename:
    /// a new inode, as a package manager does.
    pub(crate) fn replace_with(&self, from: &Path) {
        let next = self.dir.path().join("fhircluster.next");
        std::fs::copy(from, &next).expect("copy the new binary");
        std::fs::rename(&next, self.path()).expect("rename over the launcher");
    }

    pub(crate) fn replace_with_script(&self, script: &str) {
        use std::os::unix::fs::PermissionsExt;
        let next = self.dir.path().join("script");
        std::fs::write(&next, script).expect("write script");
        std::fs::set_permissions(&next, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        self.replace_with(&next);
    }

    /// `sh -c 'exec <copy> "$@"'`: the launcher runs as the copy (the wrapper's pid, exec'd).
    pub(crate) fn wrap(&self) -> Vec<String> {
        let script = format!("shift; exec '{}' \"$@\"", self.path().display());
        vec!["sh".into(), "-c".into(), script, "sh".into()]
    }
}

pub(crate) fn exe_of(pid: i32) -> String {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.display().to_string())
        .unwrap_or_default()
}

fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

fn rss_kb(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// What a connection closed before a response reads as.
fn closed() -> Response {
    Response {
        status: 0,
        headers: Default::default(),
        body: Vec::new(),
    }
}

fn sorted(mut v: Vec<i32>) -> Vec<i32> {
    v.sort_unstable();
    v
}

/// What the load saw.
#[derive(Default)]
struct Seen {
    ok: AtomicU64,
    failed: Mutex<Vec<String>>,
    /// A keep-alive connection closed by the drain before the request sent on it was read:
    /// sent again on a new connection, as HTTP clients do for an idempotent request.
    resent: AtomicU64,
    /// The longest a quick request (not `$expand`) took: the pause a client saw.
    longest_ms: AtomicU64,
}

impl Seen {
    fn note(&self, what: &str, r: &Response, took: Duration) {
        if what != "expand" {
            self.longest_ms
                .fetch_max(took.as_millis() as u64, Ordering::Relaxed);
        }
        if r.status == 200 {
            self.ok.fetch_add(1, Ordering::Relaxed);
        } else {
            let mut f = self.failed.lock().expect("failed");
            f.push(format!("{what}: {} {}", r.status, r.text()));
        }
    }
}

/// The mixed load until `stop`: new connections, keep-alive connections, `$expand`, and a
/// request on each cache-id session checked to reach its issuer.
fn load(
    addr: std::net::SocketAddr,
    sessions: Vec<(String, String)>,
    stop: Arc<AtomicBool>,
    seen: Arc<Seen>,
) -> Vec<std::thread::JoinHandle<()>> {
    let mut threads = Vec::new();
    for kind in 0..4 {
        let (stop, seen, sessions) = (stop.clone(), seen.clone(), sessions.clone());
        threads.push(std::thread::spawn(move || {
            let mut conn: Option<Conn> = None;
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let t = Instant::now();
                match kind {
                    // New connections.
                    0 => seen.note("new", &request(addr, "GET", LOOKUP, &[], b""), t.elapsed()),
                    // `$expand`, slow, on new connections.
                    1 => seen.note(
                        "expand",
                        &request(addr, "GET", EXPAND, &[], b""),
                        t.elapsed(),
                    ),
                    // Cache-id sessions: each reaches its issuer.
                    2 => {
                        let (code, id) = &sessions[i % sessions.len()];
                        let r = request(addr, "GET", LOOKUP, &[("X-Cache-Id", id)], b"");
                        if r.status == 200 && r.served_by() != code {
                            seen.failed.lock().expect("failed").push(format!(
                                "session {id} served by {} not {code}",
                                r.served_by()
                            ));
                        }
                        seen.note("session", &r, t.elapsed());
                    }
                    // Keep-alive: one connection for many requests.
                    _ => {
                        let reused = conn.is_some();
                        let c = match conn.as_mut() {
                            Some(c) => c,
                            None => match Conn::open(addr) {
                                Ok(c) => conn.insert(c),
                                Err(e) => {
                                    seen.failed.lock().expect("f").push(format!("connect: {e}"));
                                    continue;
                                }
                            },
                        };
                        let sent = c.send("GET", LOOKUP, &[], b"", true);
                        let r = if sent.is_ok() { c.read() } else { closed() };
                        if r.status == 0 && reused {
                            // Closed before it answered: the drain's close of an idle
                            // keep-alive connection crossed the request. Send it again.
                            seen.resent.fetch_add(1, Ordering::Relaxed);
                            conn = None;
                            continue;
                        }
                        if r.header("connection")
                            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
                        {
                            conn = None;
                        }
                        seen.note("keep-alive", &r, t.elapsed());
                    }
                }
            }
        }));
    }
    threads
}

/// Sends USR2 and waits for the new program to serve.
fn upgrade(c: &Cluster) -> String {
    let mark = c.mark();
    unsafe_kill(c.child.id() as i32, libc::SIGUSR2);
    c.wait_for_after(mark, "upgraded in place", secs(60))
}

#[test]
fn ten_upgrades_under_load_keep_every_pid_and_fail_no_request() {
    let bin = Bin::new();
    let admin = admin_addr();
    let c = cluster()
        .workers(2)
        .config(serde_json::json!({"server": {"cluster": {
            "proxyThreads": 2,
            "adminAddress": admin.to_string(),
        }}}))
        .env("SIM_COST_EXPAND_MS", "300")
        .start_wrapped(&bin.wrap());
    let launcher = c.child.id() as i32;
    let children = sorted(c.child_pids());
    assert_eq!(children.len(), 3, "{children:?}");
    let guardian = c.guardian_pid();
    let sessions: Vec<(String, String)> = ["tx1", "tx2"]
        .iter()
        .map(|code| (code.to_string(), c.session_on(code)))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Seen::default());
    let threads = load(c.addr(), sessions, stop.clone(), seen.clone());
    wait_until("the load under way", secs(30), || {
        seen.ok.load(Ordering::Relaxed) > 20
    });
    let (fds_before, rss_before) = (fd_count(launcher), rss_kb(launcher));
    let mut pauses = Vec::new();
    for n in 1..=10 {
        bin.replace_with(Path::new(LAUNCHER));
        assert!(
            exe_of(launcher).ends_with("(deleted)"),
            "{}",
            exe_of(launcher)
        );
        let line = upgrade(&c);
        pauses.push(line);
        assert_eq!(c.child.id() as i32, launcher);
        assert_eq!(
            sorted(c.child_pids()),
            children,
            "after upgrade {n}\n{}",
            c.log_lines().join("\n")
        );
        assert_eq!(
            exe_of(launcher),
            bin.path().display().to_string(),
            "after upgrade {n}"
        );
        assert_eq!(
            c.guardian_pid(),
            guardian,
            "the guardian, after upgrade {n}"
        );
        let served = seen.ok.load(Ordering::Relaxed);
        wait_until("the load served on", secs(30), || {
            seen.ok.load(Ordering::Relaxed) > served + 10
        });
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("load thread");
    }
    let (fds_after, rss_after) = (fd_count(launcher), rss_kb(launcher));
    let failed = seen.failed.lock().expect("failed").clone();
    let log = c.log_lines().join("\n");
    assert!(
        failed.is_empty(),
        "{} failed: {:?}\n{log}",
        failed.len(),
        &failed[..failed.len().min(10)]
    );
    assert!(
        fds_after <= fds_before + 2,
        "fds {fds_before} -> {fds_after} after 10 upgrades"
    );
    assert!(
        rss_after < rss_before + 64 * 1024,
        "RSS {rss_before} kB -> {rss_after} kB after 10 upgrades"
    );
    // The upgrade is not a start: one launcherStarted at the master, and no event twice (the
    // counts of each upgrade's minute, closed at the handover, are each an event of their own).
    assert_eq!(log.matches("guardian pid").count(), 1, "{log}");
    let events = c.direct(0, "GET", "/sim/received").json()["events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let started = events
        .iter()
        .filter(|e| e["kind"] == "launcherStarted")
        .count();
    assert_eq!(started, 1, "{events:?}");
    let mut ids: Vec<u64> = events.iter().filter_map(|e| e["id"].as_u64()).collect();
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n, "an event arrived twice: {events:?}");
    assert_eq!(c.child_pids().len(), 3);
    let ok = seen.ok.load(Ordering::Relaxed);
    let longest = seen.longest_ms.load(Ordering::Relaxed);
    let resent = seen.resent.load(Ordering::Relaxed);
    println!("upgrade: 10 upgrades, {ok} requests, 0 failed, {resent} resent on a new connection, longest quick request {longest} ms (the pause a client saw)");
    for p in &pauses {
        println!("  {p}");
    }
    report_figures(
        "upgrade::ten_upgrades_under_load_keep_every_pid_and_fail_no_request",
        "10 in-place upgrades (USR2, binary replaced) under mixed load, proxyThreads 2",
        10,
        ok,
        failed.len() as u64,
        &format!("same pids, 0 failed, every cache-id to its issuer, longest pause {longest} ms"),
    );
}

/// A refused upgrade: one line naming the cause, and the same program serving on.
fn refused(bin: &Bin, c: &Cluster, needle: &str) {
    let launcher = c.child.id() as i32;
    let before = sorted(c.child_pids());
    let mark = c.mark();
    unsafe_kill(launcher, libc::SIGUSR2);
    let line = c.wait_for_after(mark, "upgrade refused", secs(60));
    assert!(line.contains(needle), "{line}");
    assert_eq!(sorted(c.child_pids()), before);
    assert_eq!(c.get(LOOKUP).status, 200);
    let _ = bin;
}

#[test]
fn a_missing_binary_a_failing_check_an_unknown_format_and_moved_processes_are_refused() {
    let bin = Bin::new();
    let c = cluster().workers(1).start_wrapped(&bin.wrap());
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Seen::default());
    let sessions = vec![("tx1".to_string(), c.session_on("tx1"))];
    let threads = load(c.addr(), sessions, stop.clone(), seen.clone());

    std::fs::remove_file(bin.path()).expect("remove the binary");
    refused(&bin, &c, "No such file");

    bin.replace_with_script(&format!(
        "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = --check ] && {{ echo 'bad setting' >&2; exit 1; }}; done\nexec '{LAUNCHER}' \"$@\"\n"
    ));
    refused(&bin, &c, "--check failed");

    bin.replace_with_script(&format!(
        "#!/bin/sh\n[ \"$1\" = --upgrade-formats ] && {{ echo 99; exit 0; }}\nexec '{LAUNCHER}' \"$@\"\n"
    ));
    refused(&bin, &c, "does not read state format 1");

    // A setting that says where the processes run: the upgrade could not take them over.
    bin.replace_with(Path::new(LAUNCHER));
    let mut moved = c.config.clone();
    let internal = moved["server"]["cluster"]["internalPort"]
        .as_u64()
        .expect("port");
    moved["server"]["cluster"]["internalPort"] = serde_json::json!(internal + 100);
    write_config(c.dir.path(), &moved);
    refused(&bin, &c, "server.cluster.internalPort");
    write_config(c.dir.path(), &c.config);

    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("load thread");
    }
    let failed = seen.failed.lock().expect("failed").clone();
    assert!(failed.is_empty(), "{failed:?}");
    assert!(seen.ok.load(Ordering::Relaxed) > 0);
    // Still the old program: its file is gone (replaced).
    let exe = exe_of(c.child.id() as i32);
    assert!(exe.ends_with("(deleted)"), "{exe}");
}

/// `fhircluster upgrade --data-dir DIR` (the control socket there), run elsewhere, with `extra`.
fn upgrade_cmd(dir: &Path, extra: &[&str]) -> RunOutput {
    let cwd = tempfile::tempdir().expect("cwd");
    let mut cmd = std::process::Command::new(LAUNCHER);
    cmd.args(["upgrade", "--data-dir"])
        .arg(dir)
        .args(extra)
        .current_dir(cwd.path())
        .env_remove("FHIRSMITH_DATA_DIR");
    run_bounded(&mut cmd, secs(120))
}

/// The control socket file's inode and mode.
fn socket_file(dir: &Path) -> (u64, u32) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let m = std::fs::symlink_metadata(dir.join("fhircluster.sock")).expect("the control socket");
    (m.ino(), m.permissions().mode() & 0o777)
}

#[test]
fn fhircluster_upgrade_waits_for_the_outcome_and_says_it() {
    // #26.4: through the control socket, which the upgrade keeps (the same file and fd); the
    // HTTP admin listener takes no upgrade.
    let bin = Bin::new();
    let admin = admin_addr();
    let c = cluster()
        .workers(1)
        .config(serde_json::json!({"server": {"cluster": {"adminAddress": admin.to_string()}}}))
        .start_wrapped(&bin.wrap());
    let launcher = c.child.id() as i32;
    let children = sorted(c.child_pids());
    let dir = c.data_dir();
    let before = socket_file(&dir);
    assert_eq!(before.1, 0o660);

    // Not over HTTP, nor by `--admin-address`: refused, nothing begins.
    bin.replace_with(Path::new(LAUNCHER));
    let r = request(admin, "POST", "/upgrade", &[], b"");
    assert_eq!(r.status, 404, "{}", r.text());
    let out = upgrade_cmd(&dir, &["--admin-address", &admin.port().to_string()]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("control socket"), "{out:?}");
    assert!(c.line_index("upgrading in place").is_none());

    let out = upgrade_cmd(&dir, &[]);
    assert_eq!(out.code, Some(0), "{out:?}\n{}", c.log_lines().join("\n"));
    assert!(out.stdout.contains("upgraded in place"), "{out:?}");
    assert_eq!(sorted(c.child_pids()), children);
    assert_eq!(exe_of(launcher), bin.path().display().to_string());
    assert_eq!(
        socket_file(&dir),
        before,
        "the same socket file across the upgrade"
    );
    // The new program answers on it (a socket bound anew would be a new file: a new inode).
    let mut s = std::os::unix::net::UnixStream::connect(dir.join("fhircluster.sock"))
        .expect("connect after the upgrade");
    std::io::Write::write_all(&mut s, b"upgrade-state\n").expect("send");
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut s, &mut answer).expect("read");
    assert!(answer.contains(&format!("\"pid\":{launcher}")), "{answer}");

    // A refusal: exit 1, the reason printed, the same program serving.
    std::fs::remove_file(bin.path()).expect("remove the binary");
    let out = upgrade_cmd(&dir, &[]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("No such file"), "{out:?}");
    assert_eq!(c.get(LOOKUP).status, 200);
    assert_eq!(sorted(c.child_pids()), children);
}

#[test]
fn a_cooldown_running_goes_on_after_the_upgrade() {
    // #16: the cooldowns are kept: a process answered 503 (its memory guard refusing), so the
    // front door steers around it for cooldownSeconds; the new program goes on doing so.
    let bin = Bin::new();
    let admin = admin_addr();
    let c = cluster()
        .workers(1)
        .env("SIM_REFUSE", "1")
        .config(serde_json::json!({"server": {"cluster": {
            "adminAddress": admin.to_string(),
            "cooldownSeconds": 600,
        }}}))
        .start_wrapped(&bin.wrap());
    let cooling = || -> Vec<String> {
        admin_get(admin.port(), "/metrics")
            .text()
            .lines()
            .filter(|l| {
                l.starts_with("fhircluster_process_state{") && l.ends_with("\"cooling_down\"} 1")
            })
            .map(str::to_string)
            .collect()
    };
    assert_eq!(cooling(), Vec::<String>::new(), "no cooldown before a 503");
    assert_eq!(c.get(LOOKUP).status, 503);
    let before = poll("a process cooling down", secs(10), || {
        Some(cooling()).filter(|c| !c.is_empty())
    });

    bin.replace_with(Path::new(LAUNCHER));
    let out = upgrade_cmd(&c.data_dir(), &[]);
    assert_eq!(out.code, Some(0), "{out:?}\n{}", c.log_lines().join("\n"));
    assert_eq!(
        cooling(),
        before,
        "the cooldown did not survive the upgrade"
    );
}

#[test]
fn a_stop_signal_during_the_upgrades_drain_gives_the_upgrade_up_and_stops_as_usual() {
    // #16 (and the signal table's Upgrading phase): TERM while the upgrade's drain waits for a
    // request in progress: no execve; the launcher stops as a TERM stops it, its processes too.
    let bin = Bin::new();
    let admin = admin_addr();
    let mut c = cluster()
        .workers(1)
        .config(serde_json::json!({"server": {"cluster": {
            "adminAddress": admin.to_string(),
            "drainSeconds": 8,
        }}}))
        .start_wrapped(&bin.wrap());
    let children = c.child_pids();
    let addr = c.addr();
    // A request the process never answers keeps the drain waiting (until drainSeconds).
    let hung = std::thread::spawn(move || {
        request(addr, "GET", "/r4/CodeSystem/$lookup?_sim_hang=1", &[], b"").status
    });
    wait_until("the request at work on a process", secs(10), || {
        admin_get(admin.port(), "/metrics")
            .text()
            .lines()
            .any(|l| l.starts_with("fhircluster_in_flight{") && l.ends_with(" 1"))
    });
    bin.replace_with(Path::new(LAUNCHER));
    let mark = c.mark();
    c.signal(libc::SIGUSR2);
    c.wait_for_after(mark, "draining", secs(30));
    c.signal(libc::SIGTERM);
    c.wait_for_after(mark, "the upgrade is given up; stopping as usual", secs(10));
    let status = c.wait_exit(secs(60));
    assert!(status.success(), "{status:?}\n{}", c.log_lines().join("\n"));
    assert!(
        !c.log_lines()
            .iter()
            .any(|l| l.contains("upgrade: executing")),
        "no execve after the stop signal:\n{}",
        c.log_lines().join("\n")
    );
    assert!(
        eventually(secs(10), || children.iter().all(|&p| !alive(p))),
        "processes left: {children:?}"
    );
    // The hung request was cut at the stop (drainSeconds are the upgrade's and the stop's).
    let _ = hung.join();
}

#[test]
fn a_failed_execve_leaves_the_old_program_serving_under_load() {
    // #16: the execve itself fails (a test hook makes it: nothing else reliably can, after the
    // new binary passed its checks): everything handed back, the old program serves on, the
    // processes untouched, no request failed; and it can be tried again, and stopped as usual.
    let bin = Bin::new();
    let mut c = cluster()
        .workers(1)
        .env("FHIRCLUSTER_TEST_EXEC_FAIL", "1")
        .env("SIM_COST_EXPAND_MS", "300")
        .start_wrapped(&bin.wrap());
    let launcher = c.child.id() as i32;
    let children = sorted(c.child_pids());
    let sessions = vec![("tx1".to_string(), c.session_on("tx1"))];
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Seen::default());
    let threads = load(c.addr(), sessions, stop.clone(), seen.clone());
    wait_until("the load under way", secs(30), || {
        seen.ok.load(Ordering::Relaxed) > 20
    });
    for _ in 0..2 {
        bin.replace_with(Path::new(LAUNCHER));
        let mark = c.mark();
        c.signal(libc::SIGUSR2);
        c.wait_for_after(mark, "upgrade: cannot execute", secs(60));
        let served = seen.ok.load(Ordering::Relaxed);
        wait_until("requests served again", secs(30), || {
            seen.ok.load(Ordering::Relaxed) > served + 10
        });
        assert_eq!(c.child.id() as i32, launcher);
        assert_eq!(sorted(c.child_pids()), children, "the processes untouched");
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("load thread");
    }
    let failed = seen.failed.lock().expect("failed").clone();
    assert!(
        failed.is_empty(),
        "{} failed: {:?}\n{}",
        failed.len(),
        &failed[..failed.len().min(10)],
        c.log_lines().join("\n")
    );
    c.signal(libc::SIGTERM);
    let status = c.wait_exit(secs(60));
    assert!(status.success(), "{status:?}");
    assert!(
        eventually(secs(10), || children.iter().all(|&p| !alive(p))),
        "processes left: {children:?}"
    );
}
