//! The control socket with the real binaries (#26.4): every action goes to a Unix socket in the
//! data directory (`fhircluster.sock`, mode 0660, the launcher's user and `controlGroup`), and
//! the HTTP admin listener only looks: `/upgrade` there is `404` naming the socket. `fhircluster
//! status` goes through the socket by default; another user is refused by the socket's mode
//! (EACCES) while a member of `controlGroup` gets through; the file goes at a clean stop; a
//! stale one (a launcher killed) is replaced at start, and a live launcher's is never taken.
//! The upgrade through the socket, and the socket kept across it: `tests/upgrade.rs`.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;
use serde_json::Value;

const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn socket_of(dir: &Path) -> PathBuf {
    dir.join("fhircluster.sock")
}

/// One request line on the control socket, its JSON answer.
fn control(dir: &Path, line: &str) -> Value {
    let mut s = UnixStream::connect(socket_of(dir)).expect("connect to the control socket");
    s.set_read_timeout(Some(secs(10))).expect("timeout");
    s.write_all(format!("{line}\n").as_bytes()).expect("send");
    let mut answer = String::new();
    s.read_to_string(&mut answer).expect("read");
    assert!(answer.ends_with('\n'), "one line: {answer:?}");
    serde_json::from_str(&answer).unwrap_or_else(|e| panic!("not JSON ({e}): {answer:?}"))
}

/// `fhircluster status --json --data-dir DIR` (no admin address), run as `as_user` (a
/// `setpriv` prefix) or as this user.
fn status_as(as_user: &[&str], dir: &Path) -> RunOutput {
    let mut cmd = match as_user.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(LAUNCHER);
            c
        }
        None => Command::new(LAUNCHER),
    };
    cmd.args(["status", "--json", "--data-dir"])
        .arg(dir)
        .current_dir(dir)
        .env_remove("FHIRSMITH_DATA_DIR");
    run_bounded(&mut cmd, secs(20))
}

pub(crate) fn status(dir: &Path) -> RunOutput {
    status_as(&[], dir)
}

/// The launcher's pid, as `status --json` says.
pub(crate) fn launcher_pid(out: &RunOutput) -> Option<i64> {
    let v: Value = serde_json::from_str(&out.stdout).ok()?;
    v["launcher"]["pid"].as_i64()
}

#[test]
fn actions_go_to_the_control_socket_the_admin_listener_only_looks_and_the_socket_goes_at_the_stop()
{
    // spec: DEC-42
    let admin = free_port();
    let mut c = cluster()
        .workers(1)
        .arg("--admin-address")
        .arg(&admin.to_string())
        .start();
    let dir = c.data_dir();
    let sock = socket_of(&dir);
    let meta = std::fs::symlink_metadata(&sock)
        .unwrap_or_else(|e| panic!("no control socket at {}: {e}", sock.display()));
    use std::os::unix::fs::FileTypeExt;
    assert!(meta.file_type().is_socket(), "{meta:?}");
    assert_eq!(meta.permissions().mode() & 0o777, 0o660, "mode");
    // SAFETY: plain getters.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    assert_eq!(
        (meta.uid(), meta.gid()),
        (uid, gid),
        "the launcher's user and group"
    );
    assert!(
        c.log_lines()
            .iter()
            .any(|l| l.contains("the control socket (status, upgrade, scale, restart) on")),
        "{}",
        c.log_lines().join("\n")
    );

    // `fhircluster status` with no address: through the socket.
    let out = status(&dir);
    assert_eq!(out.code, Some(0), "{}", out.all());
    assert_eq!(
        launcher_pid(&out),
        Some(i64::from(c.child.id() as i32)),
        "{}",
        out.all()
    );

    // The protocol: help lists the levels; a bad request gets a reason, and the socket serves on.
    let help = control(&dir, "help");
    let levels: Vec<(String, String)> = help["commands"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| (c["command"].to_string(), c["level"].to_string()))
        .collect();
    assert!(
        levels.contains(&("\"upgrade\"".into(), "\"action\"".into())),
        "{help}"
    );
    assert!(
        levels.contains(&("\"status\"".into(), "\"read\"".into())),
        "{help}"
    );
    let bad = control(&dir, "reboot now");
    assert!(
        bad["error"]
            .as_str()
            .is_some_and(|e| e.contains("unknown command")),
        "{bad}"
    );
    let state = control(&dir, "upgrade-state");
    assert_eq!(
        state["pid"].as_i64(),
        Some(i64::from(c.child.id() as i32)),
        "{state}"
    );
    assert_eq!(control(&dir, "status")["front"]["ready"], true);

    // The HTTP listener is read-only: no action there, whatever the method.
    let at = std::net::SocketAddr::from(([127, 0, 0, 1], admin));
    for method in ["POST", "GET"] {
        let r = request(at, method, "/upgrade", &[], b"");
        assert_eq!(r.status, 404, "{method} /upgrade: {}", r.text());
        let why = r.json()["error"].as_str().unwrap_or_default().to_string();
        assert!(why.contains("control socket"), "{method}: {why}");
    }
    assert!(
        !c.log_lines()
            .iter()
            .any(|l| l.contains("upgrading in place")),
        "an upgrade began from HTTP"
    );
    let r = request(at, "POST", "/status", &[], b"");
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, HEAD"));
    assert_eq!(admin_get(admin, "/status").status, 200);

    // A clean stop removes the file.
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(secs(30)).code(), Some(0));
    assert!(!sock.exists(), "the control socket is left after the stop");
    let out = status(&dir);
    assert_eq!(out.code, Some(2), "{}", out.all());
    assert!(out.stderr.contains("no control socket"), "{}", out.all());
}

