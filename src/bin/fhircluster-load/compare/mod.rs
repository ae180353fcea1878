//! `fhircluster-load compare`: fhircluster, nginx (`least_conn`, keep-alive) and HAProxy
//! (`leastconn`, `maxconn 16`, `timeout queue 1s`) in front of the same upstreams, in turn, over
//! several interleaved rounds: raw throughput behind one `fhirsmith-sim` and behind a fast
//! upstream (a static nginx) against it direct, with each door's CPU per request; the surge;
//! fhircluster's memory against idle and queued connections; its scheduler's speed; and how
//! cost grows with connections and threads. Tables of medians with ratios against fhircluster
//! and the targets checked, and SVG charts.
//!
//! Needs `nginx`, `haproxy`, `wrk` and `taskset` on the PATH; the pure parts (configs, wrk's
//! report, the tables, the charts) are tested without them.

pub mod charts;
pub mod clients;
pub mod conf;
pub mod cpu;
pub mod curves;
pub mod fast;
pub mod fast_rows;
pub mod figures;
pub mod measure;
pub mod memory;
pub mod ports;
pub mod procs;
pub mod round;
pub mod run;
pub mod setup;
pub mod spread;
pub mod table;
pub mod upstream;
pub mod wrk;

use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// The parts of the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Part {
    /// Every part below.
    All,
    /// wrk through each door to one `fhirsmith-sim` (`--workers 0`), and to it direct.
    Raw,
    /// wrk through each door to the fast upstream, and to it direct: connections × wrk threads.
    Fast,
    /// The surge through fhircluster, nginx and HAProxy in front of the same cluster.
    Surge,
    /// IG-Publisher-like cache sessions through fhircluster.
    Sessions,
    /// fhircluster's RSS: idle, after the surges, with idle clients, with queued requests.
    Memory,
    /// The scheduler's decisions per second, in this process.
    Scheduler,
    /// How cost grows: throughput and p99 against connections, and against each door's threads
    /// with wrk and the upstream pinned (one run each, not rounds).
    Curves,
}

