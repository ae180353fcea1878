//! What the new program sets up after an in-place upgrade's `execve` (and after a reload that
//! upgrades by itself) never takes the service down (DEC-70, DEC-71): the listeners for a
//! changed `server.port` or `adminAddress` are bound by the old program first (a port another
//! program holds refuses the upgrade, nothing changed), and what still fails after the `execve`
//! is a `WARNING`, the launcher serving on with the same processes. Each routine trigger with
//! the real binary (the control socket's file removed, a `controlGroup` the service user is not
//! in, a port held by another program for `adminAddress` or `server.port`, a link in the socket's
//! place), and a fault injected at every setup step of the new program through the test hook
//! (`FHIRCLUSTER_TEST_HANDOVER`, `src/test_hooks.rs`).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::PathBuf;

use serde_json::{json, Value};

use crate::common::*;
use crate::ops_control::{launcher_pid, status};
use crate::upgrade_faults::{pid_at, serving, stops_with_0, Hook};

/// The launcher's pid and its processes', which every round must leave as they were.
fn pids(c: &Cluster) -> (i32, i32, i32) {
    (c.child.id() as i32, pid_at(c, 0), pid_at(c, 1))
}

/// config.json changed by `patch`, merged over what it says now.
fn reconfigure(c: &mut Cluster, patch: Value) {
    merge(&mut c.config, &patch);
    write_config(&c.data_dir(), &c.config);
}

fn socket_of(c: &Cluster) -> PathBuf {
    c.data_dir().join("fhircluster.sock")
}

/// `fhircluster status` through the control socket names this launcher.
fn status_names_the_launcher(c: &Cluster, what: &str) {
    let out = status(&c.data_dir());
    assert_eq!(
        launcher_pid(&out),
        Some(i64::from(c.child.id())),
        "{what}: {}",
        out.all()
    );
}

/// `sig`, then the upgrade done (`upgraded in place`): the log since, and the requests served.
fn upgraded(c: &Cluster, sig: i32, what: &str) -> (String, u64) {
    let mark = c.mark();
    c.signal(sig);
    c.wait_for_after(mark, "upgraded in place", secs(90));
    let answered = serving(c, what);
    (c.log_lines()[mark..].join("\n"), answered)
}

/// A listening socket held by "another program" (this test): every interface, so the
/// launcher's `[::]` or `0.0.0.0` can't be had on its port either.
fn held_port() -> std::net::TcpListener {
    std::net::TcpListener::bind("0.0.0.0:0").expect("hold a port")
}

#[test]
fn the_control_socket_removed_then_an_upgrade_or_an_upgrading_reload_serves_on_with_a_new_one() {
    // spec: DEC-70 — #39 defect 1 (a): `chmod 660 …/fhircluster.sock: No such file or
    // directory` ended the new program, and the guardian stopped every process.
    let mut c = cluster().workers(1).start();
    let mut answered = serving(&c, "serving at the start");
    let before = pids(&c);
    for (round, sig) in [("USR2", libc::SIGUSR2), ("SIGHUP", libc::SIGHUP)] {
        std::fs::remove_file(socket_of(&c)).expect("remove the control socket");
        if sig == libc::SIGHUP {
            // A reload that upgrades by itself.
            reconfigure(&mut c, json!({"server": {"cluster": {"proxyThreads": 2}}}));
        }
        let (log, n) = upgraded(&c, sig, &format!("serving after {round}"));
        answered += n;
        assert!(log.contains("is gone: making a new one"), "{round}: {log}");
        assert_eq!(pids(&c), before, "{round}: the same processes");
        let meta = std::fs::symlink_metadata(socket_of(&c)).expect("a new control socket");
        assert_eq!(meta.permissions().mode() & 0o777, 0o660, "{round}");
        status_names_the_launcher(&c, round);
    }
    stops_with_0(&mut c);
    report_figures(
        "upgrade_setup::the_control_socket_removed_then_an_upgrade_or_an_upgrading_reload_serves_on_with_a_new_one",
        "the control socket's file removed, then USR2; removed again, then a SIGHUP that \
         upgrades by itself (proxyThreads changed)",
        2,
        answered,
        0,
        "the new program warned and made a new socket (0660, `fhircluster status` through it); \
         the same launcher and process pids, every request answered; SIGTERM exit 0",
    );
}