/// A group made for the test, removed after it.
struct TempGroup {
    name: String,
    gid: u32,
}

impl TempGroup {
    fn new() -> TempGroup {
        let name = format!("fhcctl{}", std::process::id());
        let made = run_bounded(Command::new("groupadd").arg(&name), secs(20));
        assert_eq!(made.code, Some(0), "groupadd: {}", made.all());
        let entry = run_bounded(Command::new("getent").args(["group", &name]), secs(20));
        let gid = entry
            .stdout
            .split(':')
            .nth(2)
            .and_then(|g| g.trim().parse().ok())
            .unwrap_or_else(|| panic!("getent group {name}: {}", entry.all()));
        TempGroup { name, gid }
    }
}

impl Drop for TempGroup {
    fn drop(&mut self) {
        let _ = Command::new("groupdel")
            .arg(&self.name)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

#[test]
fn another_user_is_refused_by_the_sockets_mode_and_a_member_of_the_control_group_gets_through() {
    // spec: DEC-42
    // SAFETY: a plain getter.
    if unsafe { libc::geteuid() } != 0 {
        panic!("this test makes a group and runs a command as nobody: run it as root");
    }
    let group = TempGroup::new();
    let mut c = cluster()
        .workers(1)
        .config(serde_json::json!({"server": {"cluster": {"controlGroup": group.name}}}))
        .start();
    let dir = c.data_dir();
    // The directory open to all, so only the socket's own mode can refuse.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let meta = std::fs::metadata(socket_of(&dir)).expect("the control socket");
    assert_eq!(meta.gid(), group.gid, "the socket's group is controlGroup");
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);

    let nobody = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ];
    let out = status_as(&nobody, &dir);
    assert_eq!(out.code, Some(2), "{}", out.all());
    assert!(
        out.stderr.contains("permission denied"),
        "EACCES: {}",
        out.all()
    );
    // The connect itself refused: EACCES.
    assert!(
        out.stderr.contains(&format!("os error {}", libc::EACCES)),
        "{}",
        out.all()
    );

    let groups = format!("--groups={}", group.gid);
    let member = ["setpriv", "--reuid=65534", "--regid=65534", groups.as_str()];
    let out = status_as(&member, &dir);
    assert_eq!(out.code, Some(0), "a member of controlGroup: {}", out.all());
    assert_eq!(launcher_pid(&out), Some(i64::from(c.child.id() as i32)));

    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(secs(30)).code(), Some(0));
}

