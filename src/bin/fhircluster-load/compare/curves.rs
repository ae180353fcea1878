//! How cost grows, each curve from one run against the fast upstream: throughput, p99 and CPU
//! per request against wrk's connections (32 to 4,096), and against each door's threads
//! (fhircluster's `proxyThreads`, nginx's worker processes, HAProxy's `nbthread`) with wrk and
//! the upstream pinned to their own CPUs, so a door's second thread is measured against a load
//! generator that does not take its core.
//!
//! Thousands of connections need file descriptors (the limit is raised to its hard limit before
//! anything starts, and inherited) and ports: each run waits until the sockets left in TIME_WAIT
//! by the one before leave room (`measure::run`).

use std::time::Duration;

use serde::Serialize;

use super::cpu_list;
use super::fast::{warm, FastDoors};
use super::measure::{self, Measured};
use super::setup::{log, note, Setup};
use super::table::Door;
use super::wrk::WrkLoad;

/// One run of a curve.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CurvePoint {
    pub door: Door,
    /// Connections, or the door's threads.
    pub x: u32,
    pub measured: Option<Measured>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Curves {
    pub connections: Vec<CurvePoint>,
    /// wrk's threads in the connections curve.
    pub connections_wrk_threads: u32,
    pub threads: Vec<CurvePoint>,
    /// wrk's connections in the threads curve.
    pub threads_connections: u32,
    /// The CPUs wrk and the upstream ran on in the threads curve.
    pub pin_load: Option<String>,
    pub pin_upstream: Option<String>,
}

fn point(
    s: &Setup,
    doors: &FastDoors,
    door: Door,
    x: u32,
    load: &WrkLoad,
    what: &str,
) -> Option<CurvePoint> {
    let through = doors.through(door)?;
    log(&format!("curve: {what} {x} through {}", door.name()));
    Some(CurvePoint {
        door,
        x,
        measured: note("wrk", measure::run(load, &through, warm(s.args))),
    })
}

/// Both curves.
pub fn run(s: &Setup) -> anyhow::Result<Curves> {
    let a = s.args;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut curves = Curves {
        connections_wrk_threads: a.curve_wrk_threads,
        threads_connections: a.threads_connections,
        pin_load: cpu_list(&a.pin_load, cpus)?,
        pin_upstream: cpu_list(&a.pin_upstream, cpus)?,
        ..Curves::default()
    };
    let duration = Duration::from_secs(a.wrk_seconds);

    if !a.curve_connections.is_empty() {
        let most = a.curve_connections.iter().copied().max().unwrap_or(1);
        let doors = FastDoors::start(s, a.proxy_threads, None, most)?;
        for (i, &connections) in a.curve_connections.iter().enumerate() {
            let load = WrkLoad {
                threads: a.curve_wrk_threads,
                connections,
                duration,
                pin: None,
            };
            for door in s.rotated(&Door::ALL, i) {
                curves.connections.extend(point(
                    s,
                    &doors,
                    door,
                    connections,
                    &load,
                    "connections",
                ));
            }
        }
    }

    for (i, &threads) in a.thread_counts.iter().enumerate() {
        let doors = FastDoors::start(
            s,
            threads,
            curves.pin_upstream.as_deref(),
            a.threads_connections,
        )?;
        let load = WrkLoad {
            threads: 1,
            connections: a.threads_connections,
            duration,
            pin: curves.pin_load.clone(),
        };
        for door in s.rotated(&Door::ALL, i) {
            curves
                .threads
                .extend(point(s, &doors, door, threads, &load, "threads"));
        }
    }
    Ok(curves)
}
