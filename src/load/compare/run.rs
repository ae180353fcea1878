//! The comparison's shell: starts the clusters and proxies, runs each front door in turn, round
//! after round (the order rotated each round), and writes the table, the JSON and the chart.
//! Every process it starts is held by a `Guard`, so an error anywhere still ends them all.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread::sleep;
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::{json, Value};

use super::clients::{answered, idle_clients, raise_fd_limit, waiting_requests};
use super::conf::{self, ProxyPorts};
use super::figures::{rows, Labels, Round, SurgeFigures, SURGE_DOORS};
use super::ports::free_ports;
use super::procs::{rss_mb, wait_ok, wait_quiet, Guard, WorkDir};
use super::svg::{self, Chart, Series};
use super::table::{markdown, Door};
use super::wrk::{self, WrkLoad};
use super::{CompareArgs, Only};
use crate::load::cli::{SessionsArgs, SurgeArgs};
use crate::load::{sessions, surge};

const RAW_PATH: &str = "/r4/metadata";
const HANG_PATH: &str = "/r4/ValueSet/$expand?url=http%3A%2F%2Fexample.org%2Fvs&_sim_hang=1";

/// A running fhircluster with its processes.
struct Cluster {
    guard: Guard,
    port: u16,
    process_ports: Vec<u16>,
}

struct Setup<'a> {
    args: &'a CompareArgs,
    fhircluster: PathBuf,
    sim: PathBuf,
    work: WorkDir,
    runtime: &'a tokio::runtime::Runtime,
}

fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("finding this program")?;
    Ok(exe.with_file_name(name))
}

fn version(cmd: &str, arg: &str) -> String {
    Command::new(cmd)
        .arg(arg)
        .output()
        .ok()
        .and_then(|o| {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            text.lines().next().map(|l| l.trim().to_string())
        })
        .unwrap_or_else(|| format!("{cmd}: not found"))
}

