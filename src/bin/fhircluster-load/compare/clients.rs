//! Many connections held open at once, to see what they cost the front door in memory: idle
//! keep-alive clients (each has had one answer and sends nothing more), and requests left
//! waiting (sent, no answer yet). Blocking sockets: the point is how many, not how fast.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::Context;

use super::procs::loopback;

/// Connections opened at once before their answers are read.
const BATCH: usize = 500;

/// Raises the open-file limit to its hard limit (the runner's `ulimit -n`); the processes it
/// starts afterwards inherit it. Returns the new soft limit.
pub fn raise_fd_limit() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 0;
    };
    if setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return hard;
    }
    getrlimit(Resource::RLIMIT_NOFILE).map_or(hard, |(soft, _)| soft)
}

fn request(port: u16, path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n")
}

/// Reads one response with a `Content-Length` body; leaves the connection open.
fn read_one(s: &mut TcpStream) -> anyhow::Result<u16> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            anyhow::bail!("closed before a whole response");
        }
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if buf.len() >= end + 4 + len {
            return Ok(status);
        }
    }
}

/// Opens `n` keep-alive connections to `port`, has each answered once (`GET path`), and returns
/// them open and idle.
pub fn idle_clients(port: u16, path: &str, n: usize) -> anyhow::Result<Vec<TcpStream>> {
    let mut open = Vec::with_capacity(n);
    let req = request(port, path);
    while open.len() < n {
        let mut batch = Vec::with_capacity(BATCH);
        for _ in 0..BATCH.min(n - open.len()) {
            let mut s = TcpStream::connect(loopback(port))
                .with_context(|| format!("connection {} of {n}", open.len() + batch.len() + 1))?;
            s.set_read_timeout(Some(Duration::from_secs(30)))?;
            s.write_all(req.as_bytes())?;
            batch.push(s);
        }
        for s in &mut batch {
            let status = read_one(s)?;
            if status != 200 {
                anyhow::bail!("an idle client's first request got {status}");
            }
        }
        open.append(&mut batch);
    }
    Ok(open)
}

/// Opens `n` connections to `port`, each sending `GET path` and reading nothing.
pub fn waiting_requests(port: u16, path: &str, n: usize) -> anyhow::Result<Vec<TcpStream>> {
    let req = request(port, path);
    (0..n)
        .map(|i| {
            let mut s = TcpStream::connect(loopback(port))
                .with_context(|| format!("connection {} of {n}", i + 1))?;
            s.write_all(req.as_bytes())?;
            Ok(s)
        })
        .collect()
}

/// How many of `conns` have had an answer (or were closed): a non-blocking peek at each.
pub fn answered(conns: &[TcpStream]) -> usize {
    let mut buf = [0u8; 1];
    conns
        .iter()
        .filter(|s| {
            if s.set_nonblocking(true).is_err() {
                return true;
            }
            let r = s.peek(&mut buf);
            let _ = s.set_nonblocking(false);
            !matches!(r, Err(e) if e.kind() == ErrorKind::WouldBlock)
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn idle_clients_read_whole_answers_and_waiting_ones_are_counted() -> anyhow::Result<()> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        // A server that answers the first 3 connections and leaves the next 2 waiting.
        let server = std::thread::spawn(move || {
            let mut held = Vec::new();
            for (i, conn) in listener.incoming().take(5).enumerate() {
                let Ok(mut c) = conn else { continue };
                let mut buf = [0u8; 512];
                let _ = c.read(&mut buf);
                if i < 3 {
                    let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n");
                    let _ = c.write_all(b"hello");
                }
                held.push(c);
            }
            std::thread::sleep(Duration::from_millis(300));
        });
        let idle = idle_clients(port, "/r4/metadata", 3)?;
        assert_eq!(idle.len(), 3);
        let waiting = waiting_requests(port, "/hang", 2)?;
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(answered(&waiting), 0);
        let _ = server.join();
        assert_eq!(answered(&waiting), 2, "closed counts as answered");
        Ok(())
    }

    #[test]
    fn the_fd_limit_is_raised_to_at_least_what_it_was() {
        assert!(raise_fd_limit() >= 256);
    }
}
