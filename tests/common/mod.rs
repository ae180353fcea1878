//! Helpers for integration tests: a cluster builder over the real `fhircluster` binary with
//! `fhirsmith-sim` as the server, free loopback ports, a temporary data directory per test, the
//! launcher's output captured line by line, and a small HTTP/1.1 client on raw sockets (so tests
//! control every byte and read every header exactly as sent).

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub const LAUNCHER: &str = env!("CARGO_BIN_EXE_fhircluster");
pub const SIM: &str = env!("CARGO_BIN_EXE_fhirsmith-sim");

/// Ports are handed out in blocks of this many, below the kernel's ephemeral range (32768 and
/// up), so no client connection of a test running beside this one can take one by chance.
const PORT_BLOCK: u16 = 16;
const PORT_BLOCKS_FROM: u16 = 10_000;
const PORT_BLOCKS: u16 = 1_250;

/// `count` (at most 16) consecutive free loopback ports, held for the whole test.
///
/// Tests run in parallel processes (nextest), so a block is claimed with an exclusive `flock` on
/// a file named after it; the lock lives as long as the test process, and the kernel drops it
/// when the process ends however it ends. Each port is also checked free before use.
pub fn free_ports(count: u16) -> u16 {
    assert!(
        count <= PORT_BLOCK,
        "at most {PORT_BLOCK} ports per cluster"
    );
    let dir = std::env::temp_dir().join("fhircluster-test-ports");
    std::fs::create_dir_all(&dir).expect("the port lock directory");
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        ^ (u64::from(std::process::id()) << 32);
    for _ in 0..2_000 {
        // xorshift: a different order of blocks in each process.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let block = (seed % u64::from(PORT_BLOCKS)) as u16;
        let Ok(file) = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(block.to_string()))
        else {
            continue;
        };
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a file descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            continue;
        }
        let base = PORT_BLOCKS_FROM + block * PORT_BLOCK;
        let all_free = (base..base + count).all(|p| {
            TcpListener::bind(("127.0.0.1", p)).is_ok() && TcpListener::bind(("0.0.0.0", p)).is_ok()
        });
        if all_free {
            // Held until the test process exits.
            std::mem::forget(file);
            return base;
        }
    }
    panic!("no block of {count} free ports found");
}

pub struct ClusterBuilder {
    workers: u32,
    config: Value,
    env: Vec<(String, String)>,
    args: Vec<String>,
    command: Option<Vec<String>>,
}

pub fn cluster() -> ClusterBuilder {
    ClusterBuilder {
        workers: 2,
        config: json!({}),
        env: Vec::new(),
        args: Vec::new(),
        command: None,
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
        self.workers = n;
        self
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

    /// The server command instead of `fhirsmith-sim`.
    pub fn command(mut self, argv: &[&str]) -> Self {
        self.command = Some(argv.iter().map(|s| s.to_string()).collect());
        self
    }

    /// Starts the launcher; does not wait for anything.
    pub fn spawn(self) -> Cluster {
        let dir = tempfile::tempdir().expect("temp data dir");
        let base = free_ports(self.workers as u16 + 2);
        let port = base;
        let internal = base + 1;
        let command = self.command.unwrap_or_else(|| vec![SIM.to_string()]);
        let mut config = json!({
            "server": {
                "port": port,
                "cluster": {
                    "workers": self.workers,
                    "internalPort": internal,
                    "command": command,
                    "statusSeconds": 1,
                    "killSeconds": 5
                }
            },
            "modules": { "tx": { "endpoints": [ { "path": "/r4" } ] } }
        });
        merge(&mut config, &self.config);
        launch(dir, config, &self.env, &self.args, &[])
    }

    /// Starts the launcher and waits until every process is ready and the listener is open.
    pub fn start(self) -> Cluster {
        let workers = self.workers;
        let mut c = self.spawn();
        for code in std::iter::once("m0".to_string()).chain((1..=workers).map(|n| format!("tx{n}")))
        {
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
    lines: Receiver<String>,
    log: Arc<Mutex<Vec<String>>>,
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

    /// The pids of the launcher's children, from /proc.
    pub fn child_pids(&self) -> Vec<i32> {
        children_of(self.child.id() as i32)
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

/// Sends a signal to a process this test started (by pid).
pub fn unsafe_kill(pid: i32, sig: i32) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}

/// Direct children of `pid`, read from /proc.
pub fn children_of(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) {
            // The ppid is the second field after the ")" that ends the command name.
            if let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) {
                let f: Vec<&str> = rest.split_whitespace().collect();
                if f.get(1).and_then(|s| s.parse::<i32>().ok()) == Some(pid) {
                    out.push(p);
                }
            }
        }
    }
    out
}

pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // A zombie has exited.
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    pub fn served_by(&self) -> &str {
        self.header("x-served-by").unwrap_or("")
    }
}

