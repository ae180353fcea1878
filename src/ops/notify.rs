//! systemd's notify protocol (`Type=notify` and `Type=notify-reload`): `READY=1` once the master
//! is ready and the listener is open, `STATUS=` lines as processes come and go, `RELOADING=1`
//! with `MONOTONIC_USEC=` on `SIGHUP` and `READY=1` again when the rolling restart is over,
//! `EXTEND_TIMEOUT_USEC=` while the master loads and while a reload runs (`extend.rs`),
//! `STOPPING=1` when the drain begins, and `WATCHDOG=1` pings when `WATCHDOG_USEC` asks for them.
//! Without `NOTIFY_SOCKET` nothing is sent.
//!
//! The messages that mark a change of state (`READY=1`, `RELOADING=1`, `STOPPING=1`) are sent by
//! the launcher as the change happens, so their order is the launcher's; the periodic ones
//! (`STATUS=`, `EXTEND_TIMEOUT_USEC=`, `WATCHDOG=1`) by `keep_informed`.

use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tracing::debug;

use super::extend::Extender;

pub(crate) struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
    watchdog: Option<Duration>,
}

impl Notifier {
    /// From `NOTIFY_SOCKET` (a path, or `@name` for the abstract namespace) and `WATCHDOG_USEC`.
    pub(crate) fn from_env() -> Notifier {
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

    pub(crate) fn enabled(&self) -> bool {
        self.target.is_some()
    }

    /// How often to ping: half the watchdog's timeout, as systemd advises.
    pub(crate) fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog.map(|w| w / 2)
    }

    pub(crate) fn send(&self, state: &str) {
        if let Some((sock, addr)) = &self.target {
            if let Err(e) = sock.send_to_addr(state.as_bytes(), addr) {
                debug!("sd_notify {state:?}: {e}");
            }
        }
    }

    /// Started, or a reload is over (refused ones too: the service runs on as it was).
    pub(crate) fn ready(&self, status: &str) {
        self.send(&format!("READY=1\nSTATUS={status}"));
    }

    /// A reload begins: systemd ≥ 253 (`Type=notify-reload`) matches it to the `SIGHUP` it sent
    /// by the monotonic time, and waits for the next `READY=1`.
    pub(crate) fn reloading(&self) {
        self.send(&format!(
            "RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=reloading: rolling restart",
            monotonic_usec()
        ));
    }

    /// An in-place upgrade begins (`SIGUSR2`): the new program says `READY=1` once it serves.
    pub(crate) fn upgrading(&self) {
        self.send(&format!(
            "RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=upgrading in place: draining, then the new program",
            monotonic_usec()
        ));
    }

    pub(crate) fn stopping(&self) {
        self.send("STOPPING=1\nSTATUS=draining");
    }
}

/// `CLOCK_MONOTONIC` in microseconds, the clock systemd compares `MONOTONIC_USEC=` with. Public
/// for `tests/ops_notify.rs`, which plays systemd.
pub fn monotonic_usec() -> u64 {
    let (sec, nsec) = crate::system::ffi::monotonic();
    sec * 1_000_000 + nsec / 1_000
}

/// Where the launcher is, as systemd should hear it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Before `READY=1`: the master is starting.
    Starting,
    Serving,
    /// Between `RELOADING=1` and its `READY=1`.
    Reloading,
    /// After `STOPPING=1`: nothing more is sent.
    Stopping,
}

/// The periodic messages, until the state is `Stopping`: `STATUS=` when the line changes
/// (`status` gives it for the state and whether the master's process runs), `EXTEND_TIMEOUT_USEC=`
/// while the master starts with its process running (`master_alive`) and while a reload runs,
/// and `WATCHDOG=1`.
pub(crate) async fn keep_informed(
    notifier: Arc<Notifier>,
    state: watch::Receiver<State>,
    master_alive: impl Fn() -> bool + Send + 'static,
    status: impl Fn(State, bool) -> String + Send + 'static,
) {
    if !notifier.enabled() {
        return;
    }
    let every = notifier
        .watchdog_interval()
        .map_or(Duration::from_secs(1), |w| w.min(Duration::from_secs(1)));
    let mut last = String::new();
    let mut pinged = Instant::now();
    let mut extender = Extender::default();
    let mut was = State::Starting;
    loop {
        let now = Instant::now();
        let s = *state.borrow();
        if s == State::Stopping {
            return;
        }
        if s != was {
            // A reload begun between two ticks is a new timeout for systemd, even if this loop
            // never saw the launcher serving in between.
            extender.reset();
            was = s;
        }
        // Read once, so the extension and the status line agree.
        let alive = master_alive();
        let wanted = match s {
            State::Starting => alive,
            State::Reloading => true,
            _ => false,
        };
        // What is due this tick goes in one message.
        let mut lines = Vec::new();
        if let Some(by) = extender.poll(now.into_std(), wanted) {
            lines.push(format!("EXTEND_TIMEOUT_USEC={}", by.as_micros()));
        }
        let line = status(s, alive);
        if line != last {
            lines.push(format!("STATUS={line}"));
            last = line;
        }
        if let Some(w) = notifier.watchdog_interval() {
            if now.duration_since(pinged) >= w {
                lines.push("WATCHDOG=1".to_string());
                pinged = now;
            }
        }
        if !lines.is_empty() {
            notifier.send(&lines.join("\n"));
        }
        tokio::time::sleep(every).await;
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
pub(crate) fn status_line(ready: usize, total: usize, queued: usize) -> String {
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

        let before = monotonic_usec();
        n.reloading();
        let len = listener.recv(&mut buf).expect("recv");
        let text = String::from_utf8_lossy(&buf[..len]).to_string();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("RELOADING=1"), "{text}");
        let usec: u64 = lines
            .next()
            .and_then(|l| l.strip_prefix("MONOTONIC_USEC="))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{text}"));
        assert!(usec >= before && usec <= monotonic_usec(), "{text}");
    }
}
