//! The cluster builder over the real binaries, the running cluster and its captured output.

use super::*;

pub struct ClusterBuilder {
    /// None: `workers` left out of config.json, so the launcher sizes the cluster itself.
    pub(super) workers: Option<u32>,
    pub(super) config: Value,
    pub(super) env: Vec<(String, String)>,
    pub(super) args: Vec<String>,
    pub(super) command: Option<Vec<String>>,
    /// The admin API on the port right after the workers': the run has room for no worker
    /// more (DEC-21), so no spare port either.
    pub(super) admin_after_workers: bool,
}

pub fn cluster() -> ClusterBuilder {
    ClusterBuilder {
        workers: Some(2),
        config: json!({}),
        env: Vec::new(),
        args: Vec::new(),
        command: None,
        admin_after_workers: false,
    }
}

/// Merges `patch` into `base` (objects recursively, anything else replaced).
pub fn merge(base: &mut Value, patch: &Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (b, p) => *b = p.clone(),
    }
}

impl ClusterBuilder {
    pub fn workers(mut self, n: u32) -> Self {
        self.workers = Some(n);
        self
    }

    /// Leaves `server.cluster.workers` out: the launcher sizes the cluster from the machine
    /// (at most 14 workers fit the test's ports).
    pub fn workers_unset(mut self) -> Self {
        self.workers = None;
        self
    }

    /// The config.json for a cluster on the ports from `base` (the client port, then the
    /// internal ones), the test's patch merged over these defaults.
    pub(super) fn config_at(&self, base: u16) -> Value {
        let command = self
            .command
            .clone()
            .unwrap_or_else(|| vec![SIM.to_string()]);
        let mut config = json!({
            "server": {
                "port": base,
                "cluster": {
                    "internalPort": base + 1,
                    "command": command,
                    "statusSeconds": 1,
                    "killSeconds": 5
                }
            },
            "modules": { "tx": { "endpoints": [ { "path": "/r4" } ] } }
        });
        if let Some(n) = self.workers {
            config["server"]["cluster"]["workers"] = json!(n);
            if self.admin_after_workers {
                config["server"]["cluster"]["adminAddress"] = json!(base + 2 + n as u16);
            }
        }
        merge(&mut config, &self.config);
        config
    }

    /// Free ports for this cluster: the client port, the master's and each worker's.
    pub(super) fn ports(&self) -> u16 {
        let extra = u16::from(self.admin_after_workers);
        free_ports(self.workers.map_or(PORT_BLOCK, |n| n as u16 + 2 + extra))
    }

    /// The instance codes `start` waits for.
    pub(super) fn codes(&self) -> Vec<String> {
        let n = self
            .workers
            .expect("start() waits for a known worker count: use spawn() with workers_unset()");
        std::iter::once("m0".to_string())
            .chain((1..=n).map(|n| format!("tx{n}")))
            .collect()
    }

    /// Adds to config.json (merged over the test defaults).
    pub fn config(mut self, patch: Value) -> Self {
        merge(&mut self.config, &patch);
        self
    }

    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.to_string(), v.to_string()));
        self
    }

    pub fn arg(mut self, a: &str) -> Self {
        self.args.push(a.to_string());
        self
    }

    /// The admin API on the port right after the last worker's (`internal + workers + 1`):
    /// the ports leave room for no worker more (DEC-21).
    pub fn admin_after_workers(mut self) -> Self {
        self.admin_after_workers = true;
        self
    }

    /// The server command instead of `fhirsmith-sim`.
    pub fn command(mut self, argv: &[&str]) -> Self {
        self.command = Some(argv.iter().map(|s| s.to_string()).collect());
        self
    }

    /// Starts the launcher; does not wait for anything.
    pub fn spawn(self) -> Cluster {
        self.spawn_wrapped(&[])
    }

    /// Starts the launcher and waits until every process is ready and the listener is open.
    pub fn start(self) -> Cluster {
        let codes = self.codes();
        let mut c = self.spawn();
        for code in codes {
            c.wait_for(&format!("{code}: ready"), Duration::from_secs(20));
        }
        c.wait_until_listening(Duration::from_secs(10));
        c
    }
}

pub fn write_config(dir: &Path, config: &Value) {
    std::fs::write(
        dir.join("config.json"),
        serde_json::to_string_pretty(config).expect("config json"),
    )
    .expect("write config.json");
}

