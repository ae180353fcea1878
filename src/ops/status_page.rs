//! `GET /` on the admin address: the cluster as one HTML page, laid out as FHIRsmith's status
//! page is (spec "Status" and "Graphs"): one summary line, the problems a line each, the 24 h
//! graphs as inline SVG, a row per process and the launcher, the footnotes of what couldn't be
//! read. Read-only, and pure: [`render`] is a function of the `/status` object, the graph
//! history and the last upgrade's outcome; the admin endpoint only gathers them.
//!
//! No external script, font or stylesheet (the host may have no internet). It refreshes itself
//! with a small inline script that fetches `/` again every `statusSeconds` and swaps the page's
//! live part in place: the problems and graphs are decided here, once, not again in JavaScript,
//! and unlike a meta refresh it keeps the scroll position on a phone and doesn't flash a wall
//! screen; if a fetch fails, a line says since when the launcher hasn't answered. Without
//! JavaScript, a `<noscript>` meta refresh does the same.

mod fmt;
mod graphs;
mod problems;
mod svg;

use std::fmt::Write as _;

use serde_json::Value;

use fmt::{bytes, count, duration, esc, NONE};
use problems::problems;
pub(crate) use problems::{inputs_waiting, reload_refused, restart_pending, rolling_stopped};

/// What the page is drawn from.
pub(crate) struct PageInput<'a> {
    /// The `/status` object.
    pub status: &'a Value,
    /// The graph history (`History::to_json`); null when none came.
    pub history: &'a Value,
    /// How the last upgrade that did not happen ended (`/upgrade`'s `last`), or null.
    pub upgrade: &'a Value,
    /// Wall clock, ms since the epoch.
    pub now_ms: u64,
}

const STYLE: &str = include_str!("status_page/page.css");

/// The refresh: fetch `/` every `ms`, swap `#live` (counting the swaps in `<html
/// data-refreshes>`, so a browser test can see it ran); on failure say since when.
const SCRIPT: &str = r#"(function(){var ms=INTERVAL,down=null;
function tick(){fetch('/',{cache:'no-store'}).then(function(r){if(!r.ok)throw r.status;return r.text();})
.then(function(t){var n=new DOMParser().parseFromString(t,'text/html').getElementById('live');
if(n){document.getElementById('live').replaceWith(n);var d=document.documentElement.dataset;d.refreshes=(+d.refreshes||0)+1;}down=null;document.getElementById('offline').hidden=true;})
.catch(function(){if(!down)down=new Date();var o=document.getElementById('offline');
o.textContent='\u26a0 The launcher has not answered since '+down.toISOString().substr(11,8)+' UTC: the figures below are from then.';o.hidden=false;})
.then(function(){setTimeout(tick,ms);});}setTimeout(tick,ms);})();"#;

/// The whole page.
pub(crate) fn render(input: &PageInput) -> String {
    let st = input.status;
    let interval = st["intervalMs"].as_u64().unwrap_or(15_000).max(1000);
    let mut s = String::with_capacity(64 * 1024);
    let _ = write!(
        s,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>fhircluster status</title><noscript><meta http-equiv="refresh" content="{}"></noscript><style>{STYLE}</style></head><body><p id="offline" class="offline" hidden></p>"#,
        interval / 1000
    );
    live(&mut s, input);
    let _ = write!(
        s,
        "<script>{}</script></body></html>",
        SCRIPT.replace("INTERVAL", &interval.to_string())
    );
    s
}

