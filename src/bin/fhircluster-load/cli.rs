//! The command line of `fhircluster-load`: raw flags (clap), validated into a run's config,
//! then run on a single-threaded runtime and reported as text or JSON.
//!
//! Every run is bounded: at most `MAX_REQUESTS` requests and `MAX_SECONDS` of load, and each
//! request ends at its timeout, so the tool always stops by itself.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};

use super::compare::CompareArgs;
use super::requests::HeavyKind;
use super::schedule::arrival_count;
use super::sessions::{self, SessionsConfig};
use super::surge::{self, SurgeConfig};
use super::target::parse_base;

/// The most requests one run may send (heavy and probe together, or all sessions' requests).
pub const MAX_REQUESTS: u64 = 1_000_000;
/// The longest a surge, its after-probe, or a sessions run may last.
pub const MAX_SECONDS: f64 = 3_600.0;
/// The longest client timeout.
pub const MAX_TIMEOUT_SECONDS: f64 = 600.0;

#[derive(Debug, Parser)]
#[command(
    name = "fhircluster-load",
    version,
    about = "Load generator for fhircluster benchmarks (loopback targets only)"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Heavy open-loop load at a chosen rate, plus a `$lookup` probe on its own connections.
    Surge(SurgeArgs),
    /// IG-Publisher-like clients: `$cache-control`, then requests with the cache-id.
    Sessions(SessionsArgs),
    /// fhircluster, nginx and HAProxy in front of the same upstreams (the sims, a fast static
    /// nginx), round after round: tables of medians with CPU per request against the targets,
    /// memory and cost curves, SVG charts. Needs nginx, haproxy, wrk and taskset; takes about
    /// 30 minutes with every part (`--only` picks some).
    Compare(Box<CompareArgs>),
}