impl Setup<'_> {
    fn wants(&self, door: Door) -> bool {
        let name = door.name().to_ascii_lowercase();
        self.args
            .doors
            .iter()
            .any(|d| d.eq_ignore_ascii_case(&name))
    }

    /// Starts fhircluster with `workers` and the settings in `cluster`, and waits for every
    /// process to answer.
    fn cluster(&self, name: &str, workers: u32, cluster: Value) -> anyhow::Result<Cluster> {
        let dir = self.work.sub(name)?;
        let base = free_ports(workers as u16 + 2)?;
        let mut settings = json!({
            "workers": workers,
            "internalPort": base + 1,
            "command": [self.sim],
            "killSeconds": 5,
            // The same number of threads for every front door.
            "proxyThreads": self.args.proxy_threads
        });
        if let (Some(s), Value::Object(extra)) = (settings.as_object_mut(), cluster) {
            s.extend(extra);
        }
        let config = json!({
            "server": { "port": base, "cluster": settings },
            "modules": { "tx": { "endpoints": [ { "path": "/r4" } ] } }
        });
        std::fs::write(dir.join("config.json"), serde_json::to_vec_pretty(&config)?)?;
        let a = self.args;
        let mut cmd = Command::new(&self.fhircluster);
        cmd.arg("--data-dir")
            .arg(&dir)
            .env("RUST_LOG", "warn")
            .env("SIM_COST_METADATA_MS", "0")
            .env("SIM_COST_LOOKUP_MS", a.lookup_ms.to_string())
            .env("SIM_COST_VALIDATE_MS", a.validate_ms.to_string())
            .env("SIM_COST_EXPAND_MS", a.expand_ms.to_string())
            .env_remove("PORT")
            .env_remove("FHIRSMITH_WORKERS")
            .env_remove("FHIRSMITH_DATA_DIR");
        let mut guard = Guard::spawn(name, &mut cmd, &dir.join("log"))?;
        let process_ports: Vec<u16> = (1..=workers as u16 + 1).map(|i| base + i).collect();
        for &p in std::iter::once(&base).chain(&process_ports) {
            wait_ok(p, RAW_PATH, Duration::from_secs(30))
                .with_context(|| format!("{name} (log: {})", dir.join("log").display()))?;
        }
        guard.check_running()?;
        guard.adopt_children();
        Ok(Cluster {
            guard,
            port: base,
            process_ports,
        })
    }

    fn nginx(&self, ports: &ProxyPorts) -> anyhow::Result<Guard> {
        let dir = self.work.sub("nginx")?;
        let file = dir.join("nginx.conf");
        std::fs::write(&file, conf::nginx(&dir, ports))?;
        let mut cmd = Command::new("nginx");
        cmd.arg("-p")
            .arg(&dir)
            .arg("-e")
            .arg(dir.join("error.log"))
            .arg("-c")
            .arg(&file);
        let mut g = Guard::spawn("nginx", &mut cmd, &dir.join("stdout.log"))?;
        wait_ok(ports.raw_front, RAW_PATH, Duration::from_secs(10))
            .with_context(|| format!("nginx (see {})", dir.display()))?;
        g.check_running()?;
        Ok(g)
    }

    fn haproxy(&self, ports: &ProxyPorts) -> anyhow::Result<Guard> {
        let dir = self.work.sub("haproxy")?;
        let file = dir.join("haproxy.cfg");
        std::fs::write(&file, conf::haproxy(ports))?;
        let mut cmd = Command::new("haproxy");
        cmd.arg("-f").arg(&file).arg("-db");
        let mut g = Guard::spawn("haproxy", &mut cmd, &dir.join("stdout.log"))?;
        wait_ok(ports.raw_front, RAW_PATH, Duration::from_secs(10))
            .with_context(|| format!("haproxy (see {})", dir.display()))?;
        g.check_running()?;
        Ok(g)
    }

    fn capacity(&self) -> f64 {
        let a = self.args;
        a.capacity.unwrap_or_else(|| {
            // The surge's default mix: 1 $expand, 2 small and 1 large $validate-code.
            let mean_ms = (a.expand_ms as f64 + 3.0 * a.validate_ms as f64) / 4.0;
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
            cpus * 1000.0 / mean_ms.max(1.0)
        })
    }

    fn surge(&self, port: u16) -> anyhow::Result<SurgeFigures> {
        let a = self.args;
        let args = SurgeArgs {
            base: format!("http://127.0.0.1:{port}"),
            seconds: a.surge_seconds,
            rate: Some(a.multiple * self.capacity()),
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
        let report = self.runtime.block_on(surge::run(&config));
        Ok(SurgeFigures::of(&report))
    }

    fn sessions(&self, port: u16, round: &mut Round) -> anyhow::Result<()> {
        let args = SessionsArgs {
            base: format!("http://127.0.0.1:{port}"),
            clients: 8,
            requests: self.args.sessions_requests,
            timeout: 10.0,
            max_seconds: 60.0,
            json: true,
        };
        let report = self.runtime.block_on(sessions::run(&args.validate()?));
        round.sessions_cache_id_unknown = Some(report.cache_id_unknown);
        round.sessions_requests_2xx = Some(report.requests.status_2xx);
        Ok(())
    }
}

/// The scheduler's decisions per second, in this process (the figure means something only in a
/// release build).
fn scheduler_bench() -> anyhow::Result<f64> {
    let f = crate::proxy::scheduler::bench::admit_and_complete(2_000_000);
    if f.dispatched != f.requests || f.left_over != 0 {
        bail!("unsound run: {f:?}");
    }
    Ok(f.decisions_per_second)
}

fn log(msg: &str) {
    eprintln!("compare: {msg}");
}

fn note<T>(what: &str, r: anyhow::Result<T>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            log(&format!("{what} failed: {e:#}"));
            None
        }
    }
}

