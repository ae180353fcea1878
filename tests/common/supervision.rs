//! Helpers for the settings/plan and supervision tests: bounded runs, direct requests, /proc
//! readings, a fake `node`, waits.

use super::*;

/// What a bounded run of the launcher printed and how it ended.
#[derive(Debug)]
pub struct RunOutput {
    /// None when it had to be killed at the time limit.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

impl RunOutput {
    /// Both streams, for assertion messages.
    pub fn all(&self) -> String {
        format!("--- stdout\n{}--- stderr\n{}", self.stdout, self.stderr)
    }
}

/// `fhircluster` with `--data-dir dir` and none of the environment that would change its
/// settings (so the tests see only what they give it).
pub fn launcher_command(dir: &Path) -> Command {
    let mut cmd = Command::new(LAUNCHER);
    cmd.arg("--data-dir")
        .arg(dir)
        .env("RUST_LOG", "info")
        .env_remove("FHIRSMITH_WORKERS")
        .env_remove("PORT")
        .env_remove("FHIRSMITH_HOST_PREFIX")
        .env_remove("FHIRSMITH_DATA_DIR");
    cmd
}

/// Runs `cmd` to its end, killing it after `timeout`; reads both streams whole.
pub fn run_bounded(cmd: &mut Command, timeout: Duration) -> RunOutput {
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the command");
    let read_all = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut s);
            }
            s
        })
    };
    let out = read_all(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = read_all(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = started + timeout;
    let code = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break status.code();
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    RunOutput {
        code,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        took: started.elapsed(),
    }
}

/// GET `path` straight from one process on 127.0.0.1:`port` (past the front door).
pub fn get_direct(port: u16, path: &str) -> Response {
    request(
        SocketAddr::from(([127, 0, 0, 1], port)),
        "GET",
        path,
        &[],
        b"",
    )
}

/// Whether something accepts connections on 127.0.0.1:`port`.
pub fn accepting(port: u16) -> bool {
    TcpStream::connect_timeout(
        &SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(200),
    )
    .is_ok()
}

/// The `VmRSS` of `pid` in KiB, from /proc.
pub fn rss_kib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// A directory holding an executable `node` that runs `fhirsmith-sim` with every argument it
/// was given: put it first on `PATH` to run a `node server.js` command for real.
pub fn fake_node_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp bin dir");
    let node = dir.path().join("node");
    std::fs::write(&node, format!("#!/bin/sh\nexec '{SIM}' \"$@\"\n")).expect("write fake node");
    std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o755))
        .expect("make fake node executable");
    dir
}

/// `PATH` with `dir` first.
pub fn path_with(dir: &Path) -> String {
    match std::env::var("PATH") {
        Ok(p) if !p.is_empty() => format!("{}:{p}", dir.display()),
        _ => dir.display().to_string(),
    }
}

impl Cluster {
    /// The launcher's own pid.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The positions of every log line containing `needle`.
    pub fn line_indices(&self, needle: &str) -> Vec<usize> {
        self.log_lines()
            .iter()
            .enumerate()
            .filter(|(_, l)| l.contains(needle))
            .map(|(i, _)| i)
            .collect()
    }

    /// The pid the launcher logged for `code`'s latest start (`tx1: started ... (pid N)`).
    pub fn logged_pid(&self, code: &str) -> Option<i32> {
        let prefix = format!("{code}: started ");
        self.log_lines()
            .iter()
            .rev()
            .find(|l| l.contains(&prefix))
            .and_then(|l| l.split("(pid ").nth(1))
            .and_then(|r| r.split(')').next())
            .and_then(|p| p.parse().ok())
    }
}

impl ClusterBuilder {
    /// Like `start`, waiting for these instance codes to be ready (a master with the config's
    /// `modules.tx.instanceCode`, say).
    pub fn start_codes(self, codes: &[&str]) -> Cluster {
        let mut c = self.spawn();
        for code in codes {
            c.wait_for(&format!("{code}: ready"), Duration::from_secs(20));
        }
        c.wait_until_listening(Duration::from_secs(10));
        c
    }
}

/// Polls until every pid is gone (or a zombie) or `timeout` passes; the pids still alive.
pub fn wait_gone(pids: &[i32], timeout: Duration) -> Vec<i32> {
    let deadline = Instant::now() + timeout;
    loop {
        let left: Vec<i32> = pids.iter().copied().filter(|p| alive(*p)).collect();
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Cluster {
    /// The position of the first log line containing `needle`; panics with the log if none.
    pub fn must_index(&self, needle: &str) -> usize {
        self.line_index(needle)
            .unwrap_or_else(|| panic!("no line {needle:?}:\n{}", self.log_lines().join("\n")))
    }
}
