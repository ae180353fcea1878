//! The page's problems, a line each (spec "Status": "the problems, a line each with a ⚠ and a
//! sentence"), taken from what `/status` holds: a process not ready (starting, restarting,
//! stopping), refusing, its figures gone stale; restarts since the launcher started it did not
//! plan (crashes, hang kills: DEC-84); memory at
//! 90% or more of the refuse threshold; the launcher not ready or draining, its own refusals in
//! the last minute; an upgrade that did not happen; a refused reload and settings waiting for a
//! restart of the launcher. Pure: the JSON in, the lines out.

use serde_json::Value;

use super::fmt::{bytes, duration};

/// What kind of problem a line is (the page tags each line with it, so a test or a person's
/// stylesheet can pick them out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// No figures came from the supervisor in time.
    NoReport,
    /// A process starting, restarting or stopping.
    NotReady,
    /// A process whose memory guard refuses requests.
    Refusing,
    /// A process whose figures are older than three intervals.
    Stale,
    /// Restarts since the launcher started that it did not plan: crashes and hang kills
    /// (`restarts`, DEC-84; reloads, `restart`, recycles and scales are not problems).
    Restarts,
    /// The memory guard's measure at 90% or more of its refuse threshold.
    Memory,
    /// The launcher's `/readyz` would say 503, or it is draining.
    LauncherNotReady,
    /// The launcher refused requests in the last minute (queue wait, none ready, stopping).
    Refusals,
    /// The last upgrade asked for was refused or failed.
    Upgrade,
    /// The last reload's settings were refused: the service runs on as it was.
    ReloadRefused,
    /// Settings changed in `config.json` wait for a restart of the launcher.
    RestartPending,
    /// The last rolling restart stopped before its end (DEC-79, DEC-80).
    RollingStopped,
    /// Places keep their last good inputs while new ones wait (DEC-93).
    InputsWaiting,
}

impl Kind {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Kind::NoReport => "no-report",
            Kind::NotReady => "not-ready",
            Kind::Refusing => "refusing",
            Kind::Stale => "stale",
            Kind::Restarts => "restarts",
            Kind::Memory => "memory",
            Kind::LauncherNotReady => "launcher-not-ready",
            Kind::Refusals => "refusals",
            Kind::Upgrade => "upgrade",
            Kind::ReloadRefused => "reload-refused",
            Kind::RestartPending => "restart-pending",
            Kind::RollingStopped => "rolling-stopped",
            Kind::InputsWaiting => "inputs-waiting",
        }
    }
}

/// One line: its kind, the process it is about (if one) and the sentence (not yet escaped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Problem {
    pub kind: Kind,
    pub code: Option<String>,
    pub text: String,
}

fn line(kind: Kind, code: Option<&str>, text: String) -> Problem {
    Problem {
        kind,
        code: code.map(str::to_string),
        text,
    }
}

/// The share of the refuse threshold at which memory becomes a problem (spec: "at 90% or more
/// of its refusal threshold").
const MEMORY_NEAR: f64 = 0.9;

