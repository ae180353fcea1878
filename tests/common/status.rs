//! Helpers for the status and memory tests: a launcher started through a wrapper (to join a
//! cgroup first), a second launcher on the same data directory, direct process requests,
//! /proc readings.

use super::*;

impl ClusterBuilder {
    /// Like `spawn`, but the launcher is started as `wrap... LAUNCHER args...` (a wrapper that
    /// `exec`s it keeps the pid, so `signal` and `child_pids` still work).
    pub fn spawn_wrapped(self, wrap: &[String]) -> Cluster {
        let dir = tempfile::tempdir().expect("temp data dir");
        let config = self.config_at(self.ports());
        launch(dir, config, &self.env, &self.args, wrap)
    }

    /// `spawn_wrapped`, then waits like `start`.
    pub fn start_wrapped(self, wrap: &[String]) -> Cluster {
        let codes = self.codes();
        let mut c = self.spawn_wrapped(wrap);
        for code in codes {
            c.wait_for(&format!("{code}: ready"), Duration::from_secs(20));
        }
        c.wait_until_listening(Duration::from_secs(10));
        c
    }
}

/// Starts a launcher on `dir` with `config` (written to config.json; ports from it).
pub fn launch(
    dir: tempfile::TempDir,
    config: Value,
    env: &[(String, String)],
    args: &[String],
    wrap: &[String],
) -> Cluster {
    write_config(dir.path(), &config);
    let port = config["server"]["port"].as_u64().expect("server.port") as u16;
    let internal = config["server"]["cluster"]["internalPort"]
        .as_u64()
        .expect("internalPort") as u16;
    let mut cmd = match wrap.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(LAUNCHER);
            c
        }
        None => Command::new(LAUNCHER),
    };
    cmd.arg("--data-dir")
        .arg(dir.path())
        .args(args)
        .env("RUST_LOG", "info")
        .env_remove("FHIRSMITH_WORKERS")
        .env_remove("PORT")
        .env_remove("FHIRSMITH_DATA_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("start fhircluster");
    let (tx, rx) = channel();
    let log = Arc::new(Mutex::new(Vec::new()));
    for pipe in [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    {
        let tx = tx.clone();
        let log = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if std::env::var_os("FHIRCLUSTER_TEST_ECHO").is_some() {
                    eprintln!("| {line}");
                }
                log.lock().map(|mut l| l.push(line.clone())).ok();
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    Cluster {
        child,
        port,
        internal,
        dir,
        lines: rx,
        log,
        config,
    }
}

impl Cluster {
    /// A new launcher on this one's data directory and config, once this one has exited.
    pub fn relaunch(mut self, env: &[(String, String)]) -> Cluster {
        self.wait_exit(Duration::from_secs(30));
        let placeholder = tempfile::tempdir().expect("temp dir");
        let dir = std::mem::replace(&mut self.dir, placeholder);
        launch(dir, self.config.clone(), env, &[], &[])
    }

    /// The internal address of process `index` (0 = m0, 1 = tx1 ...).
    pub fn process_addr_at(&self, index: u16) -> SocketAddr {
        let at = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        let home = self.internal + index;
        if index == 0 {
            return at(home);
        }
        // A worker's replacement started beside it keeps the spare port it started on (DEC-78):
        // after a rolling restart, worker n may listen elsewhere in the range.
        let code = format!("tx{index}");
        let is = |port: u16| {
            request(at(port), "GET", "/sim/info", &[], b"").json()["code"].as_str()
                == Some(code.as_str())
        };
        if is(home) {
            return at(home);
        }
        (self.internal..=self.internal + 32)
            .find(|p| *p != home && is(*p))
            .map_or(at(home), at)
    }

    /// A request straight to process `index`, bypassing the launcher.
    pub fn direct(&self, index: u16, method: &str, path: &str) -> Response {
        request(self.process_addr_at(index), method, path, &[], b"")
    }

    /// The pid of the process listening as `code`, from its own `/sim/info`.
    pub fn sim_pid(&self, index: u16) -> Option<i32> {
        self.direct(index, "GET", "/sim/info").json()["pid"]
            .as_i64()
            .map(|p| p as i32)
    }
}

/// A `kB` field of `/proc/<pid>/status` (`RssAnon`, `RssFile` ...), in bytes.
pub fn proc_status_bytes(pid: i32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        let kb: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kb * 1024)
    })
}

/// Asserts that `pid`'s RSS has grown from `before` (bytes) by less than `max_kb_each` KB for
/// each of `n` `what`s.
pub fn assert_rss_each_below(pid: i32, before: u64, n: usize, what: &str, max_kb_each: u64) {
    let after = proc_status_bytes(pid, "VmRSS").expect("the launcher's RSS");
    let grown = after.saturating_sub(before);
    let each_kb = grown / n as u64 / 1024;
    eprintln!("{n} {what}: {each_kb} KB each");
    assert!(
        each_kb < max_kb_each,
        "{n} {what} cost {each_kb} KB each ({} MB in all)",
        grown >> 20
    );
}

impl Cluster {
    /// Waits until the launcher's output has `n` lines containing `needle` (counting lines seen
    /// before the call, so a line that came early isn't missed).
    pub fn wait_for_nth(&self, needle: &str, n: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self
            .log_lines()
            .iter()
            .filter(|l| l.contains(needle))
            .count()
            < n
        {
            assert!(
                Instant::now() < deadline,
                "no {n} lines containing {needle:?} within {timeout:?}; output:\n{}",
                self.log_lines().join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