#[test]
fn a_stale_socket_is_replaced_at_start_and_a_live_launchers_is_never_taken() {
    // spec: DEC-42
    let mut a = cluster().workers(1).start();
    let dir = a.data_dir();
    let sock = socket_of(&dir);
    // A second launcher on the same data directory (on ports of its own): refused, naming it.
    let other = free_ports(3);
    let second = || {
        let mut cmd = launcher_command(&dir);
        cmd.args(["--port", &other.to_string()])
            .args(["--internal-port", &(other + 1).to_string()]);
        cmd
    };
    let out = run_bounded(&mut second(), secs(30));
    assert_eq!(out.code, Some(1), "{}", out.all());
    assert!(
        out.all()
            .contains("another launcher answers on the control socket"),
        "{}",
        out.all()
    );
    let still = status(&dir);
    assert_eq!(
        still.code,
        Some(0),
        "the first launcher's socket was taken: {}",
        still.all()
    );
    assert_eq!(launcher_pid(&still), Some(i64::from(a.child.id() as i32)));

    // Killed: the file stays, nobody answers on it.
    a.signal(SIGKILL);
    a.wait_exit(secs(10));
    assert!(sock.exists(), "a killed launcher leaves its socket file");
    assert_eq!(status(&dir).code, Some(2));
    // The next launcher replaces it.
    let log = tempfile::NamedTempFile::new().expect("log file");
    let mut b = second()
        .stdout(log.reopen().expect("log"))
        .stderr(log.reopen().expect("log"))
        .spawn()
        .expect("start the second launcher");
    let b_pid = i64::from(b.id() as i32);
    let mut last = None;
    let answered = eventually(secs(30), || {
        let out = status(&dir);
        let ok = launcher_pid(&out) == Some(b_pid);
        last = Some(out);
        ok
    });
    let text = std::fs::read_to_string(log.path()).unwrap_or_default();
    assert!(answered, "{last:?}\n{text}");
    assert!(text.contains("replacing the control socket"), "{text}");
    unsafe_kill(b.id() as i32, SIGTERM);
    let ended = wait_child(&mut b, secs(30));
    assert_eq!(ended, Some(0), "{text}");
    assert!(!sock.exists());
}

/// Waits for `child` to exit: its exit code (`None`: still running at the deadline, killed).
fn wait_child(child: &mut std::process::Child, timeout: Duration) -> Option<i32> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return s.code();
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn check_names_the_control_socket_and_a_group_that_does_not_exist_stops_the_check() {
    let dir = tempfile::tempdir().expect("data dir");
    let config = |group: &str| {
        serde_json::json!({"server": {"cluster": {
            "workers": 1, "command": [SIM], "controlGroup": group,
        }}, "modules": {"tx": {"endpoints": [{"path": "/r4"}]}}})
    };
    write_config(dir.path(), &config(""));
    let out = run_bounded(launcher_command(dir.path()).arg("--check"), secs(20));
    assert_eq!(out.code, Some(0), "{}", out.all());
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("control socket: "))
        .unwrap_or_else(|| panic!("no control socket line: {}", out.all()));
    assert!(
        line.contains("fhircluster.sock") && line.contains("mode 660"),
        "{line}"
    );
    assert!(out.stdout.contains("read-only: /livez") || out.stdout.contains("admin endpoint: off"));

    write_config(dir.path(), &config("no-such-group-fhc"));
    let out = run_bounded(launcher_command(dir.path()).arg("--check"), secs(20));
    assert_eq!(out.code, Some(1), "{}", out.all());
    assert!(
        out.stderr.contains("server.cluster.controlGroup"),
        "{}",
        out.all()
    );
    assert!(out.stderr.contains("no such group"), "{}", out.all());
}

#[test]
fn off_means_no_socket_and_a_place_the_launcher_cannot_write_is_a_warning_not_a_stop() {
    let mut c = cluster()
        .workers(1)
        .config(serde_json::json!({"server": {"cluster": {"controlSocket": "off"}}}))
        .start();
    assert!(!socket_of(&c.data_dir()).exists());
    let out = status(&c.data_dir());
    assert_eq!(out.code, Some(2), "{}", out.all());
    assert!(
        out.stderr.contains("the control socket is off"),
        "{}",
        out.all()
    );
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(secs(30)).code(), Some(0));

    // procfs takes no socket, not even root's: the launcher serves on without one, and says so.
    let mut c = cluster()
        .workers(1)
        .config(serde_json::json!({"server": {"cluster": {
            "controlSocket": "/proc/fhircluster-test.sock"
        }}}))
        .start();
    let line = c.wait_for("running without a control socket", secs(5));
    assert!(line.contains("WARN"), "{line}");
    assert_eq!(c.get("/r4/metadata").status, 200);
    c.signal(SIGTERM);
    assert_eq!(c.wait_exit(secs(30)).code(), Some(0));
}