/// One request on a fresh connection (`Connection: close`); status 0 when the connection failed
/// or closed before a response.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut raw = head.into_bytes();
    raw.extend_from_slice(body);
    raw_request(addr, &raw, Duration::from_secs(60))
}

/// Sends raw bytes and reads one response (until the connection closes or the body ends).
pub fn raw_request(addr: SocketAddr, raw: &[u8], timeout: Duration) -> Response {
    let failed = Response {
        status: 0,
        headers: HashMap::new(),
        body: Vec::new(),
    };
    let Ok(mut s) = TcpStream::connect(addr) else {
        return failed;
    };
    let _ = s.set_read_timeout(Some(timeout));
    if s.write_all(raw).is_err() {
        return failed;
    }
    let mut reader = BufReader::new(s);
    read_response(&mut reader).unwrap_or(failed)
}

/// Reads one HTTP/1.1 response from `r` (Content-Length, chunked, or to EOF).
pub fn read_response<R: BufRead>(r: &mut R) -> Option<Response> {
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let status: u16 = line.split_whitespace().nth(1)?.parse().ok()?;
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let mut body = Vec::new();
    if let Some(len) = headers
        .get("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        body.resize(len, 0);
        r.read_exact(&mut body).ok()?;
    } else if headers
        .get("transfer-encoding")
        .is_some_and(|v| v.contains("chunked"))
    {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            if n == 0 {
                let mut end = String::new();
                r.read_line(&mut end).ok()?;
                break;
            }
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).ok()?;
            body.extend_from_slice(&chunk[..n]);
        }
    } else if status != 204 && status != 304 {
        let _ = r.read_to_end(&mut body);
    }
    Some(Response {
        status,
        headers,
        body,
    })
}

// ---- Added for the settings/plan and supervision tests (tests/check.rs, tests/supervise.rs).

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

// ---- Additions for the front-door (proxy) tests ----

impl Cluster {
    /// The loopback address a process listens on (`m0` on `internalPort`, `txN` on
    /// `internalPort + N`), for requests that bypass the launcher.
    pub fn process_addr(&self, code: &str) -> SocketAddr {
        let port = if code == "m0" {
            self.internal
        } else {
            let n: u16 = code
                .strip_prefix("tx")
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("not a process code: {code}"));
            self.internal + n
        };
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// The pid of the latest start of process `code`, from the launcher's log
    /// (`tx1: started tx-worker (pid 123) ...`).
    pub fn pid_of(&self, code: &str) -> i32 {
        let prefix = format!("{code}: started ");
        self.log_lines()
            .iter()
            .rev()
            .filter_map(|l| {
                let rest = &l[l.find(&prefix)? + prefix.len()..];
                let pid = rest.split("(pid ").nth(1)?.split(')').next()?;
                pid.trim().parse().ok()
            })
            .next()
            .unwrap_or_else(|| {
                panic!(
                    "no start of {code} in the log:\n{}",
                    self.log_lines().join("\n")
                )
            })
    }

