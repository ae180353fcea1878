//! Starting what a comparison runs: fhircluster over `fhirsmith-sim` processes or over the fast
//! upstream, nginx and HAProxy as proxies, each in its own directory under the run's temporary
//! one, each held by a `Guard` (so an error anywhere still ends them all), each waited for until
//! it answers. Also the few things every part shares: the doors chosen, the log.

use std::cell::Cell;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use serde_json::{json, Value};

use super::conf::{self, ProxyConf, Site};
use super::cpu::ProcSet;
use super::ports::free_ports;
use super::procs::{descendants, wait_ok, Guard, WorkDir};
use super::table::Door;
use super::upstream;
use super::CompareArgs;

/// The path wrk and the checks ask for (cheap on every upstream).
pub const RAW_PATH: &str = "/r4/metadata";

/// A running fhircluster with its processes.
pub struct Cluster {
    pub guard: Guard,
    pub port: u16,
    pub process_ports: Vec<u16>,
}

impl Cluster {
    /// fhircluster's own process, without its children: the front door's CPU.
    pub fn door(&self) -> ProcSet {
        ProcSet {
            pids: vec![self.guard.pid()],
        }
    }

    /// Every process it runs (the upstream's CPU).
    pub fn upstream(&self) -> ProcSet {
        ProcSet {
            pids: descendants(self.guard.pid()),
        }
    }
}

/// A running nginx or HAProxy.
pub struct Proxy {
    /// Held for its drop, which ends the proxy.
    pub _guard: Guard,
    pub conf: ProxyConf,
    /// The process and its workers.
    pub procs: ProcSet,
}

pub struct Setup<'a> {
    pub args: &'a CompareArgs,
    pub fhircluster: PathBuf,
    pub sim: PathBuf,
    pub work: WorkDir,
    pub runtime: &'a tokio::runtime::Runtime,
    /// Numbers each started thing's directory, so none reuses another's.
    started: Cell<u32>,
}

pub fn log(msg: &str) {
    eprintln!("compare: {msg}");
}

/// The value, or `None` with the error logged.
pub fn note<T>(what: &str, r: anyhow::Result<T>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            log(&format!("{what} failed: {e:#}"));
            None
        }
    }
}

fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("finding this program")?;
    Ok(exe.with_file_name(name))
}