#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// Rounds; each runs every front door once (the tables give medians).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Where the JSON results and the tables go.
    #[arg(long, default_value = "target/compare")]
    pub out_dir: PathBuf,
    /// Where the charts (SVG) go, under fixed names: surge-probe.svg, memory.svg,
    /// connections-throughput.svg, connections-p99.svg, proxy-threads.svg.
    #[arg(long, default_value = "tests/perf")]
    pub chart_dir: PathBuf,
    /// The `fhircluster` binary (default: beside this one).
    #[arg(long)]
    pub fhircluster: Option<PathBuf>,
    /// The `fhirsmith-sim` binary (default: beside this one).
    #[arg(long)]
    pub sim: Option<PathBuf>,
    /// Tx-workers behind the master for the surge.
    #[arg(long, default_value_t = 2)]
    pub workers: u32,
    /// CPU of one `$expand`, the heavy request (ms).
    #[arg(long, default_value_t = 200)]
    pub expand_ms: u64,
    /// CPU of one `$lookup` (ms).
    #[arg(long, default_value_t = 4)]
    pub lookup_ms: u64,
    /// CPU of one `$validate-code` (ms).
    #[arg(long, default_value_t = 5)]
    pub validate_ms: u64,
    /// Surge length (s; 0: no surge).
    #[arg(long, default_value_t = 20.0)]
    pub surge_seconds: f64,
    /// How long the probe goes on after the surge (s).
    #[arg(long, default_value_t = 5.0)]
    pub after_seconds: f64,
    /// The surge as a multiple of the heavy capacity.
    #[arg(long, default_value_t = 3.0)]
    pub multiple: f64,
    /// Heavy capacity (req/s); default: the CPUs over the mix's mean cost.
    #[arg(long)]
    pub capacity: Option<f64>,
    /// Probe arrivals per second.
    #[arg(long, default_value_t = 20.0)]
    pub probe_rate: f64,
    /// wrk's length per run (s; 0: no raw, fast or curve runs).
    #[arg(long, default_value_t = 10)]
    pub wrk_seconds: u64,
    /// A wrk run, not measured, before each measured one (s; 0: none).
    #[arg(long, default_value_t = 2)]
    pub warm_seconds: u64,
    /// wrk's connections in the raw run.
    #[arg(long, default_value_t = 32)]
    pub wrk_connections: u32,
    /// wrk's threads in the raw run.
    #[arg(long, default_value_t = 2)]
    pub wrk_threads: u32,
    /// wrk's connections in the fast-upstream runs (each with each of --fast-wrk-threads).
    #[arg(long, value_delimiter = ',', default_value = "32,256")]
    pub fast_connections: Vec<u32>,
    /// wrk's threads in the fast-upstream runs.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub fast_wrk_threads: Vec<u32>,
    /// Threads of every front door: fhircluster's `proxyThreads`, nginx's worker processes,
    /// HAProxy's threads (all but the threads curve).
    #[arg(long, default_value_t = 1)]
    pub proxy_threads: u32,
    /// Requests each of the 8 cache sessions sends through fhircluster (0: no sessions).
    #[arg(long, default_value_t = 100)]
    pub sessions_requests: usize,
    /// Idle keep-alive clients at which fhircluster's RSS is read, added in steps (empty or 0:
    /// none). Counts the open-file limit cannot hold are lowered to what it can, and said so.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1000,2000,5000,10000,20000"
    )]
    pub idle_clients: Vec<usize>,
    /// Requests left waiting (queued) at which fhircluster's RSS is read, added in steps.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1000,2000,5000,10000,20000"
    )]
    pub waiting: Vec<usize>,
    /// Skip the scheduler micro-benchmark (run in this process: its figure means something only
    /// in a release build).
    #[arg(long)]
    pub skip_scheduler: bool,
    /// Connections of the throughput and p99 curve (fast upstream, one run each).
    #[arg(long, value_delimiter = ',', default_value = "32,256,1024,4096")]
    pub curve_connections: Vec<u32>,
    /// wrk's threads for the connections curve.
    #[arg(long, default_value_t = 2)]
    pub curve_wrk_threads: u32,
    /// Each front door's threads for the threads curve (fast upstream, wrk -t1, pinned).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub thread_counts: Vec<u32>,
    /// wrk's connections for the threads curve.
    #[arg(long, default_value_t = 256)]
    pub threads_connections: u32,
    /// CPUs wrk runs on in the threads curve (a `taskset -c` list; `last`: the last CPU;
    /// `none`: not pinned).
    #[arg(long, default_value = "last")]
    pub pin_load: String,
    /// CPUs the fast upstream runs on in the threads curve (as --pin-load), so the front door's
    /// threads get the other CPUs.
    #[arg(long, default_value = "last")]
    pub pin_upstream: String,
    /// Only these front doors (comma-separated: fhircluster,nginx,haproxy,direct).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fhircluster,nginx,haproxy,direct"
    )]
    pub doors: Vec<String>,
    /// A `server.cluster` setting for every fhircluster the comparison starts, as `name=json`
    /// (repeatable, e.g. `--set maxOutstanding=8`): the same load against other settings.
    #[arg(long = "set", value_parser = parse_setting)]
    pub settings: Vec<(String, serde_json::Value)>,
    /// Which parts run (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "all")]
    pub only: Vec<Part>,
    /// Keep the temporary directory (configs and logs).
    #[arg(long)]
    pub keep: bool,
}

impl CompareArgs {
    /// Whether `part` runs: chosen by `--only`, and not switched off by a 0 (`--wrk-seconds 0`
    /// and the like).
    pub fn runs(&self, part: Part) -> bool {
        let chosen = self.only.contains(&Part::All) || self.only.contains(&part);
        chosen
            && match part {
                Part::Raw | Part::Fast | Part::Curves => self.wrk_seconds > 0,
                Part::Surge => self.surge_seconds > 0.0,
                Part::Sessions => self.sessions_requests > 0,
                Part::Scheduler => !self.skip_scheduler,
                Part::All | Part::Memory => true,
            }
    }
}