fn one_round(s: &Setup, n: usize) -> anyhow::Result<Round> {
    let mut round = Round::default();
    // The raw run's one process, and the surge's cluster (fhircluster with its defaults).
    let raw = s.cluster("raw", 0, json!({}))?;
    let settings: serde_json::Map<String, Value> = s.args.settings.iter().cloned().collect();
    let surge_cluster = s.cluster("surge", s.args.workers, Value::Object(settings))?;
    sleep(Duration::from_millis(500));
    round.rss_idle_mb = rss_mb(surge_cluster.guard.pid());
    let ports = ProxyPorts {
        raw_front: free_ports(1)?,
        raw_upstream: raw.process_ports[0],
        surge_front: free_ports(1)?,
        surge_upstreams: surge_cluster.process_ports.clone(),
        threads: s.args.proxy_threads,
    };
    let nginx_ports = ports.clone();
    let haproxy_ports = ProxyPorts {
        raw_front: free_ports(1)?,
        surge_front: free_ports(1)?,
        ..ports
    };
    let nginx = if s.wants(Door::Nginx) {
        Some(s.nginx(&nginx_ports)?)
    } else {
        None
    };
    let haproxy = if s.wants(Door::Haproxy) {
        Some(s.haproxy(&haproxy_ports)?)
    } else {
        None
    };
    let (raw_port, direct_port, surge_port) = (raw.port, raw.process_ports[0], surge_cluster.port);
    let (have_nginx, have_haproxy) = (nginx.is_some(), haproxy.is_some());
    let front = |d: Door, raw_run: bool| match d {
        Door::Fhircluster => Some(if raw_run { raw_port } else { surge_port }),
        Door::Nginx => have_nginx.then_some(if raw_run {
            nginx_ports.raw_front
        } else {
            nginx_ports.surge_front
        }),
        Door::Haproxy => have_haproxy.then_some(if raw_run {
            haproxy_ports.raw_front
        } else {
            haproxy_ports.surge_front
        }),
        Door::Direct => raw_run.then_some(direct_port),
    };
    let rotate = |doors: &[Door]| {
        let mut d: Vec<Door> = doors.iter().copied().filter(|&d| s.wants(d)).collect();
        let len = d.len().max(1);
        d.rotate_left(n % len);
        d
    };

    let load = WrkLoad {
        threads: s.args.wrk_threads,
        connections: s.args.wrk_connections,
        duration: Duration::from_secs(s.args.wrk_seconds),
    };
    let warm = WrkLoad {
        duration: Duration::from_secs(2),
        ..load
    };
    let memory_only = s.args.only == Only::Memory;
    let raw_doors = if s.args.wrk_seconds == 0 || memory_only {
        Vec::new()
    } else {
        rotate(&Door::ALL)
    };
    for door in raw_doors {
        let Some(port) = front(door, true) else {
            continue;
        };
        let url = format!("http://127.0.0.1:{port}{RAW_PATH}");
        let _ = wrk::run(&warm, &url);
        log(&format!("round {}: wrk through {}", n + 1, door.name()));
        round.raw[door.index()] = note("wrk", wrk::run(&load, &url));
    }
    drop(raw);

    let surge_doors = if memory_only || s.args.surge_seconds <= 0.0 {
        Vec::new()
    } else {
        rotate(&SURGE_DOORS)
    };
    for door in surge_doors {
        let Some(port) = front(door, false) else {
            continue;
        };
        if !wait_quiet(
            &surge_cluster.process_ports,
            RAW_PATH,
            Duration::from_millis(20),
            Duration::from_secs(180),
        ) {
            log("the processes were still busy after 180 s; surging anyway");
        }
        log(&format!("round {}: surge through {}", n + 1, door.name()));
        let i = SURGE_DOORS.iter().position(|&d| d == door).unwrap_or(0);
        round.surge[i] = note("surge", s.surge(port));
        if let Some(f) = &round.surge[i] {
            log(&format!(
                "  goodput {:.1}/s, probe p50 {:?} ms, back under in {:.1} s",
                f.goodput_per_second,
                f.probe_p50_ms,
                f.back_under_ms / 1000.0
            ));
        }
    }
    drop(nginx);
    drop(haproxy);
    wait_quiet(
        &surge_cluster.process_ports,
        RAW_PATH,
        Duration::from_millis(20),
        Duration::from_secs(180),
    );
    if s.wants(Door::Fhircluster) {
        if !memory_only && s.args.sessions_requests > 0 {
            log(&format!("round {}: sessions through fhircluster", n + 1));
            note("sessions", s.sessions(surge_cluster.port, &mut round));
        }
        sleep(Duration::from_secs(1));
        round.rss_after_surge_mb = rss_mb(surge_cluster.guard.pid());
        if s.args.idle_clients > 0 {
            log(&format!(
                "round {}: {} idle clients",
                n + 1,
                s.args.idle_clients
            ));
            if let Some(conns) = note(
                "idle clients",
                idle_clients(surge_cluster.port, RAW_PATH, s.args.idle_clients),
            ) {
                sleep(Duration::from_secs(1));
                round.rss_idle_clients_mb = rss_mb(surge_cluster.guard.pid());
                drop(conns);
            }
        }
    }
    drop(surge_cluster);

    if s.wants(Door::Fhircluster) && s.args.waiting > 0 {
        log(&format!(
            "round {}: {} waiting requests",
            n + 1,
            s.args.waiting
        ));
        let c = s.cluster(
            "waiting",
            s.args.workers,
            json!({ "queueSeconds": 600, "upstreamTimeoutSeconds": 0, "drainSeconds": 0 }),
        )?;
        if let Some(conns) = note(
            "waiting requests",
            waiting_requests(c.port, HANG_PATH, s.args.waiting),
        ) {
            sleep(Duration::from_secs(2));
            round.rss_waiting_mb = rss_mb(c.guard.pid());
            round.waiting_answered = Some(answered(&conns));
            drop(conns);
        }
    }
    if !s.args.skip_scheduler && !memory_only {
        log(&format!("round {}: scheduler micro-benchmark", n + 1));
        round.scheduler_decisions_per_second = note("scheduler", scheduler_bench());
    }
    Ok(round)
}