/// The first line a tool prints about its version.
pub fn version(cmd: &str, arg: &str) -> String {
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

impl<'a> Setup<'a> {
    pub fn new(
        args: &'a CompareArgs,
        runtime: &'a tokio::runtime::Runtime,
    ) -> anyhow::Result<Self> {
        Ok(Setup {
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
            started: Cell::new(0),
        })
    }

    pub fn wants(&self, door: Door) -> bool {
        let name = door.name().to_ascii_lowercase();
        self.args
            .doors
            .iter()
            .any(|d| d.eq_ignore_ascii_case(&name))
    }

    /// The chosen doors of `doors`, rotated by `round` (each round starts with another).
    pub fn rotated(&self, doors: &[Door], round: usize) -> Vec<Door> {
        let mut d: Vec<Door> = doors.iter().copied().filter(|&d| self.wants(d)).collect();
        let len = d.len().max(1);
        d.rotate_left(round % len);
        d
    }

    fn dir(&self, name: &str) -> anyhow::Result<PathBuf> {
        let n = self.started.get() + 1;
        self.started.set(n);
        self.work.sub(&format!("{n:02}-{name}"))
    }

    /// Starts fhircluster with `workers` processes running `command`, `threads` proxy threads
    /// and the settings in `cluster` (then `--set`'s), and waits for every process to answer.
    fn start(
        &self,
        name: &str,
        workers: u32,
        threads: u32,
        command: impl FnOnce(&std::path::Path) -> anyhow::Result<Value>,
        cluster: Value,
    ) -> anyhow::Result<Cluster> {
        let dir = self.dir(name)?;
        let base = free_ports(workers as u16 + 2)?;
        let mut settings = json!({
            "workers": workers,
            "internalPort": base + 1,
            "command": command(&dir)?,
            "killSeconds": 5,
            "proxyThreads": threads
        });
        // `--set` first, so what a part needs (the waiting requests' long queue) stays.
        if let Some(s) = settings.as_object_mut() {
            s.extend(self.args.settings.iter().cloned());
            if let Value::Object(extra) = cluster {
                s.extend(extra);
            }
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

    /// fhircluster over `workers` + 1 `fhirsmith-sim` processes, with `cluster`'s settings.
    pub fn sim_cluster(&self, name: &str, workers: u32, cluster: Value) -> anyhow::Result<Cluster> {
        let sim = self.sim.clone();
        self.start(
            name,
            workers,
            self.args.proxy_threads,
            |_| Ok(json!([sim])),
            cluster,
        )
    }

    /// fhircluster over the fast upstream (its only process), on `threads` proxy threads, the
    /// upstream pinned to `pin` if given.
    pub fn fast_cluster(&self, threads: u32, pin: Option<&str>) -> anyhow::Result<Cluster> {
        self.start(
            "fast",
            0,
            threads,
            |dir| {
                std::fs::write(dir.join("upstream.conf.in"), upstream::nginx_template(dir))?;
                Ok(json!(upstream::command(dir, pin)))
            },
            json!({}),
        )
    }

    /// A `ProxyConf` for `sites` (name, upstream ports), each on a fresh front port.
    pub fn proxy_conf(
        &self,
        sites: &[(&str, &[u16])],
        threads: u32,
        max_connections: u32,
    ) -> anyhow::Result<ProxyConf> {
        let sites = sites
            .iter()
            .map(|(name, upstreams)| {
                Ok(Site {
                    name: name.to_string(),
                    front: free_ports(1)?,
                    upstreams: upstreams.to_vec(),
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(ProxyConf {
            sites,
            threads,
            max_connections,
        })
    }

    /// nginx and HAProxy (those chosen) for `sites`, each on its own front ports.
    pub fn proxies(
        &self,
        sites: &[(&str, &[u16])],
        threads: u32,
        max_connections: u32,
    ) -> anyhow::Result<(Option<Proxy>, Option<Proxy>)> {
        let nginx = if self.wants(Door::Nginx) {
            Some(self.nginx(self.proxy_conf(sites, threads, max_connections)?)?)
        } else {
            None
        };
        let haproxy = if self.wants(Door::Haproxy) {
            Some(self.haproxy(self.proxy_conf(sites, threads, max_connections)?)?)
        } else {
            None
        };
        Ok((nginx, haproxy))
    }

    fn wait_proxy(&self, mut guard: Guard, conf: ProxyConf, dir: PathBuf) -> anyhow::Result<Proxy> {
        for site in &conf.sites {
            wait_ok(site.front, RAW_PATH, Duration::from_secs(10))
                .with_context(|| format!("{} (see {})", guard.name, dir.display()))?;
        }
        guard.check_running()?;
        let mut pids = vec![guard.pid()];
        pids.extend(descendants(guard.pid()));
        Ok(Proxy {
            _guard: guard,
            conf,
            procs: ProcSet { pids },
        })
    }

    pub fn nginx(&self, conf: ProxyConf) -> anyhow::Result<Proxy> {
        let dir = self.dir("nginx")?;
        let file = dir.join("nginx.conf");
        std::fs::write(&file, conf::nginx(&dir, &conf))?;
        let mut cmd = Command::new("nginx");
        cmd.arg("-p")
            .arg(&dir)
            .arg("-e")
            .arg(dir.join("error.log"))
            .arg("-c")
            .arg(&file);
        let g = Guard::spawn("nginx", &mut cmd, &dir.join("stdout.log"))?;
        self.wait_proxy(g, conf, dir)
    }

    pub fn haproxy(&self, conf: ProxyConf) -> anyhow::Result<Proxy> {
        let dir = self.dir("haproxy")?;
        let file = dir.join("haproxy.cfg");
        std::fs::write(&file, conf::haproxy(&conf))?;
        let mut cmd = Command::new("haproxy");
        cmd.arg("-f").arg(&file).arg("-db");
        let g = Guard::spawn("haproxy", &mut cmd, &dir.join("stdout.log"))?;
        self.wait_proxy(g, conf, dir)
    }
}