/// The part the refresh swaps: everything but the page's head and script.
fn live(s: &mut String, input: &PageInput) {
    let st = input.status;
    let procs = st["processes"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let found = problems(st, input.upgrade);
    let sampled = st["sampledAt"].as_u64();
    // A place counts once while a replacement runs beside its process (DEC-92).
    let places = procs.iter().filter(|p| p["beside"] != true).count();
    let _ = write!(
        s,
        r#"<main id="live" data-sampled="{}"><h1>fhircluster <span class="sub">· {} process{} · sampled {}</span></h1>"#,
        sampled.unwrap_or(0),
        places,
        if places == 1 { "" } else { "es" },
        sampled.map_or(NONE.into(), |at| format!(
            "{} ago",
            duration(Some(input.now_ms.saturating_sub(at)))
        )),
    );
    summary(s, st, found.len());
    if !found.is_empty() {
        s.push_str(r#"<ul class="problems" id="problems">"#);
        for p in &found {
            let code = p
                .code
                .as_deref()
                .map(|c| format!(r#" data-code="{}""#, esc(c)))
                .unwrap_or_default();
            let _ = write!(
                s,
                r#"<li class="problem" data-kind="{}"{code}>⚠ {}</li>"#,
                p.kind.label(),
                esc(&p.text)
            );
        }
        s.push_str("</ul>");
    }
    s.push_str(r#"<section class="graphs-wrap"><h2>Last 24 hours</h2>"#);
    if input.history.is_null() {
        s.push_str(r#"<p class="note">The graph history did not come in time.</p>"#);
    } else {
        // No process in `/status` (its figures did not come): the history's, all of them.
        let codes: Vec<&str> = procs.iter().filter_map(|p| p["code"].as_str()).collect();
        let plan = (!codes.is_empty()).then_some(codes.as_slice());
        s.push_str(&graphs::legend(input.history, plan));
        s.push_str(r#"<div class="graphs">"#);
        let reject = st["memory"]["rejectAt"].as_u64();
        for c in graphs::charts(input.history, plan, reject, input.now_ms) {
            let _ = write!(
                s,
                "<figure><figcaption>{}</figcaption>{}</figure>",
                esc(&c.title),
                svg::render(&c)
            );
        }
        s.push_str("</div>");
    }
    s.push_str("</section>");
    table(s, st);
    footnotes(s, st);
    s.push_str("</main>");
}

/// Requests (the front door's count) and the average per minute, uptime (the launcher's),
/// memory (what the guard measures), heap, problems. The front door's count and the launcher's
/// uptime (DEC-91): the processes' own counts start again with each process and come a
/// status interval late, and the master's uptime is its process's, not the service's.
fn summary(s: &mut String, st: &Value, problems: usize) {
    let t = &st["totals"];
    // Where the front door has no count (no figures from it yet), the processes' own, said so.
    let (requests, whose) = match (t["frontRequests"].as_u64(), t["requests"].as_u64()) {
        (Some(front), _) => (Some(front), ""),
        (None, Some(own)) => (Some(own), " (the processes' own)"),
        (None, None) => (None, ""),
    };
    let uptime = st["launcher"]["uptimeMs"].as_u64();
    let rate = match (requests, uptime) {
        (Some(r), Some(u)) if u >= 1000 => format!(" ({:.1}/min)", r as f64 * 60_000.0 / u as f64),
        _ => String::new(),
    };
    let m = &st["memory"];
    let measure = m["cgroup"]["anon"]
        .as_u64()
        .or_else(|| m["processAnon"].as_u64());
    let of = m["limit"]
        .as_u64()
        .map(|l| format!(" of {}", bytes(Some(l))))
        .unwrap_or_default();
    let _ = write!(
        s,
        r#"<p class="summary" id="summary"><span>Requests{whose} <b data-figure="requests">{}</b>{rate}</span> <span>Uptime <b data-figure="uptime">{}</b></span> <span>Memory <b data-figure="memory">{}</b>{of}</span>"#,
        count(requests),
        duration(uptime),
        bytes(measure),
    );
    if let Some(h) = t["heapUsed"].as_u64() {
        let _ = write!(
            s,
            r#" <span>Heap <b>{}</b> ({} process{})</span>"#,
            bytes(Some(h)),
            t["heapCount"].as_u64().unwrap_or(0),
            if t["heapCount"] == 1 { "" } else { "es" }
        );
    }
    if problems > 0 {
        let _ = write!(
            s,
            r#" <span class="bad">Problems <b data-figure="problems">{problems}</b></span>"#
        );
    }
    s.push_str("</p>");
}

/// A row per process and the launcher (spec "Status": status, uptime, restarts, requests,
/// private and mapped memory, heap, in flight, the figures' age). In flight is the process's
/// own figure, with what the front door has at work on it beside it.
fn table(s: &mut String, st: &Value) {
    s.push_str(
        r#"<section class="table-wrap"><table class="processes"><thead><tr><th>Process</th><th>Status</th><th>PID</th><th>Uptime</th><th>Restarts</th><th>Requests</th><th>In flight</th><th>Private</th><th>Mapped</th><th>Heap</th><th>Front door</th><th>p50 / p99</th><th>CPU</th><th>Figures</th></tr></thead><tbody>"#,
    );
    let procs = st["processes"].as_array().into_iter().flatten();
    for p in procs.chain(std::iter::once(&st["launcher"])) {
        let Some(code) = p["code"].as_str() else {
            continue;
        };
        let status = p["status"].as_str().unwrap_or("?");
        let mut shown = if p["noChannel"] == true {
            "ready (no channel)"
        } else {
            status
        }
        .to_string();
        // DEC-92, DEC-93: which of a place's two processes is the replacement, and new inputs
        // waiting.
        let overlap = overlap_mark(p);
        if !overlap.is_empty() {
            shown = format!("{shown} · {overlap}");
        }
        if p["inputsWaiting"] == true {
            shown.push_str(" · new inputs waiting");
        }
        let in_flight = match (p["inFlight"].as_u64(), p["frontInFlight"].as_u64()) {
            (own, Some(front)) => format!("{} · front {}", count(own), count(Some(front))),
            (own, None) => count(own),
        };
        let heap = match (p["heapUsed"].as_u64(), p["heapLimit"].as_u64()) {
            (Some(u), Some(l)) => format!("{} / {}", bytes(Some(u)), bytes(Some(l))),
            (u, _) => bytes(u),
        };
        let restarts = p["restarts"]
            .as_u64()
            .map_or(NONE.into(), |n| n.to_string());
        let lat = &p["latencyMs"];
        let latency = match (lat["median"].as_f64(), lat["p99"].as_f64()) {
            (Some(m), Some(p99)) => format!("{m:.1} / {p99:.1} ms"),
            _ => NONE.into(),
        };
        let cpu = p["cpuPercent"]
            .as_f64()
            .map_or(NONE.into(), |c| format!("{c:.1}%"));
        let _ = write!(
            s,
            r#"<tr class="row" data-code="{c}" data-status="{st}" data-overlap="{overlap}"><td class="code">{c}<span class="role"> {role}</span></td><td class="status s-{st}">{shown}</td><td>{pid}</td><td>{up}</td><td>{restarts}</td><td>{req}</td><td>{in_flight}</td><td>{anon}</td><td>{file}</td><td>{heap}</td><td data-figure="front-requests">{front}</td><td>{latency}</td><td>{cpu}</td><td>{age}</td></tr>"#,
            c = esc(code),
            st = esc(status),
            overlap = overlap,
            role = esc(p["role"].as_str().unwrap_or("")),
            shown = esc(&shown),
            pid = p["pid"].as_u64().map_or(NONE.into(), |n| n.to_string()),
            up = duration(p["uptimeMs"].as_u64()),
            req = count(p["requests"].as_u64()),
            anon = bytes(p["rssAnon"].as_u64()),
            file = bytes(p["rssFile"].as_u64()),
            age = duration(p["figuresAgeMs"].as_u64()),
            front = count(p["frontRequests"].as_u64()),
        );
    }
    s.push_str("</tbody></table></section>");
}

/// Which of a place's two processes a row is while a replacement runs beside the old one
/// (DEC-92): `replacement`, `old`, or empty.
pub(crate) fn overlap_mark(p: &Value) -> &'static str {
    match (p["replacement"] == true, p["beside"] == true) {
        (true, _) => "replacement",
        (false, true) => "old",
        (false, false) => "",
    }
}

/// What couldn't be read, and why (spec "Status": footnotes).
fn footnotes(s: &mut String, st: &Value) {
    s.push_str(r#"<footer class="notes"><p>Private is <code>RssAnon</code>, mapped <code>RssFile</code> (a page several processes map counts in each). The launcher's requests are left out: what it passes on includes static files and pages. Front door: the answers the launcher passed on from each process, beside the process's own count (never added to it); p50 / p99: their latency over the last interval. — : not known or doesn't apply.</p>"#);
    for m in st["missing"].as_array().into_iter().flatten() {
        let _ = write!(
            s,
            "<p>Not read: {}: {}</p>",
            esc(m["what"].as_str().unwrap_or("?")),
            esc(m["why"].as_str().unwrap_or(""))
        );
    }
    s.push_str("</footer>");
}

#[cfg(test)]
mod tests;
