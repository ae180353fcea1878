//! One measured `wrk` run through one front door: wrk's figures, and the CPU the door's
//! processes and the upstream's spent on it, per request completed.
//!
//! A run of 4,096 connections leaves that many sockets in TIME_WAIT for a minute, and nginx as a
//! proxy leaves one for each upstream connection beyond its 32 kept alive: thousands a second.
//! Where the kernel does not reuse them for new loopback connections (`tcp_tw_reuse` 0; Linux's
//! default 2 does), a run first waits until they leave room in the ephemeral range.

use std::thread::sleep;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::cpu::{ticks_per_second, us_per_request, ProcSet};
use super::wrk::{self, WrkFigures, WrkLoad};

/// What one run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measured {
    pub wrk: WrkFigures,
    /// CPU of the front door's processes per request (µs); `None` for direct or a lost process.
    pub cpu_us_per_request: Option<f64>,
    /// CPU of the upstream's processes per request (µs).
    pub upstream_cpu_us_per_request: Option<f64>,
    /// TCP sockets in TIME_WAIT on the machine when the run started.
    pub time_wait_before: Option<u64>,
}

/// The processes a run is measured on, and the URL wrk loads.
#[derive(Debug, Clone)]
pub struct Through {
    pub port: u16,
    pub url: String,
    /// The front door's processes (empty for direct).
    pub door: ProcSet,
    pub upstream: ProcSet,
}

/// Sockets in TIME_WAIT, from a `/proc/net/sockstat` text (`TCP: inuse 5 orphan 0 tw 12 ...`).
pub fn parse_time_wait(sockstat: &str) -> Option<u64> {
    let line = sockstat.lines().find(|l| l.starts_with("TCP:"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let i = words.iter().position(|w| *w == "tw")?;
    words.get(i + 1)?.parse().ok()
}

fn time_wait_now() -> Option<u64> {
    parse_time_wait(&std::fs::read_to_string("/proc/net/sockstat").ok()?)
}

/// Whether new loopback connections may take the ports of sockets in TIME_WAIT
/// (`net.ipv4.tcp_tw_reuse` 1, or 2: loopback only).
fn tw_reused() -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_tw_reuse")
        .is_ok_and(|v| matches!(v.trim(), "1" | "2"))
}

/// Waits, at most `most`, until fewer than `limit` sockets are in TIME_WAIT; returns the count.
pub fn settle_time_wait(limit: u64, most: Duration) -> Option<u64> {
    let deadline = Instant::now() + most;
    loop {
        let tw = time_wait_now();
        if tw.is_none_or(|n| n < limit) || Instant::now() >= deadline {
            return tw;
        }
        sleep(Duration::from_millis(500));
    }
}

/// How many TIME_WAIT sockets a run may start with: a third of the ephemeral range, so the
/// run's own connections (and a proxy's to its upstream) always find ports.
pub fn time_wait_limit(ephemeral_ports: u64) -> u64 {
    (ephemeral_ports / 3).max(1_000)
}

/// Warms up for `warm` (a short run, not measured), then measures one run of `load`.
pub fn run(load: &WrkLoad, through: &Through, warm: Duration) -> anyhow::Result<Measured> {
    if !warm.is_zero() {
        let _ = wrk::run(
            &WrkLoad {
                duration: warm,
                ..load.clone()
            },
            &through.url,
        );
    }
    let tw = if tw_reused() {
        time_wait_now()
    } else {
        settle_time_wait(
            time_wait_limit(super::ports::ephemeral_ports()),
            Duration::from_secs(70),
        )
    };
    let (door0, up0) = (through.door.ticks(), through.upstream.ticks());
    let figures = wrk::run(load, &through.url)?;
    let (door1, up1) = (through.door.ticks(), through.upstream.ticks());
    let hz = ticks_per_second();
    let per =
        |a: Option<u64>, b: Option<u64>| us_per_request(b?.checked_sub(a?)?, hz, figures.requests);
    Ok(Measured {
        wrk: figures,
        cpu_us_per_request: per(door0, door1),
        upstream_cpu_us_per_request: per(up0, up1),
        time_wait_before: tw,
    })
}

/// A run's figures for the pure parts' tests: `rps` 2xx a second for 10 s, the door's and the
/// upstream's CPU per request.
#[cfg(test)]
pub fn sample(rps: f64, p99_ms: f64, cpu: Option<f64>, upstream_cpu: f64) -> Measured {
    Measured {
        wrk: WrkFigures {
            requests_per_second: rps,
            requests: (rps * 10.0) as u64,
            p50_ms: p99_ms / 2.0,
            p99_ms,
            non_2xx: 0,
            socket_errors: 0,
        },
        cpu_us_per_request: cpu,
        upstream_cpu_us_per_request: Some(upstream_cpu),
        time_wait_before: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_time_wait_count() {
        let s = "sockets: used 300\nTCP: inuse 12 orphan 0 tw 14500 alloc 20 mem 3\nUDP: inuse 1\n";
        assert_eq!(parse_time_wait(s), Some(14_500));
        assert_eq!(parse_time_wait("UDP: inuse 1\n"), None);
        assert!(time_wait_now().is_some());
        assert_eq!(time_wait_limit(28_232), 9_410);
        assert_eq!(time_wait_limit(100), 1_000);
    }
}
