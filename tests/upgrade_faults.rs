//! The in-place upgrade when something goes wrong during its handover (#25): a process killed
//! at each step of it, a step failing, the `execve` failing (the binary removed or made
//! unexecutable after it was checked), and a `SIGHUP` sent meanwhile. The launcher's test hook
//! (`FHIRCLUSTER_TEST_HANDOVER`, `src/test_hooks.rs`) pauses the handover at a named step
//! or makes it fail. Whatever happens, a refusal changes nothing: the cluster serves on, a
//! process that died is seen to have (logged, restarted as after any crash), the next upgrade
//! works, and SIGTERM stops the launcher with exit 0.

use std::path::{Path, PathBuf};

use crate::common::*;
use crate::upgrade::{exe_of, Bin};

/// The hook's directory, and the launcher's end of it.
pub(crate) struct Hook {
    pub(crate) dir: tempfile::TempDir,
}

impl Hook {
    pub(crate) fn new() -> Hook {
        Hook {
            dir: tempfile::tempdir().expect("hook dir"),
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The next handover pauses at `step` (until [`Hook::go`]).
    fn pause(&self, step: &str) {
        std::fs::write(self.file(&format!("pause-{step}")), b"").expect("pause file");
    }

    fn wait_at(&self, step: &str, c: &Cluster) {
        let at = self.file(&format!("at-{step}"));
        if !eventually(secs(60), || at.exists()) {
            panic!(
                "the handover never paused at {step}:\n{}",
                c.log_lines().join("\n")
            );
        }
    }

    fn go(&self, step: &str) {
        std::fs::remove_file(self.file(&format!("pause-{step}"))).expect("unpause");
    }

    /// The next handover fails at `step` (or the new program's setup step `step`).
    pub(crate) fn fail(&self, step: &str) {
        std::fs::write(self.file(&format!("fail-{step}")), b"").expect("fail file");
    }
}

fn start(bin: &Bin, hook: &Hook) -> Cluster {
    cluster()
        .workers(1)
        .env(
            "FHIRCLUSTER_TEST_HANDOVER",
            &hook.dir.path().display().to_string(),
        )
        .start_wrapped(&bin.wrap())
}

/// The process at `index` (0 the master), by its own word.
pub(crate) fn pid_at(c: &Cluster, index: u16) -> i32 {
    poll("the process's pid", secs(30), || c.sim_pid(index))
}

/// Requests sent once the cluster serves again after each fault, every one answered.
const AFTER_EACH: u64 = 20;

/// Every process answers through the front door, and each is the one at its place: then
/// [`AFTER_EACH`] requests all answered 200 (returns how many were sent).
pub(crate) fn serving(c: &Cluster, what: &str) -> u64 {
    wait_until(what, secs(60), || {
        c.get(LOOKUP).status == 200 && c.sim_pid(0).is_some() && c.sim_pid(1).is_some()
    });
    // A session on the worker reaches it: the front door knows it as it is now.
    let id = c.session_on("tx1");
    let r = c.request("GET", LOOKUP, &[("X-Cache-Id", &id)], b"");
    assert_eq!((r.status, r.served_by()), (200, "tx1"), "{what}");
    for _ in 0..AFTER_EACH {
        let r = c.get(LOOKUP);
        assert_eq!(r.status, 200, "{what}: {}", r.text());
    }
    AFTER_EACH + 1
}

/// The process at `index` has died and a new one serves in its place.
fn restarted(c: &Cluster, index: u16, was: i32, mark: usize) {
    let code = if index == 0 { "m0" } else { "tx1" };
    c.wait_for_after(mark, &format!("{code}: ready on port"), secs(60));
    let now = pid_at(c, index);
    assert_ne!(now, was, "{code} was not restarted");
    let log = c.log_lines()[mark..].join("\n");
    assert!(log.contains(&format!("{code}: ")), "{log}");
}

fn upgrade_ok(bin: &Bin, c: &Cluster) {
    bin.replace_with(Path::new(LAUNCHER));
    let mark = c.mark();
    c.signal(libc::SIGUSR2);
    c.wait_for_after(mark, "upgraded in place", secs(60));
    let exe = exe_of(c.child.id() as i32);
    assert_eq!(exe, bin.path().display().to_string());
    serving(c, "serving after the upgrade");
}

pub(crate) fn stops_with_0(c: &mut Cluster) {
    let children = c.child_pids();
    c.signal(libc::SIGTERM);
    let status = c.wait_exit(secs(60));
    assert!(status.success(), "{status:?}\n{}", c.log_lines().join("\n"));
    assert!(
        eventually(secs(10), || children.iter().all(|&p| !alive(p))),
        "processes left: {children:?}"
    );
}

#[test]
fn a_process_killed_at_any_step_of_the_handover_refuses_it_and_is_restarted() {
    // spec: DEC-41
    // #25 defect 2: a worker SIGKILLed during the handover left the earlier processes' handles
    // dropped (the master's channel closed, its exit never seen, every request a 502, no stop).
    // At each step, the master or the worker is killed: the upgrade is refused, the dead one
    // restarted, the cluster serves, and the next upgrade and the stop work.
    let bin = Bin::new();
    let hook = Hook::new();
    let mut c = start(&bin, &hook);
    serving(&c, "serving at the start");
    // (the step, the place of the process killed there: 0 the master, 1 the worker)
    let steps = [
        ("child-m0", 1),
        ("child-m0", 0),
        ("child-tx1", 1),
        ("child-tx1", 0),
        ("handed", 1),
        ("state", 0),
        ("exec", 1),
    ];
    let mut answered = 0;
    for (step, victim) in steps {
        bin.replace_with(Path::new(LAUNCHER));
        let was = pid_at(&c, victim);
        let mark = c.mark();
        hook.pause(step);
        c.signal(libc::SIGUSR2);
        hook.wait_at(step, &c);
        unsafe_kill(was, libc::SIGKILL);
        wait_until("the process killed", secs(10), || !alive(was));
        hook.go(step);
        let line = c.wait_for_after(mark, "upgrade refused", secs(60));
        assert!(line.contains("ended during the handover"), "{step}: {line}");
        restarted(&c, victim, was, mark);
        answered += serving(&c, &format!("serving after a process was killed at {step}"));
        let log = c.log_lines()[mark..].join("\n");
        assert!(
            !log.contains("upgrade: executing"),
            "{step}: executed\n{log}"
        );
    }
    upgrade_ok(&bin, &c);
    stops_with_0(&mut c);
    report_figures(
        "upgrade_faults::a_process_killed_at_any_step_of_the_handover_refuses_it_and_is_restarted",
        "USR2, the handover paused at each of its steps (each child taken, all taken, the state, \
         the execve) and the master or the worker SIGKILLed there",
        steps.len() as u64,
        answered,
        0,
        "each upgrade refused (ended during the handover), the dead one restarted, every request \
         after it answered; the next upgrade kept every pid; SIGTERM exit 0",
    );
}

#[test]
fn a_failing_step_or_execve_gives_everything_back() {
    // spec: DEC-41
    // #25 defect 2: a failure at any step after the drain (a process's fds lost, the state or
    // its memfd, the execve: the binary removed or made unexecutable after its check) leaves
    // the old program serving with every process as it was.
    use std::os::unix::fs::PermissionsExt;
    let bin = Bin::new();
    let hook = Hook::new();
    let mut c = start(&bin, &hook);
    serving(&c, "serving at the start");
    let launcher = c.child.id() as i32;

    // A process whose fds are lost can only be ended: it is, and restarted.
    bin.replace_with(Path::new(LAUNCHER));
    let was = pid_at(&c, 1);
    let mark = c.mark();
    hook.fail("child-tx1");
    c.signal(libc::SIGUSR2);
    let line = c.wait_for_after(mark, "upgrade refused", secs(60));
    assert!(line.contains("handing over tx1"), "{line}");
    restarted(&c, 1, was, mark);
    let mut answered = serving(&c, "serving after a process's fds were lost");

    // The rest changes nothing at all.
    let pids = (pid_at(&c, 0), pid_at(&c, 1));
    let unexecutable = |p: &Path| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    };
    let removed = |p: &Path| std::fs::remove_file(p).expect("remove the binary");
    type Spoil<'a> = Option<&'a dyn Fn(&Path)>;
    let cases: [(&str, bool, Spoil, &str); 4] = [
        ("state", false, None, "the step state failed"),
        ("memfd", false, None, "the step memfd failed"),
        ("exec", true, Some(&removed), "No such file"),
        ("exec", true, Some(&unexecutable), "Permission denied"),
    ];
    for (step, pause, spoil, needle) in cases {
        bin.replace_with(Path::new(LAUNCHER));
        let mark = c.mark();
        if pause {
            hook.pause(step);
        } else {
            hook.fail(step);
        }
        c.signal(libc::SIGUSR2);
        if let Some(spoil) = spoil {
            hook.wait_at(step, &c);
            spoil(&bin.path());
            hook.go(step);
        }
        let line = c.wait_for_after(mark, "serving on as before", secs(60));
        assert!(line.contains(needle), "{step}: {line}");
        answered += serving(&c, &format!("serving after {needle}"));
        assert_eq!(c.child.id() as i32, launcher);
        assert_eq!((pid_at(&c, 0), pid_at(&c, 1)), pids, "after {needle}");
        assert!(
            exe_of(launcher).ends_with("(deleted)"),
            "still the old program"
        );
    }
    upgrade_ok(&bin, &c);
    assert_eq!((pid_at(&c, 0), pid_at(&c, 1)), pids, "kept by the upgrade");
    stops_with_0(&mut c);
    report_figures(
        "upgrade_faults::a_failing_step_or_execve_gives_everything_back",
        "a handover step failing (a process's fds lost, the state, its memfd), the execve of a \
         binary removed or made unexecutable after its check",
        1 + cases.len() as u64,
        answered,
        0,
        "the process whose fds were lost ended and restarted; otherwise the same pids and the old \
         program serving, every request after it answered; the next upgrade worked; SIGTERM exit 0",
    );
}

#[test]
fn a_sighup_during_an_upgrade_is_carried_out_once_it_is_over() {
    // spec: DEC-41
    // #25: a SIGHUP during an upgrade was dropped ("ignored: an upgrade is under way"). Sent
    // during the drain or the handover it is deferred (one line) and carried out by the new
    // program once it serves; when the upgrade fails, by the old one right after. The reload
    // finds config.json changed outside server.cluster (each round), so its rolling restart
    // gives every process a new pid.
    let bin = Bin::new();
    let hook = Hook::new();
    let admin = admin_addr();
    let mut c = cluster()
        .workers(1)
        .config(serde_json::json!({"server": {"cluster": {
            "drainSeconds": 2,
            "adminAddress": admin.to_string(),
        }}}))
        .env(
            "FHIRCLUSTER_TEST_HANDOVER",
            &hook.dir.path().display().to_string(),
        )
        .start_wrapped(&bin.wrap());
    serving(&c, "serving at the start");
    // (where the SIGHUP comes: the drain or a step of the handover; whether the upgrade fails)
    for (during, fail) in [("drain", false), ("state", false), ("exec", true)] {
        let before = (pid_at(&c, 0), pid_at(&c, 1));
        let mut config = c.config.clone();
        merge(
            &mut config,
            &serde_json::json!({"library": {"round": during}}),
        );
        write_config(&c.data_dir(), &config);
        bin.replace_with(Path::new(LAUNCHER));
        let mark = c.mark();
        let mut hung = None;
        if during == "drain" {
            // A request the process never answers keeps the drain going (drainSeconds).
            let addr = c.addr();
            hung = Some(std::thread::spawn(move || {
                request(addr, "GET", "/r4/CodeSystem/$lookup?_sim_hang=1", &[], b"").status
            }));
            wait_until("the request at work on a process", secs(10), || {
                admin_get(admin.port(), "/metrics")
                    .text()
                    .lines()
                    .any(|l| l.starts_with("fhircluster_in_flight{") && l.ends_with(" 1"))
            });
        } else {
            hook.pause(during);
            if fail {
                hook.fail(during);
            }
        }
        c.signal(libc::SIGUSR2);
        if during == "drain" {
            c.wait_for_after(mark, "draining", secs(30));
        } else {
            hook.wait_at(during, &c);
        }
        c.signal(libc::SIGHUP);
        if during != "drain" {
            hook.go(during);
        }
        if fail {
            // Not executed: the old program serves on and takes the SIGHUP at once.
            c.wait_for_after(mark, "serving on as before", secs(60));
            c.wait_for_after(mark, "reloading the settings", secs(10));
        } else {
            c.wait_for_after(mark, "SIGHUP: deferred", secs(30));
            c.wait_for_after(mark, "upgraded in place", secs(60));
            c.wait_for_after(mark, "(deferred during the upgrade", secs(10));
        }
        wait_until("every process restarted by the reload", secs(120), || {
            c.sim_pid(0).is_some_and(|p| p != before.0)
                && c.sim_pid(1).is_some_and(|p| p != before.1)
        });
        serving(&c, "serving after the reload");
        let exe = exe_of(c.child.id() as i32);
        assert_eq!(exe.ends_with("(deleted)"), fail, "{during}: {exe}");
        if let Some(h) = hung {
            let _ = h.join();
        }
    }
    stops_with_0(&mut c);
}

#[test]
fn a_stop_signal_during_the_handover_gives_the_upgrade_up_and_stops() {
    // #25: a SIGTERM that came after the drain, while the processes were being handed over,
    // was lost with the old program's signal handlers at the execve: the new program served on
    // and never stopped. It now gives the upgrade up, and the launcher stops as usual.
    let bin = Bin::new();
    let hook = Hook::new();
    let mut c = start(&bin, &hook);
    serving(&c, "serving at the start");
    let children = c.child_pids();
    bin.replace_with(Path::new(LAUNCHER));
    let mark = c.mark();
    hook.pause("exec");
    c.signal(libc::SIGUSR2);
    hook.wait_at("exec", &c);
    c.signal(libc::SIGTERM);
    hook.go("exec");
    c.wait_for_after(mark, "SIGTERM: the upgrade is given up", secs(30));
    let status = c.wait_exit(secs(60));
    assert!(status.success(), "{status:?}\n{}", c.log_lines().join("\n"));
    let log = c.log_lines()[mark..].join("\n");
    assert!(!log.contains("upgrade: executing"), "{log}");
    assert!(
        eventually(secs(10), || children.iter().all(|&p| !alive(p))),
        "processes left: {children:?}"
    );
}