#[test]
fn a_reload_to_a_port_another_program_holds_is_refused_and_the_service_serves_on() {
    // spec: DEC-70 — #39 defect 1 (c), (d): the new program closed the listener in force, then
    // failed to bind the new port (`ERROR server.port …: cannot listen: Address already in
    // use`), and the launcher exited 1 with every process stopped.
    let admin = admin_addr();
    let mut c = cluster()
        .workers(1)
        .config(json!({"server": {"cluster": {"adminAddress": admin.to_string()}}}))
        .start();
    let mut answered = serving(&c, "serving at the start");
    let launcher = c.child.id();
    let (port, held) = (c.port, held_port());
    let taken = held.local_addr().expect("held").port();
    let admin_held = std::net::TcpListener::bind("127.0.0.1:0").expect("hold an admin port");
    let admin_taken = admin_held.local_addr().expect("held");
    let rounds = [
        ("server.port", json!({"server": {"port": taken}})),
        (
            "server.cluster.adminAddress",
            json!({"server": {"port": port, "cluster": {"adminAddress": admin_taken.to_string()}}}),
        ),
    ];
    for (setting, patch) in rounds {
        reconfigure(&mut c, patch);
        let mark = c.mark();
        c.signal(libc::SIGHUP);
        let line = c.wait_for_after(mark, "upgrade refused", secs(60));
        assert!(
            line.contains(setting) && line.contains("cannot listen"),
            "{setting}: {line}"
        );
        // The rest of the reload is applied: the servers read server.port, so they restart.
        c.wait_for_after(mark, "rolling restart done", secs(120));
        answered += serving(&c, &format!("serving after {setting} refused"));
        assert_eq!(c.child.id(), launcher);
        assert_eq!(admin_get(admin.port(), "/livez").status, 200, "{setting}");
    }
    // Once the ports are free, the next reload takes both, on the listeners bound before the
    // execve.
    reconfigure(&mut c, json!({"server": {"port": taken}}));
    drop((held, admin_held));
    let (log, n) = upgraded_on(&mut c, taken);
    answered += n;
    assert!(log.contains("bound before the upgrade"), "{log}");
    assert_eq!(c.child.id(), launcher);
    assert_eq!(admin_get(admin_taken.port(), "/livez").status, 200);
    stops_with_0(&mut c);
    report_figures(
        "upgrade_setup::a_reload_to_a_port_another_program_holds_is_refused_and_the_service_serves_on",
        "SIGHUP with server.port, then adminAddress, changed to a port another program holds; \
         then both freed and SIGHUP again",
        2,
        answered,
        0,
        "each upgrade refused before the execve (server.port / adminAddress: cannot listen), the \
         same launcher serving on its listeners (the rest of the reload applied: the servers, \
         which read server.port too, restarted in turn); freed, the reload moved both, the new \
         program serving on the listeners the old one bound",
    );
}

/// SIGHUP, the upgrade done, and the cluster serving on `port` (once the servers, which read
/// server.port, were restarted when it changed): the log since, the requests.
fn upgraded_on(c: &mut Cluster, port: u16) -> (String, u64) {
    let mark = c.mark();
    c.signal(libc::SIGHUP);
    c.wait_for_after(mark, "upgraded in place", secs(90));
    if c.port != port {
        c.wait_for_after(mark, "rolling restart done", secs(120));
    }
    c.port = port;
    let answered = serving(c, &format!("serving on {port}"));
    (c.log_lines()[mark..].join("\n"), answered)
}

