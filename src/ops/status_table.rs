//! `fhircluster status`: asks a running launcher (its control socket's `status`, or with
//! `--admin-address` the HTTP listener's `/status`: the same JSON) and prints a table a
//! person reads at a glance, as `passenger-status` and `pm2 ls` do, or (`--json`) the answer
//! itself for scripts; its exit status says whether the launcher is ready (0), not ready or
//! draining (1), or not there (2). The rendering and the exit status are pure.

use std::fmt::Write;
use std::io::{Read, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// Fetches `/status` from the launcher's own endpoint.
pub fn fetch(addr: SocketAddr) -> Result<Value> {
    let (head, body) = exchange(addr, "GET", "/status")?;
    if !head.starts_with("HTTP/1.1 200") {
        bail!(
            "the launcher on {addr} answered: {}",
            head.lines().next().unwrap_or("")
        );
    }
    serde_json::from_str(&body).context("the launcher's /status is not JSON")
}

/// One request to the launcher's own endpoint: the response's head and body.
pub(crate) fn exchange(addr: SocketAddr, method: &str, path: &str) -> Result<(String, String)> {
    let timeout = Duration::from_secs(5);
    let mut s = TcpStream::connect_timeout(&addr, timeout).with_context(|| {
        format!("no launcher answers on {addr} (is server.cluster.adminAddress set and the launcher running?)")
    })?;
    s.set_read_timeout(Some(timeout))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        bail!("the launcher on {addr} gave no HTTP response");
    };
    Ok((head.to_string(), body.to_string()))
}

/// Exit status 2: no launcher answers (or its answer can't be read).
pub const UNREACHABLE: u8 = 2;

/// `fhircluster status [--json]` against the launcher at `target`: prints the table or the JSON
/// on stdout, or why there is none on stderr, and returns the exit status.
pub(crate) fn run(target: &super::control_client::Target, json: bool, wide: bool) -> ExitCode {
    match super::control_client::status(target) {
        Ok(v) => {
            let text = if json {
                format!("{v:#}\n")
            } else {
                render(&v, wide)
            };
            super::stdout::emit_then("status", &text, ExitCode::from(exit_status(&v)))
        }
        Err(e) => {
            eprintln!("fhircluster status: {e:#}");
            ExitCode::from(UNREACHABLE)
        }
    }
}

/// 0 when the launcher says it is ready (`/readyz`'s rule: the master and a tx process ready,
/// not draining), else 1.
pub fn exit_status(status: &Value) -> u8 {
    u8::from(status["front"]["ready"].as_bool() != Some(true))
}

/// Megabytes, with a decimal below 10 MB so a small process doesn't read as 0.
fn mb(v: &Value) -> String {
    v.as_u64().map_or("—".to_string(), |b| {
        let m = b as f64 / 1_048_576.0;
        if m < 10.0 {
            format!("{m:.1} MB")
        } else if m < 10_000.0 {
            format!("{m:.0} MB")
        } else {
            format!("{:.1} GB", m / 1024.0)
        }
    })
}

fn gb(b: u64) -> String {
    format!("{:.1} GB", b as f64 / 1_073_741_824.0)
}

fn uptime(v: &Value) -> String {
    let Some(ms) = v.as_u64() else {
        return "—".to_string();
    };
    let s = ms / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86399 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86400, (s % 86400) / 3600),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => "—".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The median and p99 of the last interval at the front door, in ms (`—` with none): a
/// decimal below 100 ms.
fn latency(v: &Value) -> String {
    let ms = |k: &str| {
        v[k].as_f64().map_or("—".to_string(), |m| {
            if m < 100.0 {
                format!("{m:.1}")
            } else {
                format!("{m:.0}")
            }
        })
    };
    if v.is_null() || v["count"] == 0 {
        return "—".to_string();
    }
    format!("{}/{}", ms("median"), ms("p99"))
}

/// Under the status line, a refused reload and the settings waiting for a restart of the
/// launcher (DEC-91): "ready" alone would hide them.
fn reload_lines(out: &mut String, status: &Value) {
    use crate::ops::status_page::{
        inputs_waiting, reload_refused, restart_pending, rolling_stopped,
    };
    let reload = &status["front"]["reload"];
    if let Some(why) = reload["refused"]["reason"].as_str() {
        let _ = writeln!(out, "⚠ {}", reload_refused(why));
    }
    if let Some(line) = restart_pending(reload) {
        let _ = writeln!(out, "⚠ {line}");
    }
    // DEC-79, DEC-93: a stopped rolling restart, and the places whose new inputs wait.
    if let Some(why) = status["rollingRestart"]["why"].as_str() {
        let _ = writeln!(out, "⚠ {}", rolling_stopped(why));
    }
    let procs = status["processes"].as_array().map(Vec::as_slice);
    if let Some(line) = procs.and_then(inputs_waiting) {
        let _ = writeln!(out, "⚠ {line}");
    }
}

/// One column of the table: its head and width, and its cell for a process and for the
/// launcher (none: blank).
struct Column {
    head: &'static str,
    width: usize,
    align: Align,
    shown: Shown,
    cell: fn(&Value) -> String,
    launcher: Option<fn(&Value) -> String>,
}

#[derive(Clone, Copy, PartialEq)]
enum Align {
    Left,
    Right,
}

/// `Wide`: only with `--wide`; the table without those fits 100 columns.
#[derive(Clone, Copy, PartialEq)]
enum Shown {
    Always,
    Wide,
}
use Align::{Left, Right};
use Shown::{Always, Wide};

const fn col(
    head: &'static str,
    width: usize,
    align: Align,
    shown: Shown,
    cell: fn(&Value) -> String,
    launcher: Option<fn(&Value) -> String>,
) -> Column {
    Column {
        head,
        width,
        align,
        shown,
        cell,
        launcher,
    }
}

