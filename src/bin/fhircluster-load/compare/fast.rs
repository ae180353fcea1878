//! Raw throughput against the fast upstream: fhircluster running it as its only process, nginx
//! and HAProxy proxying to it, and wrk straight at it ("direct"), for each of wrk's connection
//! and thread counts, every door in turn (the order rotated each round), with each door's CPU
//! per request. The doors stay up for the round; each run is warmed up first.

use std::time::Duration;

use anyhow::bail;
use serde::Serialize;

use super::cpu::ProcSet;
use super::measure::{self, Measured, Through};
use super::procs::get_body;
use super::setup::{log, note, Cluster, Proxy, Setup, RAW_PATH};
use super::table::Door;
use super::upstream::BODY;
use super::wrk::WrkLoad;
use super::CompareArgs;

/// How long each run is warmed up for.
pub fn warm(a: &CompareArgs) -> Duration {
    Duration::from_secs(a.warm_seconds)
}

/// One wrk setting, every door measured with it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FastCell {
    pub connections: u32,
    pub wrk_threads: u32,
    /// Indexed by `Door`.
    pub doors: [Option<Measured>; 4],
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FastRound {
    pub cells: Vec<FastCell>,
}

/// The fast upstream under fhircluster, with nginx and HAProxy (those chosen) in front of it.
pub struct FastDoors {
    pub cluster: Cluster,
    pub nginx: Option<Proxy>,
    pub haproxy: Option<Proxy>,
    upstream: ProcSet,
}

impl FastDoors {
    /// Every door on `threads` threads, the upstream pinned to `pin`, HAProxy sized for
    /// `most_connections` clients.
    pub fn start(
        s: &Setup,
        threads: u32,
        pin: Option<&str>,
        most_connections: u32,
    ) -> anyhow::Result<FastDoors> {
        let cluster = s.fast_cluster(threads, pin)?;
        let upstream = cluster.upstream();
        let port = cluster.process_ports[0];
        let (nginx, haproxy) =
            s.proxies(&[("fast", &[port])], threads, most_connections + 1_000)?;
        let doors = FastDoors {
            cluster,
            nginx,
            haproxy,
            upstream,
        };
        // Every door passes the upstream's answer on whole, or the run would measure something
        // else.
        for door in Door::ALL {
            let Some(t) = doors.through(door) else {
                continue;
            };
            let answer = get_body(t.port, RAW_PATH, Duration::from_secs(5));
            if answer.as_ref().map(|(s, b)| (*s, b.as_slice())) != Some((200, BODY.as_bytes())) {
                bail!(
                    "through {} the fast upstream answered {:?}, not 200 with its {} bytes",
                    door.name(),
                    answer.map(|(s, b)| (s, String::from_utf8_lossy(&b).into_owned())),
                    BODY.len()
                );
            }
        }
        Ok(doors)
    }

    /// What wrk loads for `door`, and the processes measured; `None` if it is not running.
    pub fn through(&self, door: Door) -> Option<Through> {
        let proxy = |p: &Option<Proxy>| {
            let p = p.as_ref()?;
            Some((p.conf.front("fast")?, p.procs.clone()))
        };
        let (port, procs) = match door {
            Door::Fhircluster => (self.cluster.port, self.cluster.door()),
            Door::Nginx => proxy(&self.nginx)?,
            Door::Haproxy => proxy(&self.haproxy)?,
            Door::Direct => (self.cluster.process_ports[0], ProcSet::default()),
        };
        Some(Through {
            port,
            url: format!("http://127.0.0.1:{port}{RAW_PATH}"),
            door: procs,
            upstream: self.upstream.clone(),
        })
    }
}

/// One round over every cell.
pub fn one_round(s: &Setup, n: usize) -> anyhow::Result<FastRound> {
    let a = s.args;
    let most = a.fast_connections.iter().copied().max().unwrap_or(1);
    let doors = FastDoors::start(s, a.proxy_threads, None, most)?;
    let mut round = FastRound::default();
    for &connections in &a.fast_connections {
        for &wrk_threads in &a.fast_wrk_threads {
            let load = WrkLoad {
                threads: wrk_threads,
                connections,
                duration: Duration::from_secs(a.wrk_seconds),
                pin: None,
            };
            let mut cell = FastCell {
                connections,
                wrk_threads,
                doors: Default::default(),
            };
            for door in s.rotated(&Door::ALL, n) {
                let Some(through) = doors.through(door) else {
                    continue;
                };
                log(&format!(
                    "round {}: fast upstream, wrk -t{wrk_threads} -c{connections} through {}",
                    n + 1,
                    door.name()
                ));
                cell.doors[door.index()] = note("wrk", measure::run(&load, &through, warm(a)));
            }
            round.cells.push(cell);
        }
    }
    Ok(round)
}