fn chart(s: &Setup, rounds: &[Round]) -> Option<String> {
    let last = rounds
        .iter()
        .rev()
        .find(|r| r.surge.iter().any(Option::is_some))?;
    let colors = ["#1f77b4", "#2ca02c", "#d62728"];
    let series = SURGE_DOORS
        .iter()
        .zip(&last.surge)
        .zip(colors)
        .filter_map(|((door, f), color)| {
            let f = f.as_ref()?;
            Some(Series {
                label: door.name().to_string(),
                color: color.to_string(),
                points: f
                    .series
                    .iter()
                    .filter_map(|&(t, ms)| Some((t, ms?)))
                    .collect(),
            })
        })
        .collect::<Vec<_>>();
    Some(svg::render(
        &Chart {
            title: format!(
                "$lookup probe during a {}× surge (1 master + {} workers, 2 cores)",
                s.args.multiple, s.args.workers
            ),
            surge_end_s: s.args.surge_seconds,
            threshold_ms: 10.0,
        },
        &series,
    ))
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// The whole comparison; prints the table and writes the JSON and the chart.
pub fn run(args: &CompareArgs, runtime: &tokio::runtime::Runtime) -> anyhow::Result<()> {
    if args.rounds == 0 || args.rounds > 20 {
        bail!("--rounds must be 1 to 20");
    }
    let limit = raise_fd_limit();
    let need = (args.idle_clients.max(args.waiting) as u64) + 200;
    if limit < need {
        bail!("the open-file limit is {limit}; {need} are needed (raise the hard limit)");
    }
    let setup = Setup {
        args,
        fhircluster: args
            .fhircluster
            .clone()
            .map_or_else(|| sibling("fhircluster"), Ok)?,
        sim: args
            .sim
            .clone()
            .map_or_else(|| sibling("fhirsmith-sim"), Ok)?,
        work: WorkDir::new(args.keep)?,
        runtime,
    };
    let versions = [
        version("nginx", "-v"),
        version("haproxy", "-v"),
        version("wrk", "-v"),
    ];
    let mut rounds = Vec::new();
    for n in 0..args.rounds {
        rounds.push(one_round(&setup, n)?);
    }
    let labels = Labels {
        wrk: format!(
            "GET {RAW_PATH}, wrk -t{} -c{} {} s",
            args.wrk_threads, args.wrk_connections, args.wrk_seconds
        ),
        multiple: args.multiple,
        fast_ms: 10.0,
        idle_clients: args.idle_clients,
        waiting: args.waiting,
    };
    let table = markdown(&rows(&rounds, &labels));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let header = format!(
        "{} rounds on {cpus} CPUs; {}; {}; {}; heavy capacity {:.1}/s, surge {:.1}/s for {} s",
        args.rounds,
        versions[0],
        versions[1],
        versions[2],
        setup.capacity(),
        args.multiple * setup.capacity(),
        args.surge_seconds
    );
    println!("{header}\n\n{table}");
    write(
        &args.out_dir.join("table.md"),
        &format!("{header}\n\n{table}"),
    )?;
    let results = json!({ "header": header, "versions": versions, "rounds": rounds });
    write(
        &args.out_dir.join("results.json"),
        &serde_json::to_string_pretty(&results)?,
    )?;
    if let Some(svg) = chart(&setup, &rounds) {
        write(&args.chart, &svg)?;
    }
    Ok(())
}