#[derive(Debug, Args)]
pub struct SurgeArgs {
    /// Base URL of the server (http, loopback only), e.g. http://127.0.0.1:8080
    #[arg(long)]
    pub base: String,
    /// How long the heavy load lasts, in seconds.
    #[arg(long, default_value_t = 30.0)]
    pub seconds: f64,
    /// Heavy arrivals per second.
    #[arg(long, conflicts_with_all = ["multiple", "capacity"])]
    pub rate: Option<f64>,
    /// Heavy arrivals as a multiple of --capacity (e.g. 3 for a 3x surge).
    #[arg(long, requires = "capacity")]
    pub multiple: Option<f64>,
    /// The server's capacity in heavy requests per second, for --multiple.
    #[arg(long, requires = "multiple")]
    pub capacity: Option<f64>,
    /// Most heavy requests in flight (and connections) at once; arrivals beyond are unsent.
    #[arg(long, default_value_t = 256)]
    pub concurrency: usize,
    /// Probe (`$lookup`) arrivals per second.
    #[arg(long, default_value_t = 20.0)]
    pub probe_rate: f64,
    /// Most probes in flight at once.
    #[arg(long, default_value_t = 32)]
    pub probe_concurrency: usize,
    /// Seconds to keep probing after the surge ends.
    #[arg(long, default_value_t = 10.0)]
    pub after_seconds: f64,
    /// Client timeout per request, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub timeout: f64,
    /// Weight of `GET ValueSet/$expand` in the heavy mix.
    #[arg(long, default_value_t = 1)]
    pub expand_weight: u32,
    /// Weight of the small (~450 B) `POST CodeSystem/$validate-code` in the heavy mix.
    #[arg(long, default_value_t = 2)]
    pub small_weight: u32,
    /// Weight of the large (~4 KB) `POST CodeSystem/$validate-code` in the heavy mix.
    #[arg(long, default_value_t = 1)]
    pub large_weight: u32,
    /// The value set `$expand` asks for.
    #[arg(long, default_value = "http://hl7.org/fhir/ValueSet/observation-codes")]
    pub expand_url: String,
    /// The probe's code system.
    #[arg(long, default_value = "http://loinc.org")]
    pub probe_system: String,
    /// The probe's code.
    #[arg(long, default_value = "8480-6")]
    pub probe_code: String,
    /// A probe answered 2xx under this many ms is fast (for "back under" after the surge).
    #[arg(long, default_value_t = 10.0)]
    pub fast_ms: f64,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// Base URL of the server (http, loopback only), e.g. http://127.0.0.1:8080
    #[arg(long)]
    pub base: String,
    /// How many clients run at once, each with its own cache and connection.
    #[arg(long, default_value_t = 8)]
    pub clients: usize,
    /// Requests each client sends with its cache-id.
    #[arg(long, default_value_t = 100)]
    pub requests: usize,
    /// Client timeout per request, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub timeout: f64,
    /// Stop sending after this many seconds, whatever is left.
    #[arg(long, default_value_t = 120.0)]
    pub max_seconds: f64,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

fn seconds(name: &str, value: f64, max: f64) -> anyhow::Result<Duration> {
    if !(value.is_finite() && value > 0.0 && value <= max) {
        bail!("--{name} must be above 0 and at most {max} (got {value})");
    }
    Ok(Duration::from_secs_f64(value))
}

fn positive(name: &str, value: f64) -> anyhow::Result<f64> {
    if !(value.is_finite() && value > 0.0) {
        bail!("--{name} must be a number above 0 (got {value})");
    }
    Ok(value)
}

fn in_range(name: &str, value: usize, max: usize) -> anyhow::Result<usize> {
    if value == 0 || value > max {
        bail!("--{name} must be 1 to {max} (got {value})");
    }
    Ok(value)
}

impl SurgeArgs {
    pub fn validate(&self) -> anyhow::Result<SurgeConfig> {
        let target = parse_base(&self.base)?;
        let surge = seconds("seconds", self.seconds, MAX_SECONDS)?;
        let after = if self.after_seconds == 0.0 {
            Duration::ZERO
        } else {
            seconds("after-seconds", self.after_seconds, MAX_SECONDS)?
        };
        let rate = match (self.rate, self.multiple, self.capacity) {
            (Some(rate), _, _) => positive("rate", rate)?,
            (None, Some(m), Some(c)) => positive("multiple", m)? * positive("capacity", c)?,
            _ => bail!("give the heavy rate: --rate R, or --multiple X with --capacity C"),
        };
        let probe_rate = positive("probe-rate", self.probe_rate)?;
        let weights = [self.expand_weight, self.small_weight, self.large_weight];
        debug_assert_eq!(weights.len(), HeavyKind::ALL.len());
        if weights.iter().all(|&w| w == 0) {
            bail!("the heavy mix needs at least one weight above 0");
        }
        let total =
            arrival_count(rate, surge).saturating_add(arrival_count(probe_rate, surge + after));
        if total > MAX_REQUESTS {
            bail!("this run would send {total} requests, over the cap of {MAX_REQUESTS}: lower --rate, --probe-rate or --seconds");
        }
        Ok(SurgeConfig {
            base: self.base.clone(),
            target,
            seconds: surge,
            rate,
            concurrency: in_range("concurrency", self.concurrency, 10_000)?,
            probe_rate,
            probe_concurrency: in_range("probe-concurrency", self.probe_concurrency, 1_000)?,
            after,
            timeout: seconds("timeout", self.timeout, MAX_TIMEOUT_SECONDS)?,
            weights,
            expand_url: self.expand_url.clone(),
            probe_system: self.probe_system.clone(),
            probe_code: self.probe_code.clone(),
            fast_threshold: Duration::from_secs_f64(positive("fast-ms", self.fast_ms)? / 1000.0),
        })
    }
}

impl SessionsArgs {
    pub fn validate(&self) -> anyhow::Result<SessionsConfig> {
        let target = parse_base(&self.base)?;
        let clients = in_range("clients", self.clients, 10_000)?;
        let requests = in_range("requests", self.requests, MAX_REQUESTS as usize)?;
        // Each request may be followed by a new `$cache-control` after a cache-id-unknown.
        let most = (clients as u64).saturating_mul(2 * requests as u64 + 1);
        if most > MAX_REQUESTS {
            bail!(
                "--clients x --requests could send {most} requests, over the cap of {MAX_REQUESTS}"
            );
        }
        Ok(SessionsConfig {
            base: self.base.clone(),
            target,
            clients,
            requests,
            timeout: seconds("timeout", self.timeout, MAX_TIMEOUT_SECONDS)?,
            max_duration: seconds("max-seconds", self.max_seconds, MAX_SECONDS)?,
        })
    }
}

/// The whole program after argument parsing: validate, run, print. Exit 0 when the run
/// completed (whatever the server answered), 2 for a bad command line, 1 when the run could
/// not be made.
pub fn run(cli: Cli) -> ExitCode {
    match run_inner(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fhircluster-load: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn run_inner(cli: Cli) -> anyhow::Result<ExitCode> {
    // One thread: on a small machine the tool must leave the cores to the server it measures.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let output = match &cli.command {
        Command::Surge(args) => {
            let config = match args.validate() {
                Ok(c) => c,
                Err(e) => return Ok(usage(e)),
            };
            let report = runtime.block_on(surge::run(&config));
            if args.json {
                serde_json::to_string(&report)?
            } else {
                surge::text(&report)
            }
        }
        Command::Sessions(args) => {
            let config = match args.validate() {
                Ok(c) => c,
                Err(e) => return Ok(usage(e)),
            };
            let report = runtime.block_on(sessions::run(&config));
            if args.json {
                serde_json::to_string(&report)?
            } else {
                sessions::text(&report)
            }
        }
        Command::Compare(args) => {
            super::compare::run::run(args, &runtime)?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    println!("{output}");
    Ok(ExitCode::SUCCESS)
}

fn usage(e: anyhow::Error) -> ExitCode {
    eprintln!("fhircluster-load: {e:#}");
    ExitCode::from(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> anyhow::Result<Cli> {
        Ok(Cli::try_parse_from(
            std::iter::once("fhircluster-load").chain(args.iter().copied()),
        )?)
    }

    fn surge(args: &[&str]) -> anyhow::Result<SurgeConfig> {
        match parse(&[&["surge"], args].concat())?.command {
            Command::Surge(a) => a.validate(),
            _ => bail!("parsed as another subcommand"),
        }
    }

    fn sessions(args: &[&str]) -> anyhow::Result<SessionsConfig> {
        match parse(&[&["sessions"], args].concat())?.command {
            Command::Sessions(a) => a.validate(),
            _ => bail!("parsed as another subcommand"),
        }
    }

    #[test]
    fn surge_takes_a_rate_or_a_multiple_of_capacity() {
        let c = surge(&["--base", "http://127.0.0.1:8080", "--rate", "100"]).expect("rate");
        assert_eq!(
            (c.rate, c.seconds, c.probe_rate),
            (100.0, Duration::from_secs(30), 20.0)
        );
        assert_eq!(
            (c.weights, c.fast_threshold),
            ([1, 2, 1], Duration::from_millis(10))
        );
        let c = surge(&[
            "--base",
            "http://localhost:1",
            "--multiple",
            "3",
            "--capacity",
            "400",
            "--seconds",
            "2",
        ])
        .expect("multiple");
        assert_eq!((c.rate, c.seconds), (1200.0, Duration::from_secs(2)));
        assert!(surge(&["--base", "http://127.0.0.1:1"]).is_err());
        assert!(surge(&["--base", "http://127.0.0.1:1", "--multiple", "3"]).is_err());
        assert!(surge(&[
            "--base",
            "http://127.0.0.1:1",
            "--rate",
            "3",
            "--multiple",
            "3",
            "--capacity",
            "1"
        ])
        .is_err());
    }

    #[test]
    fn surge_is_bounded_in_count_time_and_target() {
        let refused =
            surge(&["--base", "http://10.1.2.3:8080", "--rate", "10"]).expect_err("private host");
        assert!(format!("{refused:#}").contains("loopback"), "{refused:#}");
        let too_many = surge(&[
            "--base",
            "http://127.0.0.1:1",
            "--rate",
            "1000",
            "--seconds",
            "1001",
        ])
        .expect_err("cap");
        assert!(format!("{too_many:#}").contains("cap"), "{too_many:#}");
        assert!(surge(&[
            "--base",
            "http://127.0.0.1:1",
            "--rate",
            "1",
            "--seconds",
            "3601"
        ])
        .is_err());
        assert!(surge(&[
            "--base",
            "http://127.0.0.1:1",
            "--rate",
            "1",
            "--timeout",
            "0"
        ])
        .is_err());
        assert!(surge(&["--base", "http://127.0.0.1:1", "--rate", "-1"]).is_err());
        assert!(surge(&[
            "--base",
            "http://127.0.0.1:1",
            "--rate",
            "1",
            "--concurrency",
            "0"
        ])
        .is_err());
        let no_mix = [
            "--expand-weight",
            "0",
            "--small-weight",
            "0",
            "--large-weight",
            "0",
        ];
        assert!(surge(
            &[
                &["--base", "http://127.0.0.1:1", "--rate", "1"][..],
                &no_mix
            ]
            .concat()
        )
        .is_err());
        let c = surge(&[
            "--base",
            "http://127.0.0.1:1",
            "--rate",
            "1",
            "--after-seconds",
            "0",
        ])
        .expect("no after");
        assert_eq!(c.after, Duration::ZERO);
    }

    #[test]
    fn sessions_are_bounded_too() {
        let c = sessions(&[
            "--base",
            "http://127.0.0.1:9",
            "--clients",
            "3",
            "--requests",
            "5",
        ])
        .expect("sessions");
        assert_eq!(
            (c.clients, c.requests, c.max_duration),
            (3, 5, Duration::from_secs(120))
        );
        assert!(sessions(&[
            "--base",
            "http://127.0.0.1:9",
            "--clients",
            "1000",
            "--requests",
            "1000"
        ])
        .is_err());
        assert!(sessions(&["--base", "http://example.com", "--clients", "1"]).is_err());
        assert!(sessions(&["--base", "http://127.0.0.1:9", "--max-seconds", "0"]).is_err());
    }
}
