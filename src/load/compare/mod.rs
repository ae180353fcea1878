//! `fhircluster-load compare`: fhircluster, nginx (`least_conn`, keep-alive) and HAProxy
//! (`leastconn`, `maxconn 16`, `timeout queue 1s`) in front of the same `fhirsmith-sim`
//! processes, in turn, over several rounds, plus the raw overhead against one process direct,
//! fhircluster's memory and its scheduler's speed; one table of medians with ratios against
//! fhircluster and the targets checked, and the probe's latency during the surge as an SVG.
//!
//! Needs `nginx`, `haproxy` and `wrk` on the PATH; the pure parts (configs, wrk's report, the
//! table, the chart) are tested without them.

pub mod clients;
pub mod conf;
pub mod figures;
pub mod ports;
pub mod procs;
pub mod run;
pub mod svg;
pub mod table;
pub mod wrk;

use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// Which parts of the comparison run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Only {
    /// Everything: the raw run, the surge, the sessions, the memory figures, the scheduler.
    All,
    /// fhircluster's memory figures only (idle, idle clients, waiting requests): no wrk, no
    /// surge, no sessions, no scheduler benchmark.
    Memory,
}

#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// Rounds; each runs every front door once (the table gives medians).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Where the JSON results and the table go.
    #[arg(long, default_value = "target/compare")]
    pub out_dir: PathBuf,
    /// Where the probe chart (SVG) goes.
    #[arg(long, default_value = "tests/perf/surge-probe.svg")]
    pub chart: PathBuf,
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
    /// wrk's length per front door (s; 0: no raw run).
    #[arg(long, default_value_t = 10)]
    pub wrk_seconds: u64,
    /// wrk's connections.
    #[arg(long, default_value_t = 32)]
    pub wrk_connections: u32,
    /// wrk's threads.
    #[arg(long, default_value_t = 2)]
    pub wrk_threads: u32,
    /// Threads of every front door: fhircluster's `proxyThreads`, nginx's worker processes,
    /// HAProxy's threads.
    #[arg(long, default_value_t = 1)]
    pub proxy_threads: u32,
    /// Requests each of the 8 cache sessions sends through fhircluster (0: no sessions).
    #[arg(long, default_value_t = 100)]
    pub sessions_requests: usize,
    /// Idle keep-alive clients for the memory figure (0: skip).
    #[arg(long, default_value_t = 10_000)]
    pub idle_clients: usize,
    /// Requests left waiting for the memory figure (0: skip).
    #[arg(long, default_value_t = 5_000)]
    pub waiting: usize,
    /// Skip the scheduler micro-benchmark (run in this process: its figure means something only
    /// in a release build).
    #[arg(long)]
    pub skip_scheduler: bool,
    /// Only these front doors (comma-separated: fhircluster,nginx,haproxy,direct).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fhircluster,nginx,haproxy,direct"
    )]
    pub doors: Vec<String>,
    /// A `server.cluster` setting for fhircluster's surge cluster, as `name=json` (repeatable,
    /// e.g. `--set maxOutstanding=8`): the same load against other settings than the defaults.
    #[arg(long = "set", value_parser = parse_setting)]
    pub settings: Vec<(String, serde_json::Value)>,
    /// Which parts run (`memory`: only fhircluster's memory figures).
    #[arg(long, value_enum, default_value = "all")]
    pub only: Only,
    /// Keep the temporary directory (configs and logs).
    #[arg(long)]
    pub keep: bool,
}

/// `name=value`, the value read as JSON (a bare word is a string).
fn parse_setting(s: &str) -> Result<(String, serde_json::Value), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected name=value"))?;
    let value = serde_json::from_str(value).unwrap_or_else(|_| serde_json::Value::from(value));
    Ok((name.trim().to_string(), value))
}

#[cfg(test)]
mod tests {
    use super::{parse_setting, CompareArgs, Only};
    use clap::Parser;
    use serde_json::json;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: CompareArgs,
    }

    #[test]
    fn only_memory_is_parsed_and_everything_is_the_default() {
        let all = Wrapper::try_parse_from(["compare"]).map(|w| w.args.only);
        assert_eq!(all.ok(), Some(Only::All));
        let mem = Wrapper::try_parse_from(["compare", "--only", "memory"]).map(|w| w.args.only);
        assert_eq!(mem.ok(), Some(Only::Memory));
        assert!(Wrapper::try_parse_from(["compare", "--only", "surge"]).is_err());
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
}