/// Every problem `status` (the `/status` object) and `upgrade` (`/upgrade`'s `last`: null, or
/// `{outcome, reason, atMs}`) show, in the page's order.
pub(crate) fn problems(status: &Value, upgrade: &Value) -> Vec<Problem> {
    let mut out = Vec::new();
    let procs = status["processes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if procs.is_empty() {
        out.push(line(
            Kind::NoReport,
            None,
            "The supervisor's figures did not come in time: the processes are not shown.".into(),
        ));
    }
    let front = &status["front"];
    if front["draining"] == true {
        out.push(line(
            Kind::LauncherNotReady,
            None,
            "The launcher is stopping: it drains and takes no new request.".into(),
        ));
    } else if front["ready"] == false && !procs.is_empty() {
        out.push(line(
            Kind::LauncherNotReady,
            None,
            "The launcher is not ready (/readyz answers 503).".into(),
        ));
    }
    // A replacement starting beside its place's process, or the old one leaving after the
    // switch (DEC-92), is planned: the place serves all along.
    for p in procs.iter().filter(|p| p["beside"] != true) {
        let code = p["code"].as_str().unwrap_or("?");
        match p["status"].as_str().unwrap_or("") {
            s @ ("starting" | "restarting" | "stopping") => {
                let why = match p["lastRestart"].as_str() {
                    Some(w) if s == "restarting" || s == "starting" => format!(" (last: {w})"),
                    _ => String::new(),
                };
                out.push(line(
                    Kind::NotReady,
                    Some(code),
                    format!("{code} is {s}, not ready{why}."),
                ));
            }
            "stale" => out.push(line(
                Kind::Stale,
                Some(code),
                format!(
                    "{code}'s figures are stale: the last came {} ago; they are left out of \
                     the totals.",
                    duration(p["figuresAgeMs"].as_u64())
                ),
            )),
            _ => {}
        }
    }
    for code in status["refusing"].as_array().into_iter().flatten() {
        let code = code.as_str().unwrap_or("?");
        out.push(line(
            Kind::Refusing,
            Some(code),
            format!("{code} is refusing requests: its memory guard is over the threshold."),
        ));
    }
    if let Some(p) = memory_near(&status["memory"]) {
        out.push(p);
    }
    let restarted: Vec<String> = procs
        .iter()
        .filter_map(|p| {
            let n = p["restarts"].as_u64().filter(|n| *n > 0)?;
            Some(format!("{} {n}", p["code"].as_str().unwrap_or("?")))
        })
        .collect();
    if !restarted.is_empty() {
        let total = status["totals"]["restarts"].as_u64().unwrap_or(0);
        let s = if total == 1 { "" } else { "s" };
        out.push(line(
            Kind::Restarts,
            None,
            format!(
                "{total} restart{s} since the launcher started, crashes and hang kills ({}).",
                restarted.join(", ")
            ),
        ));
    }
    let refused = front["refusalsLastMinute"].as_u64().unwrap_or(0);
    if refused > 0 {
        out.push(line(
            Kind::Refusals,
            None,
            format!(
                "The launcher refused {refused} request{} in the last minute (no process free \
                 in time, none ready, or stopping).",
                if refused == 1 { "" } else { "s" }
            ),
        ));
    }
    out.extend(reload(&front["reload"]));
    if let Some(why) = status["rollingRestart"]["why"].as_str() {
        out.push(line(Kind::RollingStopped, None, rolling_stopped(why)));
    }
    if let Some(text) = inputs_waiting(procs) {
        out.push(line(Kind::InputsWaiting, None, text));
    }
    if let Some(outcome) = upgrade["outcome"].as_str() {
        let reason = upgrade["reason"].as_str().unwrap_or("no reason given");
        out.push(line(
            Kind::Upgrade,
            None,
            format!("The last upgrade asked for was {outcome}: {reason}."),
        ));
    }
    out
}

/// The last reload's refusal and the settings waiting for a restart of the launcher
/// (`front.reload`, DEC-91), in the words `fhircluster status` has them.
fn reload(reload: &Value) -> Vec<Problem> {
    let mut out = Vec::new();
    if let Some(why) = reload["refused"]["reason"].as_str() {
        out.push(line(Kind::ReloadRefused, None, reload_refused(why)));
    }
    if let Some(text) = restart_pending(reload) {
        out.push(line(Kind::RestartPending, None, text));
    }
    out
}

/// The sentence for a refused reload.
pub(crate) fn reload_refused(why: &str) -> String {
    format!("The last reload was refused, the launcher runs as before: {why}.")
}

/// The sentence for a rolling restart stopped before its end.
pub(crate) fn rolling_stopped(why: &str) -> String {
    format!("The last rolling restart stopped: {why}.")
}

/// The sentence for the places whose new inputs wait (DEC-93), if any.
pub(crate) fn inputs_waiting(procs: &[Value]) -> Option<String> {
    let codes: Vec<&str> = procs
        .iter()
        .filter(|p| p["inputsWaiting"] == true)
        .filter_map(|p| p["code"].as_str())
        .collect();
    (!codes.is_empty()).then(|| {
        format!(
            "New inputs wait for {}: each runs what it ran before until its own replacement \
             has been ready once.",
            codes.join(", ")
        )
    })
}

/// The sentence for the settings waiting for a restart of the launcher, if any.
pub(crate) fn restart_pending(reload: &Value) -> Option<String> {
    let paths: Vec<&str> = reload["restartPending"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    (!paths.is_empty()).then(|| {
        format!(
            "Waiting for a restart of the launcher (systemctl restart): {}.",
            paths.join(", ")
        )
    })
}

/// What the memory guard measures (the cgroup's private memory, or without a cgroup limit of
/// the service's own the processes' summed) against the refuse threshold.
fn memory_near(memory: &Value) -> Option<Problem> {
    let reject = memory["rejectAt"].as_u64().filter(|r| *r > 0)?;
    let measure = memory["cgroup"]["anon"]
        .as_u64()
        .or_else(|| memory["processAnon"].as_u64())?;
    let share = measure as f64 / reject as f64;
    (share >= MEMORY_NEAR).then(|| {
        line(
            Kind::Memory,
            None,
            format!(
                "Memory is at {:.0}% of the refuse threshold: {} of {}.",
                share * 100.0,
                bytes(Some(measure)),
                bytes(Some(reject))
            ),
        )
    })
}