#[test]
fn a_control_group_the_service_user_is_not_in_refuses_the_reloads_upgrade() {
    // spec: DEC-70 — #39 defect 1 (b): the new program could not give the socket to the group
    // and ended. The launcher runs as nobody (so a group can be one it is not in); its `--check`,
    // run by the old program before anything is given up, now refuses the group.
    // SAFETY: a plain getter.
    if unsafe { libc::geteuid() } != 0 {
        panic!("this test runs the launcher as nobody: run it as root");
    }
    // The data directory opened to nobody, then the launcher run as nobody.
    let wrap: Vec<String> = [
        "sh",
        "-c",
        "chmod 0777 \"$3\" && exec setpriv --reuid=65534 --regid=65534 --clear-groups \"$@\"",
        "sh",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut c = cluster().workers(1).start_wrapped(&wrap);
    let answered = serving(&c, "serving at the start");
    let before = pids(&c);
    reconfigure(
        &mut c,
        json!({"server": {"cluster": {"controlGroup": "4321"}}}),
    );
    let mark = c.mark();
    c.signal(libc::SIGHUP);
    let line = c.wait_for_after(mark, "upgrade refused", secs(60));
    assert!(line.contains("controlGroup"), "{line}");
    let answered = answered + serving(&c, "serving after the refusal");
    assert_eq!(pids(&c), before);
    let meta = std::fs::symlink_metadata(socket_of(&c)).expect("the control socket");
    assert_eq!(meta.gid(), 65534, "the socket's group as it was");
    stops_with_0(&mut c);
    report_figures(
        "upgrade_setup::a_control_group_the_service_user_is_not_in_refuses_the_reloads_upgrade",
        "the launcher run as nobody; SIGHUP with controlGroup set to a group nobody is not in",
        1,
        answered,
        0,
        "the upgrade refused before the execve (the new binary's --check names controlGroup); \
         the same pids, the socket as it was, every request answered",
    );
}

#[test]
fn an_upgrade_never_changes_what_a_link_in_the_control_sockets_place_points_to() {
    // spec: DEC-71 — #39 defect 4: the upgrade `chmod`ed (and `chown`ed) whatever the socket's
    // path pointed to: a 0600 file behind a link became 0660 and the control group's.
    let mut c = cluster()
        .workers(1)
        .config(json!({"server": {"cluster": {"controlGroup": "4321"}}}))
        .start();
    let mut answered = serving(&c, "serving at the start");
    let before = pids(&c);
    let elsewhere = tempfile::tempdir().expect("dir");
    let target = elsewhere.path().join("secret");
    std::fs::write(&target, b"not the launcher's").expect("write");
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let was = std::fs::metadata(&target).expect("target");
    std::fs::remove_file(socket_of(&c)).expect("remove the socket");
    std::os::unix::fs::symlink(&target, socket_of(&c)).expect("link");
    let (log, n) = upgraded(&c, libc::SIGUSR2, "serving after the upgrade");
    answered += n;
    let now = std::fs::metadata(&target).expect("target");
    assert_eq!(now.permissions().mode() & 0o777, 0o600, "{log}");
    assert_eq!((now.uid(), now.gid()), (was.uid(), was.gid()), "{log}");
    let link = std::fs::symlink_metadata(socket_of(&c)).expect("the link");
    assert!(
        link.file_type().is_symlink(),
        "the link itself left as it is"
    );
    assert!(
        log.contains("no longer the socket this launcher made"),
        "{log}"
    );
    assert_eq!(pids(&c), before);
    stops_with_0(&mut c);
    report_figures(
        "upgrade_setup::an_upgrade_never_changes_what_a_link_in_the_control_sockets_place_points_to",
        "fhircluster.sock replaced by a link to a 0600 file, then USR2 (controlGroup set)",
        1,
        answered,
        0,
        "the file's mode and owner unchanged, the link left as it is (a WARNING; no control \
         socket until the path is freed); the same pids, every request answered",
    );
}

#[test]
fn a_fault_at_every_setup_step_after_the_execve_leaves_the_service_serving() {
    // spec: DEC-70 — #39 defect 1: any error in the new program's setup ended it. Each step
    // fails once (the hook), after an upgrade that needs it: the new program warns and serves
    // on with the same processes, and what it could not take waits for the next reload.
    let hook = Hook::new();
    let admin = admin_addr();
    let mut c = cluster()
        .workers(1)
        .config(json!({"server": {"cluster": {
            "adminAddress": admin.to_string(),
            "pidFile": "fhircluster.pid",
            "accessLog": "json",
            "accessLogPath": "access.log",
        }}}))
        .env(
            "FHIRCLUSTER_TEST_HANDOVER",
            &hook.dir.path().display().to_string(),
        )
        .start();
    let mut answered = serving(&c, "serving at the start");
    let mut before = pids(&c);
    let new_admin = admin_addr();
    let new_port = free_port();
    // (the step, what asks for the upgrade, the change it takes, what the WARNING says): a
    // SIGHUP round is a reload that upgrades by itself (proxyThreads changed).
    let threads = |n: u32| json!({"server": {"cluster": {"proxyThreads": n}}});
    let steps = [
        ("setup-control-file", "USR2", json!({}), "making a new one"),
        (
            "setup-control-permit",
            "SIGHUP",
            threads(2),
            "kept with its group and mode as they were",
        ),
        (
            "setup-pid-file",
            "SIGHUP",
            threads(1),
            "serving on without the pid file",
        ),
        (
            "setup-access-log",
            "USR2",
            json!({}),
            "no access log until a reload opens it",
        ),
        (
            "setup-listen",
            "USR2",
            json!({"server": {"port": new_port}}),
            "kept as it was",
        ),
        (
            "setup-admin",
            "USR2",
            json!({"server": {"cluster": {"adminAddress": new_admin.to_string()}}}),
            "kept as it was",
        ),
    ];
    for (step, by, change, needle) in &steps {
        reconfigure(&mut c, change.clone());
        hook.fail(step);
        let sig = if *by == "USR2" {
            libc::SIGUSR2
        } else {
            libc::SIGHUP
        };
        let (log, n) = upgraded(&c, sig, &format!("serving after {step} failed ({by})"));
        answered += n;
        assert!(
            log.lines()
                .any(|l| l.contains("WARN") && l.contains(needle)),
            "{step}: {log}"
        );
        assert_eq!(pids(&c), before, "{step}: the same processes");
        status_names_the_launcher(&c, step);
        assert_eq!(admin_get(admin.port(), "/livez").status, 200, "{step}");
        if *step == "setup-listen" {
            // What was kept is recorded as in force: the next reload takes the new port.
            answered += upgraded_on(&mut c, new_port).1;
            before = pids(&c);
        }
    }
    // And the address kept for the admin endpoint, the same way.
    answered += upgraded_on(&mut c, new_port).1;
    assert_eq!(admin_get(new_admin.port(), "/livez").status, 200);
    assert_eq!(pids(&c), before);
    stops_with_0(&mut c);
    report_figures(
        "upgrade_setup::a_fault_at_every_setup_step_after_the_execve_leaves_the_service_serving",
        "a fault at each setup step of the new program after the execve (USR2, or a SIGHUP that \
         upgrades by itself): the control socket's file, its group and mode, the pid file, the \
         access log, a changed server.port, a changed adminAddress; then SIGHUP",
        steps.len() as u64,
        answered,
        0,
        "each a WARNING, the same pids, every request answered, status through the control \
         socket, the admin endpoint up; the kept port and admin address recorded as in force, \
         so the next reload moved both",
    );
}

#[test]
fn idle_control_connections_beyond_the_cap_neither_keep_status_out_nor_hold_descriptors() {
    // spec: DEC-72, DEC-54 — #39: the control socket's connections were neither capped nor
    // counted: each idle one held a descriptor for 10 s, as many as a client opened.
    const CAP: usize = 16;
    let mut c = cluster().workers(1).start();
    let launcher = c.child.id() as i32;
    status_names_the_launcher(&c, "at the start");
    let baseline = fd_count(launcher);
    let idle: Vec<_> = (0..CAP * 4)
        .map(|_| std::os::unix::net::UnixStream::connect(socket_of(&c)).expect("connect"))
        .collect();
    // Answered once every connection before it was accepted (the backlog is first in, first
    // out), and well within the 10 s an idle connection may wait.
    let started = std::time::Instant::now();
    status_names_the_launcher(&c, "with idle connections over the cap");
    let took = started.elapsed();
    assert!(took < secs(5), "{took:?}");
    let held = fd_count(launcher);
    assert!(
        held <= baseline + CAP + 4,
        "{held} descriptors with {} idle connections, {baseline} before",
        idle.len()
    );
    let opened = idle.len() as u64;
    drop(idle);
    stops_with_0(&mut c);
    report_figures(
        "upgrade_setup::idle_control_connections_beyond_the_cap_neither_keep_status_out_nor_hold_descriptors",
        "64 idle connections to the control socket (4 times its cap of 16), then `fhircluster \
         status`",
        opened,
        0,
        0,
        &format!(
            "status answered in {:.0} ms; the launcher held {} descriptors more than before, \
             not 64",
            took.as_secs_f64() * 1000.0,
            held.saturating_sub(baseline)
        ),
    );
}

fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[test]
fn a_reload_moving_the_listener_to_another_address_on_the_same_port_serves_on() {
    // spec: DEC-70 — the same port on another address can't be bound while the listener in
    // force listens: the new program closes it first, and binds it again should the new one
    // fail (a fault injected there).
    let hook = Hook::new();
    let mut c = cluster()
        .workers(1)
        .env(
            "FHIRCLUSTER_TEST_HANDOVER",
            &hook.dir.path().display().to_string(),
        )
        .start();
    let mut answered = serving(&c, "serving at the start");
    let before = pids(&c);
    let port = c.port;
    let loopback = json!({"server": {"cluster": {"listenAddress": "127.0.0.1"}}});
    let every = json!({"server": {"cluster": {"listenAddress": null}}});
    // The third round changes nothing in config.json: the setting kept is recorded as in
    // force, so the reload tries the move again.
    for (to, fail, needle) in [
        (
            loopback,
            false,
            format!("listening on port {port} on 127.0.0.1"),
        ),
        (
            every,
            true,
            "kept as it was, listening on 127.0.0.1".to_string(),
        ),
        (
            json!({}),
            false,
            format!("listening on port {port} on every interface"),
        ),
    ] {
        reconfigure(&mut c, to);
        if fail {
            hook.fail("setup-listen");
        }
        let (log, n) = upgraded(&c, libc::SIGHUP, &format!("serving after {needle}"));
        answered += n;
        assert!(log.contains(&needle), "{needle}: {log}");
        assert_eq!(pids(&c), before, "{needle}: the same processes");
    }
    stops_with_0(&mut c);
    report_figures(
        "upgrade_setup::a_reload_moving_the_listener_to_another_address_on_the_same_port_serves_on",
        "SIGHUP with listenAddress set to 127.0.0.1 on the same port, then back to every \
         interface with the new bind made to fail (after the old listener was closed)",
        1,
        answered,
        0,
        "moved in place; the failed move bound 127.0.0.1 again (a WARNING, the setting recorded \
         as in force, no upgrade again at once), and the next reload moved it; the same pids, \
         every request answered",
    );
}