    /// One request through the front door, with how long it took.
    pub fn timed(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (Response, Duration) {
        let t = Instant::now();
        let r = request(self.addr(), method, path, headers, body);
        (r, t.elapsed())
    }

    /// Waits until at least `n` log lines contain `needle` (a second `tx1: ready` after a
    /// restart, ...); panics with the log when they don't come in time.
    pub fn wait_for_count(&self, needle: &str, n: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.count_lines(needle) < n {
            assert!(
                Instant::now() < deadline,
                "fewer than {n} lines containing {needle:?} within {timeout:?}; output:\n{}",
                self.log_lines().join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// How many log lines contain `needle`.
    pub fn count_lines(&self, needle: &str) -> usize {
        self.log_lines()
            .iter()
            .filter(|l| l.contains(needle))
            .count()
    }
}

impl Response {
    /// A `404` with the `cache-id-unknown` tx-issue-type (the launcher's or a process's).
    pub fn is_cache_id_unknown(&self) -> bool {
        self.status == 404 && self.text().contains("cache-id-unknown")
    }

    /// The OperationOutcome's first issue text (empty when there is none).
    pub fn outcome_text(&self) -> String {
        let v = self.json();
        v["issue"][0]["diagnostics"]
            .as_str()
            .or_else(|| v["issue"][0]["details"]["text"].as_str())
            .unwrap_or("")
            .to_string()
    }
}

/// Runs `f` on `n` threads at once and collects what each returned, in thread order.
pub fn in_parallel<T: Send + 'static>(
    n: usize,
    f: impl Fn(usize) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let f = Arc::new(f);
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let f = f.clone();
            std::thread::spawn(move || f(i))
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("a test thread panicked"))
        .collect()
}

/// A client connection held open by the test: sends requests and reads responses when told to.
pub struct Conn {
    pub stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Conn {
    pub fn open(addr: SocketAddr) -> std::io::Result<Conn> {
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let reader = BufReader::new(stream.try_clone()?);
        Ok(Conn { stream, reader })
    }

    /// Sends a request head (and body); `keep_alive` false adds `Connection: close`.
    pub fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        keep_alive: bool,
    ) -> std::io::Result<()> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
        if !keep_alive {
            head.push_str("Connection: close\r\n");
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if !body.is_empty() || method == "POST" {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        self.stream.write_all(head.as_bytes())?;
        self.stream.write_all(body)
    }

    /// Reads one response (status 0 when the connection closed first).
    pub fn read(&mut self) -> Response {
        read_response(&mut self.reader).unwrap_or(Response {
            status: 0,
            headers: HashMap::new(),
            body: Vec::new(),
        })
    }

    /// Reads whatever arrives until the connection ends or `timeout` passes without data;
    /// returns the bytes read and whether the connection ended (EOF or reset).
    pub fn drain(&mut self, timeout: Duration) -> (usize, bool) {
        let _ = self.reader.get_ref().set_read_timeout(Some(timeout));
        let mut total = 0;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match self.reader.read(&mut buf) {
                Ok(0) => return (total, true),
                Ok(n) => total += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return (total, false)
                }
                Err(_) => return (total, true),
            }
        }
    }
}

// ---- Added for the status and memory tests: a launcher started through a wrapper (to join a
// ---- cgroup first), a second launcher on the same data directory, direct process requests,
// ---- /proc readings and a child memory cgroup (cgroup v1).

impl ClusterBuilder {
    /// Like `spawn`, but the launcher is started as `wrap... LAUNCHER args...` (a wrapper that
    /// `exec`s it keeps the pid, so `signal` and `child_pids` still work).
    pub fn spawn_wrapped(self, wrap: &[String]) -> Cluster {
        let dir = tempfile::tempdir().expect("temp data dir");
        let base = free_ports(self.workers as u16 + 2);
        let command = self
            .command
            .clone()
            .unwrap_or_else(|| vec![SIM.to_string()]);
        let mut config = json!({
            "server": {
                "port": base,
                "cluster": {
                    "workers": self.workers,
                    "internalPort": base + 1,
                    "command": command,
                    "statusSeconds": 1,
                    "killSeconds": 5
                }
            },
            "modules": { "tx": { "endpoints": [ { "path": "/r4" } ] } }
        });
        merge(&mut config, &self.config);
        launch(dir, config, &self.env, &self.args, wrap)
    }

