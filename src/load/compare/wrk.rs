//! Raw proxy overhead with `wrk`: small responses from one fast upstream, many connections; the
//! figures are requests per second and the 99th percentile of latency (`--latency`).

use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Serialize;

/// What one `wrk` run measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WrkFigures {
    pub requests_per_second: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Responses that were not 2xx or 3xx (0 unless something went wrong).
    pub non_2xx: u64,
    /// Connect, read, write and timeout errors together.
    pub socket_errors: u64,
}

/// How `wrk` is run.
#[derive(Debug, Clone, Copy)]
pub struct WrkLoad {
    pub threads: u32,
    pub connections: u32,
    pub duration: Duration,
}

/// Runs `wrk` against `url` and reads its report.
pub fn run(load: &WrkLoad, url: &str) -> anyhow::Result<WrkFigures> {
    let out = Command::new("wrk")
        .arg(format!("-t{}", load.threads))
        .arg(format!("-c{}", load.connections))
        .arg(format!("-d{}s", load.duration.as_secs().max(1)))
        .arg("--latency")
        .arg(url)
        .output()
        .context("running wrk (apt-get install wrk)")?;
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
    let mut rps = None;
    let (mut p50, mut p99) = (None, None);
    let (mut non_2xx, mut socket_errors) = (0, 0);
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Requests/sec:", v] => rps = v.parse::<f64>().ok(),
            ["50%", v] => p50 = duration_ms(v),
            ["99%", v] => p99 = duration_ms(v),
            ["Non-2xx", "or", "3xx", "responses:", v] => non_2xx = v.parse().unwrap_or(0),
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
    match (rps, p50, p99) {
        (Some(requests_per_second), Some(p50_ms), Some(p99_ms)) => Ok(WrkFigures {
            requests_per_second,
            p50_ms,
            p99_ms,
            non_2xx,
            socket_errors,
        }),
        _ => bail!("no Requests/sec, 50% or 99% line"),
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
}
