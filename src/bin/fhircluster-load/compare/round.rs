//! One round behind `fhirsmith-sim` processes: wrk through each door to one sim process (and to
//! it direct), the surge through fhircluster, nginx and HAProxy in front of the same cluster,
//! the cache sessions, fhircluster's memory, the scheduler; each door in turn, the order rotated
//! each round.

use std::thread::sleep;
use std::time::Duration;

use serde_json::json;

use super::cpu::ProcSet;
use super::fast::warm;
use super::figures::{Round, SurgeFigures, SURGE_DOORS};
use super::measure::{self, Through};
use super::memory::{idle_curve, waiting_curve};
use super::procs::{rss_mb, wait_quiet};
use super::setup::{log, note, Proxy, Setup, RAW_PATH};
use super::table::Door;
use super::wrk::WrkLoad;
use super::Part;
use crate::cli::{SessionsArgs, SurgeArgs};
use crate::{sessions, surge};

const HANG_PATH: &str = "/r4/ValueSet/$expand?url=http%3A%2F%2Fexample.org%2Fvs&_sim_hang=1";

/// The heavy requests the machine can answer a second: the CPUs over the mix's mean cost.
pub fn capacity(s: &Setup) -> f64 {
    let a = s.args;
    a.capacity.unwrap_or_else(|| {
        // The surge's default mix: 1 $expand, 2 small and 1 large $validate-code.
        let mean_ms = (a.expand_ms as f64 + 3.0 * a.validate_ms as f64) / 4.0;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        cpus * 1000.0 / mean_ms.max(1.0)
    })
}

fn surge_through(s: &Setup, port: u16) -> anyhow::Result<SurgeFigures> {
    let a = s.args;
    let args = SurgeArgs {
        base: format!("http://127.0.0.1:{port}"),
        seconds: a.surge_seconds,
        rate: Some(a.multiple * capacity(s)),
        multiple: None,
        capacity: None,
        concurrency: 256,
        probe_rate: a.probe_rate,
        probe_concurrency: 32,
        after_seconds: a.after_seconds,
        timeout: 10.0,
        expand_weight: 1,
        small_weight: 2,
        large_weight: 1,
        expand_url: "http://hl7.org/fhir/ValueSet/observation-codes".into(),
        probe_system: "http://loinc.org".into(),
        probe_code: "8480-6".into(),
        fast_ms: 10.0,
        json: true,
    };
    let config = args.validate()?;
    let report = s.runtime.block_on(surge::run(&config));
    Ok(SurgeFigures::of(&report))
}

fn sessions_through(s: &Setup, port: u16, round: &mut Round) -> anyhow::Result<()> {
    let args = SessionsArgs {
        base: format!("http://127.0.0.1:{port}"),
        clients: 8,
        requests: s.args.sessions_requests,
        timeout: 10.0,
        max_seconds: 60.0,
        json: true,
    };
    let report = s.runtime.block_on(sessions::run(&args.validate()?));
    round.sessions_cache_id_unknown = Some(report.cache_id_unknown);
    round.sessions_requests_2xx = Some(report.requests.status_2xx);
    Ok(())
}

fn quiet(ports: &[u16]) -> bool {
    wait_quiet(
        ports,
        RAW_PATH,
        Duration::from_millis(20),
        Duration::from_secs(180),
    )
}

