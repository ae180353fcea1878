//! Raw proxy overhead with `wrk`: small responses from one fast upstream, many connections; the
//! figures are requests per second, the requests completed, and the 50th and 99th percentiles of
//! latency (`--latency`). `wrk` can be pinned to some CPUs (`taskset`), so that a front door's
//! second thread is not measured against a load generator that took its core.

use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Serialize;

/// What one `wrk` run measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WrkFigures {
    pub requests_per_second: f64,
    /// Responses completed in the run (of any status).
    pub requests: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Responses that were not 2xx or 3xx (0 unless something went wrong).
    pub non_2xx: u64,
    /// Connect, read, write and timeout errors together.
    pub socket_errors: u64,
}

impl WrkFigures {
    /// 2xx and 3xx responses a second: what was served, not refused.
    pub fn ok_per_second(&self) -> f64 {
        if self.requests == 0 {
            return 0.0;
        }
        let ok = self.requests.saturating_sub(self.non_2xx) as f64;
        self.requests_per_second * ok / self.requests as f64
    }
}

/// How `wrk` is run.
#[derive(Debug, Clone, PartialEq)]
pub struct WrkLoad {
    pub threads: u32,
    pub connections: u32,
    pub duration: Duration,
    /// `taskset -c` CPU list to run wrk on; `None`: anywhere.
    pub pin: Option<String>,
}

impl WrkLoad {
    /// The command line, program first (`taskset -c CPUS wrk ...` when pinned).
    pub fn argv(&self, url: &str) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(cpus) = &self.pin {
            v.extend(["taskset".to_string(), "-c".to_string(), cpus.clone()]);
        }
        v.extend([
            "wrk".to_string(),
            format!("-t{}", self.threads.clamp(1, self.connections.max(1))),
            format!("-c{}", self.connections.max(1)),
            format!("-d{}s", self.duration.as_secs().max(1)),
            // A request unanswered this long counts as a timeout, not a latency; long enough
            // for a queue of 4,096 connections.
            "--timeout".to_string(),
            "10s".to_string(),
            "--latency".to_string(),
            url.to_string(),
        ]);
        v
    }
}

/// Runs `wrk` against `url` and reads its report.
pub fn run(load: &WrkLoad, url: &str) -> anyhow::Result<WrkFigures> {
    let argv = load.argv(url);
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .output()
        .with_context(|| format!("running {} (apt-get install wrk)", argv[0]))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "wrk failed ({}): {}{}",
            out.status,
            text,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    parse(&text).with_context(|| format!("reading wrk's report:\n{text}"))
}

/// A wrk duration such as `812.00us`, `1.61ms` or `1.02s`, in milliseconds.
fn duration_ms(s: &str) -> Option<f64> {
    let (num, scale) = if let Some(n) = s.strip_suffix("us") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60_000.0)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1000.0)
    } else {
        return None;
    };
    num.parse::<f64>().ok().map(|v| v * scale)
}

/// Reads `wrk --latency` output.
pub fn parse(text: &str) -> anyhow::Result<WrkFigures> {
    let (mut rps, mut requests) = (None, None);
    let (mut p50, mut p99) = (None, None);
    let (mut non_2xx, mut socket_errors) = (0, 0);
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Requests/sec:", v] => rps = v.parse::<f64>().ok(),
            ["50%", v] => p50 = duration_ms(v),
            ["99%", v] => p99 = duration_ms(v),
            ["Non-2xx", "or", "3xx", "responses:", v] => non_2xx = v.parse().unwrap_or(0),
            [n, "requests", "in", ..] => requests = n.parse::<u64>().ok(),
            ["Socket", "errors:", rest @ ..] => {
                // "Socket errors: connect 0, read 2, write 0, timeout 0"
                socket_errors = rest
                    .iter()
                    .filter_map(|w| w.trim_end_matches(',').parse::<u64>().ok())
                    .sum();
            }
            _ => {}
        }
    }
    match (rps, requests, p50, p99) {
        (Some(requests_per_second), Some(requests), Some(p50_ms), Some(p99_ms)) => Ok(WrkFigures {
            requests_per_second,
            requests,
            p50_ms,
            p99_ms,
            non_2xx,
            socket_errors,
        }),
        _ => bail!("no Requests/sec, requests, 50% or 99% line"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = "Running 5s test @ http://127.0.0.1:18000/r4/metadata
  2 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     2.22ms    2.52ms  25.49ms   92.63%
    Req/Sec     9.24k     2.59k   11.99k    84.31%
  Latency Distribution
     50%  812.00us
     75%    2.02ms
     90%    3.12ms
     99%   13.86ms
  93829 requests in 5.10s, 39.76MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 7
Requests/sec:  18398.26
Transfer/sec:      7.80MB
";

    #[test]
    fn reads_throughput_percentiles_and_errors() {
        let f = parse(REPORT).unwrap_or_else(|e| panic!("{e:#}"));
        assert_eq!(f.requests_per_second, 18398.26);
        assert_eq!(f.requests, 93829);
        assert!((f.ok_per_second() - 18398.26 * 93822.0 / 93829.0).abs() < 1e-6);
        assert!((f.p50_ms - 0.812).abs() < 1e-9);
        assert_eq!(f.p99_ms, 13.86);
        assert_eq!((f.non_2xx, f.socket_errors), (7, 3));
    }

    #[test]
    fn units_and_a_truncated_report() {
        assert_eq!(duration_ms("1.50s"), Some(1500.0));
        assert_eq!(duration_ms("2.00m"), Some(120_000.0));
        assert_eq!(duration_ms("12"), None);
        assert!(parse("Requests/sec: 10\n").is_err());
    }

    #[test]
    fn the_command_line_pinned_or_not() {
        let load = WrkLoad {
            threads: 2,
            connections: 256,
            duration: Duration::from_secs(10),
            pin: None,
        };
        let argv = load.argv("http://127.0.0.1:1/x");
        assert_eq!(argv[..4], ["wrk", "-t2", "-c256", "-d10s"]);
        assert_eq!(
            argv.last().map(String::as_str),
            Some("http://127.0.0.1:1/x")
        );
        let pinned = WrkLoad {
            pin: Some("1".into()),
            threads: 4,
            connections: 1,
            ..load
        };
        // wrk refuses more threads than connections.
        assert_eq!(
            pinned.argv("u")[..6],
            ["taskset", "-c", "1", "wrk", "-t1", "-c1"]
        );
    }
}
