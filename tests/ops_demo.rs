//! `fhircluster --demo` with the real binaries: it runs the simulated server in a temporary data
//! directory of its own (`$TMPDIR/fhircluster-demo-<pid>`), which is gone once it has stopped;
//! a data directory given (`--data-dir`) is used instead and kept.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

const SIGTERM: i32 = 15;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The demo on free ports with one worker, `TMPDIR` pointing at `tmp`; its admin endpoint on
/// the port after the worker's (the demo's own 9100 could be another test's).
fn demo(tmp: &Path, extra: &[&str]) -> (Child, u16) {
    let port = free_ports(4);
    let child = Command::new(LAUNCHER)
        .args(["--demo", "--workers", "1", "--port"])
        .arg(port.to_string())
        .arg("--admin-address")
        .arg((port + 3).to_string())
        .args(extra)
        .env("TMPDIR", tmp)
        .env("RUST_LOG", "info")
        .env_remove("FHIRSMITH_DATA_DIR")
        .env_remove("FHIRSMITH_WORKERS")
        .env_remove("PORT")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start fhircluster --demo");
    (child, port)
}

fn stop(mut child: Child) {
    unsafe_kill(child.id() as i32, SIGTERM);
    assert!(
        eventually(secs(30), || matches!(child.try_wait(), Ok(Some(_)))),
        "the demo did not stop"
    );
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0));
}

/// Nothing of the demo's is left in `TMPDIR`.
fn assert_empty(tmp: &Path) {
    let left: Vec<_> = std::fs::read_dir(tmp)
        .expect("read TMPDIR")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}

#[test]
fn the_demo_removes_its_temporary_data_directory_when_it_stops() {
    let tmp = tempfile::tempdir().expect("TMPDIR");
    let (child, port) = demo(tmp.path(), &[]);
    let dir = tmp.path().join(format!("fhircluster-demo-{}", child.id()));
    assert!(
        eventually(secs(30), || get_direct(port, "/r4/metadata").status == 200),
        "the demo never served on {port}"
    );
    assert!(dir.is_dir(), "the demo runs in {}", dir.display());
    // `fhircluster status` can be tried on it: the demo's own config.json gives it an admin
    // endpoint (9100 when free; this test's flag moves it to a free port), and that answers.
    let config: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("config.json")).expect("the demo's config.json"),
    )
    .expect("JSON");
    assert!(
        config["server"]["cluster"]["adminAddress"]
            .as_u64()
            .is_some(),
        "{config}"
    );
    assert!(
        eventually(secs(10), || get_direct(port + 3, "/status").status == 200),
        "the demo's admin endpoint never answered"
    );
    assert!(
        dir.join("databases").is_dir(),
        "its events database is there: {}",
        dir.display()
    );
    stop(child);
    assert!(!dir.exists(), "{} left behind", dir.display());
    assert_empty(tmp.path());
}

#[test]
fn a_data_directory_given_to_the_demo_is_used_and_kept() {
    let tmp = tempfile::tempdir().expect("TMPDIR");
    let data = tempfile::tempdir().expect("data dir");
    let data_arg = data.path().display().to_string();
    let (child, port) = demo(tmp.path(), &["--data-dir", &data_arg]);
    assert!(
        eventually(secs(30), || get_direct(port, "/r4/metadata").status == 200),
        "the demo never served on {port}"
    );
    stop(child);
    assert!(
        data.path().join("databases").is_dir(),
        "the data directory given is kept, with what the demo wrote"
    );
    assert_empty(tmp.path());
}

/// README's first command on a machine where 9100 is taken (a node_exporter's default): the
/// demo still starts, with its admin endpoint on a free port.
#[test]
fn the_demo_starts_when_9100_is_taken_and_its_admin_endpoint_answers_elsewhere() {
    // Held by this test, or already by someone else: either way the demo must not need it.
    let _held = std::net::TcpListener::bind("127.0.0.1:9100");
    let tmp = tempfile::tempdir().expect("TMPDIR");
    let port = free_ports(3);
    let child = Command::new(LAUNCHER)
        .args(["--demo", "--workers", "1", "--port"])
        .arg(port.to_string())
        .env("TMPDIR", tmp.path())
        .env_remove("FHIRSMITH_DATA_DIR")
        .env_remove("FHIRSMITH_WORKERS")
        .env_remove("PORT")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start fhircluster --demo");
    let dir = tmp.path().join(format!("fhircluster-demo-{}", child.id()));
    assert!(
        eventually(secs(30), || get_direct(port, "/r4/metadata").status == 200),
        "the demo never served on {port}"
    );
    let config: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("config.json")).expect("the demo's config.json"),
    )
    .expect("JSON");
    let admin = config["server"]["cluster"]["adminAddress"]
        .as_u64()
        .expect("an admin port") as u16;
    assert_ne!(admin, 9100, "{config}");
    assert!(
        eventually(secs(10), || get_direct(admin, "/status").status == 200),
        "the demo's admin endpoint never answered on {admin}"
    );
    stop(child);
    assert_empty(tmp.path());
}