/// One round; `idle` and `waiting` are the counts of the memory curves (fitted to the limit).
pub fn one_round(s: &Setup, n: usize, idle: &[usize], waiting: &[usize]) -> anyhow::Result<Round> {
    let a = s.args;
    let mut round = Round::default();
    // The raw run's one process, and the surge's cluster (fhircluster with its defaults).
    let raw = s.sim_cluster("raw", 0, json!({}))?;
    let surge_cluster = s.sim_cluster("surge", a.workers, json!({}))?;
    sleep(Duration::from_millis(500));
    round.rss_idle_mb = rss_mb(surge_cluster.guard.pid());
    let needs_proxies = a.runs(Part::Raw) || a.runs(Part::Surge);
    let (nginx, haproxy) = if needs_proxies {
        s.proxies(
            &[
                ("raw", &raw.process_ports),
                ("surge", &surge_cluster.process_ports),
            ],
            a.proxy_threads,
            a.wrk_connections + 1_000,
        )?
    } else {
        (None, None)
    };
    // Where each door's front is for a site, and its processes.
    let fronts = |site: &str, fc: (u16, ProcSet), direct: Option<u16>| {
        let proxy = |p: &Option<Proxy>| {
            let p = p.as_ref()?;
            Some((p.conf.front(site)?, p.procs.clone()))
        };
        Door::ALL.map(|d| match d {
            Door::Fhircluster => Some(fc.clone()),
            Door::Nginx => proxy(&nginx),
            Door::Haproxy => proxy(&haproxy),
            Door::Direct => direct.map(|port| (port, ProcSet::default())),
        })
    };
    let raw_fronts = fronts("raw", (raw.port, raw.door()), Some(raw.process_ports[0]));
    let surge_fronts = fronts("surge", (surge_cluster.port, surge_cluster.door()), None);

    if a.runs(Part::Raw) {
        let load = WrkLoad {
            threads: a.wrk_threads,
            connections: a.wrk_connections,
            duration: Duration::from_secs(a.wrk_seconds),
            pin: None,
        };
        let upstream = raw.upstream();
        for door in s.rotated(&Door::ALL, n) {
            let Some((port, procs)) = raw_fronts[door.index()].clone() else {
                continue;
            };
            let through = Through {
                port,
                url: format!("http://127.0.0.1:{port}{RAW_PATH}"),
                door: procs,
                upstream: upstream.clone(),
            };
            log(&format!("round {}: wrk through {}", n + 1, door.name()));
            round.raw[door.index()] = note("wrk", measure::run(&load, &through, warm(a)));
        }
    }
    drop(raw);

    if a.runs(Part::Surge) {
        for door in s.rotated(&SURGE_DOORS, n) {
            let Some((port, _)) = surge_fronts[door.index()].clone() else {
                continue;
            };
            if !quiet(&surge_cluster.process_ports) {
                log("the processes were still busy after 180 s; surging anyway");
            }
            log(&format!("round {}: surge through {}", n + 1, door.name()));
            let i = SURGE_DOORS.iter().position(|&d| d == door).unwrap_or(0);
            round.surge[i] = note("surge", surge_through(s, port));
            if let Some(f) = &round.surge[i] {
                log(&format!(
                    "  goodput {:.1}/s, {} within the surge, probe p50 {:?} ms, back under in {:.1} s",
                    f.goodput_per_second,
                    f.heavy_within_surge,
                    f.probe_p50_ms,
                    f.back_under_ms / 1000.0
                ));
            }
        }
    }
    drop(nginx);
    drop(haproxy);
    quiet(&surge_cluster.process_ports);
    if s.wants(Door::Fhircluster) {
        if a.runs(Part::Sessions) {
            log(&format!("round {}: sessions through fhircluster", n + 1));
            note(
                "sessions",
                sessions_through(s, surge_cluster.port, &mut round),
            );
        }
        if a.runs(Part::Memory) {
            if a.runs(Part::Surge) {
                sleep(Duration::from_secs(1));
                round.rss_after_surge_mb = rss_mb(surge_cluster.guard.pid());
            }
            if !idle.is_empty() {
                log(&format!("round {}: idle clients {idle:?}", n + 1));
                round.idle_clients = note(
                    "idle clients",
                    idle_curve(
                        surge_cluster.port,
                        RAW_PATH,
                        surge_cluster.guard.pid(),
                        idle,
                    ),
                )
                .unwrap_or_default();
            }
        }
    }
    drop(surge_cluster);

    if s.wants(Door::Fhircluster) && a.runs(Part::Memory) && !waiting.is_empty() {
        log(&format!("round {}: waiting requests {waiting:?}", n + 1));
        let c = s.sim_cluster(
            "waiting",
            a.workers,
            json!({ "queueSeconds": 600, "upstreamTimeoutSeconds": 0, "drainSeconds": 0 }),
        )?;
        round.waiting = note(
            "waiting requests",
            waiting_curve(c.port, HANG_PATH, c.guard.pid(), waiting),
        )
        .unwrap_or_default();
    }
    if a.runs(Part::Scheduler) {
        log(&format!("round {}: scheduler micro-benchmark", n + 1));
        round.scheduler_decisions_per_second = note("scheduler", scheduler_bench(2_000_000));
    }
    Ok(round)
}

/// The scheduler's decisions per second over `requests`, in this process (the figure means
/// something only in a release build).
fn scheduler_bench(requests: u64) -> anyhow::Result<f64> {
    let f = fhircluster::proxy::scheduler::bench::admit_and_complete(requests);
    if f.dispatched != f.requests || f.left_over != 0 {
        anyhow::bail!("unsound run: {f:?}");
    }
    Ok(f.decisions_per_second)
}

/// Whether a round behind the sims has anything to do.
pub fn wanted(s: &Setup) -> bool {
    let a = s.args;
    [
        Part::Raw,
        Part::Surge,
        Part::Sessions,
        Part::Memory,
        Part::Scheduler,
    ]
    .into_iter()
    .any(|p| a.runs(p))
}

#[cfg(test)]
mod tests {
    use super::scheduler_bench;

    #[test]
    fn the_scheduler_is_measured_in_this_process() {
        assert!(scheduler_bench(10_000).is_ok_and(|d| d > 0.0));
    }
}