/// The process's state, and whether it serves without sending its figures (no IPC channel):
/// not stale.
fn state(p: &Value) -> String {
    if p["noChannel"].as_bool() == Some(true) {
        return format!("{} (no channel)", text(&p["status"]));
    }
    // DEC-92: the replacement and the old process of a place, while both run.
    match crate::ops::status_page::overlap_mark(p) {
        "replacement" => format!("{} (new)", text(&p["status"])),
        "old" => format!("{} (old)", text(&p["status"])),
        _ => text(&p["status"]),
    }
}

/// The requests in flight at the front door, of the process's slots.
fn in_flight(p: &Value) -> String {
    match p["slots"].as_u64() {
        Some(s) => format!("{}/{s}", text(&p["frontInFlight"])),
        None => text(&p["frontInFlight"]),
    }
}

/// The columns, in order. Without `--wide`: 99 columns at the widest values (a 7-digit pid,
/// "ready (no channel)", 9999/9999 in flight, figures in the hundreds of GB).
#[rustfmt::skip]
const COLUMNS: &[Column] = &[
    col("PROCESS", 8, Left, Always, |p| text(&p["code"]), Some(|_| "launcher".into())),
    col("ROLE", 9, Left, Always, |p| text(&p["role"]), None),
    col("PID", 7, Right, Always, |p| text(&p["pid"]), Some(|l| text(&l["pid"]))),
    col("STATE", 18, Left, Always, state, None),
    col("UPTIME", 7, Right, Always, |p| uptime(&p["uptimeMs"]), Some(|l| uptime(&l["uptimeMs"]))),
    col("RESTARTS", 8, Right, Always, |p| text(&p["restarts"]), None),
    col("IN FLIGHT", 9, Right, Always, in_flight, None),
    col("QUEUED", 6, Right, Wide, |p| text(&p["queued"]), None),
    col("PRIVATE", 8, Right, Always, |p| mb(&p["rssAnon"]), Some(|l| mb(&l["rssAnon"]))),
    col("MAPPED", 8, Right, Wide, |p| mb(&p["rssFile"]), Some(|l| mb(&l["rssFile"]))),
    col("REQUESTS", 9, Right, Wide, |p| text(&p["requests"]), None),
    col("HEAP", 8, Right, Wide, |p| mb(&p["heapUsed"]), None),
    col("FRONT", 9, Right, Wide, |p| text(&p["frontRequests"]), None),
    col("P50/P99 MS", 11, Right, Always, |p| latency(&p["latencyMs"]), None),
    col("CPU%", 6, Right, Always, |p| text(&p["cpuPercent"]), None),
];

/// The table for one `/status` answer; `wide`: every column (else those that fit 100).
pub fn render(status: &Value, wide: bool) -> String {
    let mut out = String::new();
    let front = &status["front"];
    let ready = if front["ready"].as_bool() == Some(true) {
        "ready"
    } else if front["draining"].as_bool() == Some(true) {
        "draining"
    } else {
        "not ready"
    };
    let _ = writeln!(
        out,
        "fhircluster · {ready} · {} queued · {} refused in the last minute",
        text(&front["queued"]),
        text(&front["refusalsLastMinute"]),
    );
    reload_lines(&mut out, status);
    let _ = writeln!(out);
    let columns: Vec<&Column> = COLUMNS
        .iter()
        .filter(|c| wide || c.shown == Always)
        .collect();
    let row = |out: &mut String, cells: &mut dyn Iterator<Item = (&Column, String)>| {
        let line: Vec<String> = cells
            .map(|(c, v)| {
                if c.align == Left {
                    format!("{v:<w$}", w = c.width)
                } else {
                    format!("{v:>w$}", w = c.width)
                }
            })
            .collect();
        let _ = writeln!(out, "{}", line.join(" ").trim_end());
    };
    row(
        &mut out,
        &mut columns.iter().map(|c| (*c, c.head.to_string())),
    );
    for p in status["processes"].as_array().into_iter().flatten() {
        row(&mut out, &mut columns.iter().map(|c| (*c, (c.cell)(p))));
    }
    let l = &status["launcher"];
    row(
        &mut out,
        &mut columns
            .iter()
            .map(|c| (*c, c.launcher.map_or(String::new(), |f| f(l)))),
    );
    let _ = writeln!(out);
    let w = &status["workers"];
    if let Some(n) = w["wanted"].as_u64() {
        let set = match w["setAtRunTime"]["by"].as_str() {
            Some(by) => format!(" (set at run time by {by}, until the next reload or start)"),
            None => " (config.json's)".to_string(),
        };
        let settling = if w["settled"] == false {
            "; changing"
        } else {
            ""
        };
        let _ = writeln!(out, "workers: {n} wanted{set}{settling}");
    }
    let m = &status["memory"];
    match (m["cgroup"]["anon"].as_u64(), m["limit"].as_u64()) {
        (Some(anon), Some(limit)) => {
            let _ = writeln!(
                out,
                "memory: cgroup private {} of {} ({:.0}%); refuse at {}, abort at {}",
                gb(anon),
                gb(limit),
                anon as f64 * 100.0 / limit.max(1) as f64,
                m["rejectAt"].as_u64().map_or("—".into(), gb),
                m["abortAt"].as_u64().map_or("—".into(), gb),
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "memory: processes' private memory {} (no cgroup limit of the service's own)",
                mb(&m["processAnon"])
            );
        }
    }
    for miss in status["missing"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "  note: {}: {}",
            text(&miss["what"]),
            text(&miss["why"])
        );
    }
    out
}

#[cfg(test)]
mod tests;
