//! The processes a comparison starts (fhircluster with its `fhirsmith-sim` processes, nginx,
//! HAProxy), each held by a guard that ends it (SIGTERM, then SIGKILL) when dropped, so nothing
//! is left running; a blocking one-request HTTP check; RSS from /proc.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// A process this run started; ended when dropped.
pub struct Guard {
    pub name: String,
    child: Child,
    /// Processes it started that are ended after it, if still there (the cluster's servers).
    descendants: Vec<i32>,
}

impl Guard {
    pub fn spawn(name: &str, cmd: &mut Command, log: &Path) -> anyhow::Result<Guard> {
        let out =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone()?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        Ok(Guard {
            name: name.to_string(),
            child,
            descendants: Vec::new(),
        })
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Fails when the process has already exited.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        if let Ok(Some(status)) = self.child.try_wait() {
            bail!("{} exited early ({status})", self.name);
        }
        Ok(())
    }

    /// Remembers the process's children now, to end any that outlive it.
    pub fn adopt_children(&mut self) {
        self.descendants = children_of(self.pid());
    }

    /// SIGTERM, up to `grace` to exit, then SIGKILL; then the same for its remembered children.
    pub fn stop(&mut self, grace: Duration) {
        stop_pid(&mut self.child, grace);
        for &pid in &self.descendants {
            let deadline = Instant::now() + grace;
            while alive(pid) && Instant::now() < deadline {
                sleep(Duration::from_millis(20));
            }
            if alive(pid) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
        self.descendants.clear();
    }
}

fn stop_pid(child: &mut Child, grace: Duration) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

/// Direct children of `pid`, from /proc.
pub fn children_of(pid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
        .filter(|&p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|stat| {
                    let rest = stat.rsplit_once(')')?.1.to_string();
                    rest.split_whitespace().nth(1)?.parse::<i32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// Every process below `pid` (children, their children ...), from /proc.
pub fn descendants(pid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    let mut next = vec![pid];
    while let Some(p) = next.pop() {
        for child in children_of(p) {
            if !found.contains(&child) {
                found.push(child);
                next.push(child);
            }
        }
    }
    found
}

/// Whether `pid` is running (not gone, not a zombie).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    })
}

/// `VmRSS` of `pid` in MB (MiB), from /proc/<pid>/status.
pub fn rss_mb(pid: i32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_rss_kb(&status).map(|kb| kb as f64 / 1024.0)
}

/// The `VmRSS:` figure of a /proc status file, in kB.
pub fn parse_vm_rss_kb(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// One `GET` on a fresh connection: the status and how long it took; `None` on any failure.
pub fn get(port: u16, path: &str, timeout: Duration) -> Option<(u16, Duration)> {
    let started = Instant::now();
    let (status, _) = get_body(port, path, timeout)?;
    Some((status, started.elapsed()))
}

/// One `GET` on a fresh connection (`Connection: close`): the status and the body (what follows
/// the head up to the close; none of these answers is chunked).
pub fn get_body(port: u16, path: &str, timeout: Duration) -> Option<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect_timeout(&loopback(port), timeout).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    s.set_nodelay(true).ok()?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let head = String::from_utf8_lossy(buf.get(..buf.len().min(64))?).to_string();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let body_at = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    Some((status, buf.split_off(body_at)))
}

/// Waits until `GET path` on `port` answers 200, or fails after `timeout`.
pub fn wait_ok(port: u16, path: &str, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some((200, _)) = get(port, path, Duration::from_secs(2)) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("nothing answered 200 to GET {path} on port {port} within {timeout:?}");
        }
        sleep(Duration::from_millis(50));
    }
}

/// Waits until every port answers `path` quickly twice in a row (the work left by a surge has
/// drained from every process), at most `timeout`.
pub fn wait_quiet(ports: &[u16], path: &str, fast: Duration, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut streak = 0;
    while Instant::now() < deadline {
        let all_fast = ports.iter().all(
            |&p| matches!(get(p, path, Duration::from_secs(10)), Some((200, took)) if took < fast),
        );
        streak = if all_fast { streak + 1 } else { 0 };
        if streak >= 2 {
            return true;
        }
        sleep(Duration::from_millis(200));
    }
    false
}

/// A temporary directory for one run's configs and logs, removed when dropped unless kept.
pub struct WorkDir {
    pub path: PathBuf,
    keep: bool,
}

impl WorkDir {
    pub fn new(keep: bool) -> anyhow::Result<WorkDir> {
        let path = std::env::temp_dir().join(format!("fhircluster-compare-{}", std::process::id()));
        std::fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(WorkDir { path, keep })
    }

    pub fn sub(&self, name: &str) -> anyhow::Result<PathBuf> {
        let p = self.path.join(name);
        std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
        Ok(p)
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_vm_rss() {
        let status = "Name:\tfhircluster\nVmPeak:\t  9000 kB\nVmRSS:\t    5756 kB\nThreads:\t3\n";
        assert_eq!(parse_vm_rss_kb(status), Some(5756));
        assert_eq!(parse_vm_rss_kb("Name: x\n"), None);
        let own = rss_mb(std::process::id() as i32).unwrap_or(0.0);
        assert!(own > 0.0);
    }

    #[test]
    fn a_stopped_guard_leaves_nothing_running() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut g = Guard::spawn(
            "sleep",
            Command::new("sleep").arg("30"),
            &dir.path().join("log"),
        )?;
        let pid = g.pid();
        assert!(alive(pid));
        g.check_running()?;
        // (Other tests in this process may have children of their own now.)
        assert!(children_of(std::process::id() as i32).contains(&pid));
        assert!(descendants(std::process::id() as i32).contains(&pid));
        g.stop(Duration::from_secs(2));
        assert!(!alive(pid));
        assert!(g.check_running().is_err());
        Ok(())
    }
}