pub struct Cluster {
    pub child: Child,
    pub port: u16,
    pub internal: u16,
    pub dir: tempfile::TempDir,
    pub(super) lines: Receiver<String>,
    pub(super) log: Arc<Mutex<Vec<String>>>,
    pub config: Value,
}

impl Cluster {
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// Waits for a line of the launcher's output containing `needle`; panics with the whole log
    /// when it doesn't come in time.
    pub fn wait_for(&mut self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        // Lines already seen count too.
        if let Some(l) = self.log_lines().into_iter().find(|l| l.contains(needle)) {
            return l;
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return l,
                Ok(_) => {}
                Err(_) => panic!(
                    "no line containing {needle:?} within {timeout:?}; output:\n{}",
                    self.log_lines().join("\n")
                ),
            }
        }
    }

    /// How many lines the launcher has printed so far: take it before an action, then
    /// `wait_for_after` waits only for lines printed after that moment (a line that comes
    /// before the wait begins still counts).
    pub fn mark(&self) -> usize {
        self.log_lines().len()
    }

    /// Waits for a line containing `needle` among those printed after `mark`.
    pub fn wait_for_after(&self, mark: usize, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(l) = self
                .log_lines()
                .into_iter()
                .skip(mark)
                .find(|l| l.contains(needle))
            {
                return l;
            }
            assert!(
                Instant::now() < deadline,
                "no line containing {needle:?} after line {mark} within {timeout:?}; output:\n{}",
                self.log_lines().join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the launcher's output has ended (both pipes closed: it has exited and nothing
    /// it started still holds them), so every line it wrote is in `log_lines`.
    pub fn wait_output_end(&self, timeout: Duration) {
        use std::sync::mpsc::RecvTimeoutError;
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(_) => {}
                Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => panic!(
                    "the launcher's output did not end within {timeout:?}; output:\n{}",
                    self.log_lines().join("\n")
                ),
            }
        }
    }

    pub fn log_lines(&self) -> Vec<String> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The position of the first log line containing `needle`.
    pub fn line_index(&self, needle: &str) -> Option<usize> {
        self.log_lines().iter().position(|l| l.contains(needle))
    }

    pub fn wait_until_listening(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while TcpStream::connect(self.addr()).is_err() {
            assert!(
                Instant::now() < deadline,
                "the launcher never listened on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn signal(&self, sig: i32) {
        unsafe_kill(self.child.id() as i32, sig);
    }

    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the launcher did not exit within {timeout:?}; output:\n{}",
                self.log_lines().join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn get(&self, path: &str) -> Response {
        request(self.addr(), "GET", path, &[], b"")
    }

    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        request(self.addr(), method, path, headers, body)
    }

    /// The pids of the launcher's children, from /proc: its processes, not its guardian.
    pub fn child_pids(&self) -> Vec<i32> {
        children_of(self.child.id() as i32)
            .into_iter()
            .filter(|&p| !is_guardian(p))
            .collect()
    }

    /// The launcher's guardian (`fhircluster-guardian`), from /proc.
    pub fn guardian_pid(&self) -> Option<i32> {
        children_of(self.child.id() as i32)
            .into_iter()
            .find(|&p| is_guardian(p))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// When the launcher wrote `line`, by its own clock: the time of day in seconds from the line's
/// RFC 3339 timestamp (`2026-01-02T03:04:05.678901Z`); None for a line without one. For spans
/// between two lines measured where they happened, not when the test read them.
pub fn log_time(line: &str) -> Option<f64> {
    let stamp = line
        .split_whitespace()
        .find(|w| w.len() > 20 && w.as_bytes().get(10) == Some(&b'T') && w.ends_with('Z'))?;
    let clock = &stamp[11..stamp.len() - 1];
    let mut parts = clock.split(':');
    let (h, m, s) = (parts.next()?, parts.next()?, parts.next()?);
    Some(h.parse::<f64>().ok()? * 3600.0 + m.parse::<f64>().ok()? * 60.0 + s.parse::<f64>().ok()?)
}

/// The span between two log lines by the launcher's clock (across midnight too).
pub fn log_span(from: &str, to: &str) -> Duration {
    let (a, b) = (
        log_time(from).unwrap_or_else(|| panic!("no timestamp on {from:?}")),
        log_time(to).unwrap_or_else(|| panic!("no timestamp on {to:?}")),
    );
    Duration::from_secs_f64((b - a).rem_euclid(86_400.0))
}