    /// `spawn_wrapped`, then waits like `start`.
    pub fn start_wrapped(self, wrap: &[String]) -> Cluster {
        let workers = self.workers;
        let mut c = self.spawn_wrapped(wrap);
        for code in std::iter::once("m0".to_string()).chain((1..=workers).map(|n| format!("tx{n}")))
        {
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
        SocketAddr::from(([127, 0, 0, 1], self.internal + index))
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

/// Polls `check` every 100 ms until it gives `Some`, or panics with `what` after `timeout`.
pub fn poll<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A child memory cgroup (cgroup v1, `/sys/fs/cgroup/memory/<name>`) with a limit, removed on
/// drop: processes still in it are waited for, then moved to the parent, then the directory goes.
pub struct MemCgroup {
    pub path: PathBuf,
}

impl MemCgroup {
    /// Creates it, or says exactly what is missing.
    pub fn create(name: &str, limit: u64) -> Result<MemCgroup, String> {
        let root = Path::new("/sys/fs/cgroup/memory");
        if !root.join("memory.limit_in_bytes").exists() {
            return Err(format!(
                "no cgroup v1 memory controller mounted at {} (this test needs one)",
                root.display()
            ));
        }
        let path = root.join(name);
        std::fs::create_dir(&path).map_err(|e| {
            format!(
                "can't create the memory cgroup {}: {e} (needs root)",
                path.display()
            )
        })?;
        let group = MemCgroup { path };
        std::fs::write(group.path.join("memory.limit_in_bytes"), limit.to_string()).map_err(
            |e| {
                format!(
                    "can't write memory.limit_in_bytes in {}: {e}",
                    group.path.display()
                )
            },
        )?;
        Ok(group)
    }

    pub fn procs_file(&self) -> PathBuf {
        self.path.join("cgroup.procs")
    }

    /// A wrapper for `spawn_wrapped`: joins this cgroup, then `exec`s the launcher.
    pub fn wrapper(&self) -> Vec<String> {
        vec![
            "sh".to_string(),
            "-c".to_string(),
            "echo $$ > \"$0\" && exec \"$@\"".to_string(),
            self.procs_file().display().to_string(),
        ]
    }

    pub fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.procs_file())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// A `memory.stat` field.
    pub fn stat(&self, field: &str) -> Option<u64> {
        let text = std::fs::read_to_string(self.path.join("memory.stat")).ok()?;
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == field).then(|| v.trim().parse().ok()).flatten()
        })
    }
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.pids().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        if let Some(parent) = self.path.parent() {
            for pid in self.pids() {
                let _ = std::fs::write(parent.join("cgroup.procs"), pid.to_string());
            }
        }
        if let Err(e) = std::fs::remove_dir(&self.path) {
            eprintln!(
                "could not remove the test cgroup {}: {e}",
                self.path.display()
            );
        }
    }
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

// ---- Additions for the operations tests (tests/ops_*.rs) ----

/// One free loopback port (for `--admin-address`, nginx's listener ...).
pub fn free_port() -> u16 {
    free_ports(1)
}

/// GET `path` from the launcher's own endpoint on 127.0.0.1:`port`.
pub fn admin_get(port: u16, path: &str) -> Response {
    request(
        SocketAddr::from(([127, 0, 0, 1], port)),
        "GET",
        path,
        &[],
        b"",
    )
}

/// Polls `f` every 20 ms until it returns true; false when `timeout` passes first.
pub fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The text of the fenced block in `markdown` whose opening line is ```` ```<lang> title="<title>" ````;
/// panics naming the file when there is none, or more than one.
pub fn fenced_block(markdown: &str, file: &str, lang: &str, title: &str) -> String {
    let opening = format!("```{lang} title=\"{title}\"");
    let mut found = Vec::new();
    let mut lines = markdown.lines();
    while let Some(l) = lines.next() {
        if l.trim_end() == opening {
            let body: Vec<&str> = lines
                .by_ref()
                .take_while(|l| l.trim_end() != "```")
                .collect();
            found.push(body.join("\n") + "\n");
        }
    }
    assert_eq!(
        found.len(),
        1,
        "{file} must hold exactly one block opening with {opening:?}"
    );
    found.remove(0)
}

/// A file at the crate's root (README.md, nginx.md ...), read whole.
pub fn crate_file(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Every environment variable of a running process, from /proc/<pid>/environ.
pub fn environ_of(pid: i32) -> HashMap<String, String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    raw.split(|b| *b == 0)
        .filter_map(|kv| {
            let kv = String::from_utf8_lossy(kv);
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

// ---- Additions for the reliability suite (tests/reliability_*.rs) ----

/// Prints one parseable line of what a reliability test tried and what held, for the README's
/// table (`tests/reliability-table.sh` collects them from `--nocapture` output):
/// `RELIABILITY {"test": ..., "tried": ..., "faults": n, "requests": n, "lost": n, "held": ...}`.
pub fn report_figures(test: &str, tried: &str, faults: u64, requests: u64, lost: u64, held: &str) {
    let line = serde_json::json!({
        "test": test, "tried": tried, "faults": faults, "requests": requests,
        "lost": lost, "held": held,
    });
    println!("RELIABILITY {line}");
}

/// How many requests process `code` has answered, by its own count (`/sim/info`, read straight
/// from it and not counted itself); 0 when it can't be read.
pub fn answered_by(c: &Cluster, code: &str) -> u64 {
    request(c.process_addr(code), "GET", "/sim/info", &[], b"").json()["requests"]
        .as_u64()
        .unwrap_or(0)
}

/// Requests in progress on process `code`, by its own count.
pub fn in_flight_on(c: &Cluster, code: &str) -> i64 {
    request(c.process_addr(code), "GET", "/sim/info", &[], b"").json()["inFlight"]
        .as_i64()
        .unwrap_or(-1)
}
