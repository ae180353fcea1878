//! systemd's notify protocol (`Type=notify`): `READY=1` once the master is ready and the listener
//! is open, `STATUS=` lines as processes come and go, `STOPPING=1` when the drain begins, and
//! `WATCHDOG=1` pings when `WATCHDOG_USEC` asks for them. Without `NOTIFY_SOCKET` nothing is sent.

use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

use tracing::debug;

/// The environment variables that belong to the launcher alone; its children must not inherit
/// them (with `NotifyAccess=main` their messages would be refused anyway).
pub const NOTIFY_ENV: &[&str] = &["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"];

pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
    watchdog: Option<Duration>,
}

impl Notifier {
    /// From `NOTIFY_SOCKET` (a path, or `@name` for the abstract namespace) and `WATCHDOG_USEC`.
    pub fn from_env() -> Notifier {
        let socket = std::env::var("NOTIFY_SOCKET").ok();
        let target = socket.as_deref().and_then(|s| {
            let addr = parse_address(s)?;
            let sock = UnixDatagram::unbound().ok()?;
            Some((sock, addr))
        });
        let pid_matches = std::env::var("WATCHDOG_PID")
            .ok()
            .and_then(|p| p.parse::<u32>().ok())
            .is_none_or(|p| p == std::process::id());
        let watchdog = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|u| u.parse::<u64>().ok())
            .filter(|&u| u > 0 && pid_matches && target.is_some())
            .map(Duration::from_micros);
        Notifier { target, watchdog }
    }

    pub fn enabled(&self) -> bool {
        self.target.is_some()
    }

    /// How often to ping: half the watchdog's timeout, as systemd advises.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog.map(|w| w / 2)
    }

    pub fn send(&self, state: &str) {
        if let Some((sock, addr)) = &self.target {
            if let Err(e) = sock.send_to_addr(state.as_bytes(), addr) {
                debug!("sd_notify {state:?}: {e}");
            }
        }
    }

    pub fn ready(&self, status: &str) {
        self.send(&format!("READY=1\nSTATUS={status}"));
    }

    pub fn status(&self, status: &str) {
        self.send(&format!("STATUS={status}"));
    }

    pub fn stopping(&self) {
        self.send("STOPPING=1\nSTATUS=draining");
    }

    pub fn watchdog(&self) {
        self.send("WATCHDOG=1");
    }
}

fn parse_address(s: &str) -> Option<SocketAddr> {
    if let Some(name) = s.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        SocketAddr::from_abstract_name(name.as_bytes()).ok()
    } else if s.starts_with('/') {
        SocketAddr::from_pathname(s).ok()
    } else {
        None
    }
}

/// The `STATUS=` line: `3/3 ready, 0 queued`.
pub fn status_line(ready: usize, total: usize, queued: usize) -> String {
    format!("{ready}/{total} ready, {queued} queued")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_paths_or_abstract_names() {
        assert!(parse_address("/run/systemd/notify").is_some());
        assert!(parse_address("@abstract").is_some());
        assert!(parse_address("relative").is_none());
    }

    #[test]
    fn a_datagram_reaches_the_socket() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("notify");
        let listener = UnixDatagram::bind(&path).expect("bind");
        let n = Notifier {
            target: Some((
                UnixDatagram::unbound().expect("socket"),
                SocketAddr::from_pathname(&path).expect("addr"),
            )),
            watchdog: None,
        };
        n.ready(&status_line(3, 3, 0));
        let mut buf = [0u8; 256];
        let len = listener.recv(&mut buf).expect("recv");
        assert_eq!(&buf[..len], b"READY=1\nSTATUS=3/3 ready, 0 queued");
    }
}