/// `name=value`, the value read as JSON (a bare word is a string).
fn parse_setting(s: &str) -> Result<(String, serde_json::Value), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected name=value"))?;
    let value = serde_json::from_str(value).unwrap_or_else(|_| serde_json::Value::from(value));
    Ok((name.trim().to_string(), value))
}

/// A `--pin-*` value as a `taskset -c` CPU list: `none` is no pinning, `last` the last of
/// `cpus` CPUs; anything else must look like a CPU list (`1`, `0,2`, `2-3`).
pub fn cpu_list(spec: &str, cpus: usize) -> anyhow::Result<Option<String>> {
    match spec.trim() {
        "none" => Ok(None),
        "last" => Ok(Some(cpus.saturating_sub(1).to_string())),
        s if !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_digit() || c == ',' || c == '-') =>
        {
            Ok(Some(s.to_string()))
        }
        s => anyhow::bail!("{s:?} is not a CPU list (e.g. 1, 0,2 or 2-3), `last` or `none`"),
    }
}

#[cfg(test)]
mod tests {
    use super::{cpu_list, parse_setting, CompareArgs, Part};
    use clap::Parser;
    use serde_json::json;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: CompareArgs,
    }

    fn parse(args: &[&str]) -> Option<CompareArgs> {
        Wrapper::try_parse_from(std::iter::once("compare").chain(args.iter().copied()))
            .ok()
            .map(|w| w.args)
    }

    #[test]
    fn parts_are_chosen_and_a_zero_switches_one_off() {
        let all = parse(&[]).unwrap_or_else(|| panic!("defaults"));
        assert_eq!(all.only, [Part::All]);
        assert!(all.runs(Part::Fast) && all.runs(Part::Curves) && all.runs(Part::Scheduler));
        let some = parse(&["--only", "memory,fast"]).unwrap_or_else(|| panic!("parts"));
        assert!(some.runs(Part::Memory) && some.runs(Part::Fast));
        assert!(!some.runs(Part::Surge) && !some.runs(Part::Raw));
        let off = parse(&["--wrk-seconds", "0", "--skip-scheduler"]).unwrap_or_else(|| panic!());
        assert!(!off.runs(Part::Raw) && !off.runs(Part::Fast) && !off.runs(Part::Curves));
        assert!(!off.runs(Part::Scheduler) && off.runs(Part::Surge));
        assert!(parse(&["--only", "everything"]).is_none());
    }

    #[test]
    fn lists_parse_with_their_defaults() {
        let a = parse(&[]).unwrap_or_else(|| panic!("defaults"));
        assert_eq!(a.fast_connections, [32, 256]);
        assert_eq!(a.fast_wrk_threads, [1, 2]);
        assert_eq!(a.curve_connections, [32, 256, 1024, 4096]);
        assert_eq!(a.idle_clients, [1000, 2000, 5000, 10_000, 20_000]);
        assert_eq!(a.thread_counts, [1, 2]);
        let b = parse(&["--idle-clients", "200", "--waiting", "0"]).unwrap_or_else(|| panic!());
        assert_eq!((b.idle_clients, b.waiting), (vec![200], vec![0]));
    }

    #[test]
    fn a_setting_is_a_name_and_a_json_value() {
        assert_eq!(
            parse_setting("maxOutstanding=8"),
            Ok(("maxOutstanding".to_string(), json!(8)))
        );
        assert_eq!(
            parse_setting("balance=least"),
            Ok(("balance".to_string(), json!("least")))
        );
        assert!(parse_setting("maxOutstanding").is_err());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_list("last", 2).ok(), Some(Some("1".to_string())));
        assert_eq!(cpu_list("last", 16).ok(), Some(Some("15".to_string())));
        assert_eq!(cpu_list("none", 2).ok(), Some(None));
        assert_eq!(cpu_list("0,2-3", 4).ok(), Some(Some("0,2-3".to_string())));
        assert!(cpu_list("one", 2).is_err());
        assert!(cpu_list("", 2).is_err());
    }
}
