//! One request, top to bottom: classify, refuse (memory guard), check the route (a worker
//! answers master-only paths with an error), read the body, check the cache-id, burn the
//! operation's CPU cost, answer, stamp `X-Served-By` and echo what was received (SIM-9..14).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{json, Value};

use super::body::{self, SimBody};
use super::cache_id::{self, Verdict};
use super::control;
use super::cost;
use super::path::{classify, Op};
use super::state::Sim;
use fhircluster::outcome::{self, Outcome};

pub type Query = HashMap<String, String>;

pub fn parse_query(q: Option<&str>) -> Query {
    q.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            let dec = |s: &str| {
                percent_encoding::percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            (dec(k), dec(v))
        })
        .collect()
}

pub async fn handle(
    sim: Arc<Sim>,
    req: Request<Incoming>,
) -> Result<Response<SimBody>, Infallible> {
    let started = Instant::now();
    let path = req.uri().path().to_string();
    let query = parse_query(req.uri().query());
    let op = classify(&path, &sim.config.endpoints);
    let mut echo = echo_headers(req.headers());
    let mut resp = match op {
        Op::Sim(p) => control::handle(&sim, p, &query, req).await,
        _ => {
            let (resp, body_len) = serve(&sim, op, &path, &query, req).await;
            if resp.status() != StatusCode::SERVICE_UNAVAILABLE || op == Op::Health {
                let ms = started.elapsed().as_secs_f64() * 1000.0;
                sim.record(op.name(), ms);
            }
            if let Some(n) = body_len {
                echo.push(("x-sim-body-length", n.to_string()));
            }
            resp
        }
    };
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&sim.code) {
        h.insert("x-served-by", v);
    }
    for (name, value) in echo {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    }
    Ok(resp)
}

/// What the request carried that a proxy may have changed (SIM-11).
fn echo_headers(h: &HeaderMap) -> Vec<(&'static str, String)> {
    let get = |n: &str| h.get(n).and_then(|v| v.to_str().ok()).map(str::to_string);
    let chunked =
        get("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let mut out = vec![("x-sim-chunked", chunked.to_string())];
    if let Some(v) = get("x-forwarded-for") {
        out.push(("x-sim-forwarded-for", v));
    }
    if let Some(v) = get("x-forwarded-proto") {
        out.push(("x-sim-forwarded-proto", v));
    }
    if let Some(v) = get("host") {
        out.push(("x-sim-host", v));
    }
    out.push((
        "x-sim-content-length",
        get("content-length").unwrap_or_else(|| "none".into()),
    ));
    out
}

/// Counts a request in flight for as long as its future lives (a hung request dropped by its
/// client stops counting).
struct InFlight<'a>(&'a Sim);

impl<'a> InFlight<'a> {
    fn new(sim: &'a Sim) -> InFlight<'a> {
        sim.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(sim)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

pub fn json_response(status: StatusCode, v: &Value) -> Response<SimBody> {
    let mut r = Response::new(SimBody::full(serde_json::to_vec(v).unwrap_or_default()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(outcome::CONTENT_TYPE),
    );
    r
}

pub fn outcome_response(status: StatusCode, o: &Outcome) -> Response<SimBody> {
    json_response(status, &o.to_json())
}

fn html(text: String) -> Response<SimBody> {
    let mut r = Response::new(SimBody::full(text));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    r
}

async fn serve(
    sim: &Sim,
    op: Op,
    path: &str,
    query: &Query,
    req: Request<Incoming>,
) -> (Response<SimBody>, Option<usize>) {
    let _in_flight = InFlight::new(sim);
    // The memory guard refuses before the body is read; its own status page stays up.
    if sim.refusing.load(Ordering::Relaxed) && op != Op::StatusJson {
        sim.record_refusal();
        let mut r = outcome_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &Outcome::memory_guard_refusing(),
        );
        r.headers_mut()
            .insert(http::header::RETRY_AFTER, HeaderValue::from_static("5"));
        return (r, None);
    }
    if op == Op::Health && sim.knobs.refuse_health {
        let o = Outcome::error("transient", "not ready (SIM_REFUSE_HEALTH)");
        return (outcome_response(StatusCode::SERVICE_UNAVAILABLE, &o), None);
    }
    if sim.is_worker() && op.master_only(sim.config.shared_closure) {
        let o = Outcome::routing_error(&sim.code, path);
        return (
            outcome_response(StatusCode::INTERNAL_SERVER_ERROR, &o),
            None,
        );
    }
    let cache_id = req
        .headers()
        .get("x-cache-id")
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let method = req.method().clone();
    let body: Bytes = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            let o = Outcome::error("invalid", format!("could not read the request body: {e}"));
            return (outcome_response(StatusCode::BAD_REQUEST, &o), None);
        }
    };
    let body_len = Some(body.len());
    if query.get("_sim_hang").is_some_and(|v| v != "0") {
        std::future::pending::<()>().await;
    }
    // A query of death: the process ends with the request unanswered, by the signal named
    // (`SEGV`) or with the exit code given.
    if let Some(how) = query.get("_sim_exit") {
        match how.parse::<i32>() {
            Ok(exit_code) => super::run::die(&sim.code, None, exit_code, "_sim_exit"),
            Err(_) => {
                let name = how.trim_start_matches("SIG").to_ascii_uppercase();
                super::run::die(&sim.code, Some(&name), 1, "_sim_exit")
            }
        }
    }
    // A slow answer that burns no CPU (a wait on a database, say).
    if let Some(ms) = query
        .get("_sim_delay_ms")
        .and_then(|v| v.parse::<u64>().ok())
    {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
    if let (true, Some(id)) = (op.is_tx() && op != Op::CacheControl, &cache_id) {
        let verdict = sim
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .check(id);
        let o = match verdict {
            Verdict::Live => None,
            Verdict::NeverIssued => Some(Outcome::cache_id_never_issued(id)),
            Verdict::OtherInstance => Some(Outcome::cache_id_another_instance(id, &sim.code)),
            Verdict::LostToRestart => Some(Outcome::cache_id_lost_to_restart(id)),
        };
        if let Some(o) = o {
            return (outcome_response(StatusCode::NOT_FOUND, &o), body_len);
        }
        sim.concepts.fetch_add(1, Ordering::Relaxed);
    }
    cost::burn(sim.knobs.costs.for_op(op)).await;
    let mut resp = answer(sim, op, path, method.as_str(), body.len());
    if let Some(mb) = query
        .get("_sim_large_mb")
        .and_then(|v| v.parse::<u64>().ok())
    {
        *resp.body_mut() = body::large(mb);
    } else if let Some(s) = query.get("_sim_stream").and_then(|v| v.parse::<f64>().ok()) {
        *resp.body_mut() = body::stream(s);
    }
    (resp, body_len)
}

fn parameters(params: Value) -> Value {
    json!({ "resourceType": "Parameters", "parameter": params })
}

/// The FHIR-ish answer to an admitted request.
fn answer(sim: &Sim, op: Op, path: &str, method: &str, body_len: usize) -> Response<SimBody> {
    let ok = |v: Value| json_response(StatusCode::OK, &v);
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match op {
        Op::Metadata => ok(json!({
            "resourceType": "CapabilityStatement",
            "status": "active",
            "kind": "instance",
            "fhirVersion": "4.0.1",
            "software": { "name": "fhirsmith-sim", "version": env!("CARGO_PKG_VERSION") },
            "implementation": { "description": format!("simulated FHIRsmith {}", sim.code) },
        })),
        Op::Lookup => ok(parameters(json!([
            { "name": "name", "valueString": "Simulated" },
            { "name": "display", "valueString": "A simulated concept" },
        ]))),
        Op::ValidateCode => ok(parameters(
            json!([{ "name": "result", "valueBoolean": true }]),
        )),
        Op::Subsumes => ok(parameters(
            json!([{ "name": "outcome", "valueCode": "equivalent" }]),
        )),
        Op::Expand => {
            sim.expansions.fetch_add(1, Ordering::Relaxed);
            ok(json!({
                "resourceType": "ValueSet",
                "status": "active",
                "expansion": {
                    "timestamp": "2024-01-01T00:00:00Z",
                    "total": 0,
                    "parameter": [
                        { "name": "method", "valueString": method },
                        { "name": "bodyLength", "valueInteger": body_len },
                    ],
                },
            }))
        }
        Op::CacheControl => {
            let token = cache_id::token(sim.random_bits());
            let issued = sim
                .cache
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .issue(&token);
            match issued {
                Ok(id) => {
                    let mut r = ok(parameters(
                        json!([{ "name": "cache-id", "valueString": id }]),
                    ));
                    if let Ok(v) = HeaderValue::from_str(&id) {
                        r.headers_mut().insert("x-cache-id", v);
                    }
                    r
                }
                Err(e) => outcome_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &Outcome::error("exception", format!("could not create the cache: {e}")),
                ),
            }
        }
        Op::Closure => ok(json!({ "resourceType": "ConceptMap", "status": "active", "group": [] })),
        Op::Syndication => {
            ok(json!({ "resourceType": "Bundle", "type": "collection", "entry": [] }))
        }
        Op::Info => html(format!(
            "<html><body>source info on {}</body></html>",
            sim.code
        )),
        Op::Read => ok(json!({
            "resourceType": segments.get(segments.len().saturating_sub(2)).copied().unwrap_or("Resource"),
            "id": segments.last().copied().unwrap_or(""),
        })),
        Op::Search => ok(json!({ "resourceType": "Bundle", "type": "searchset", "total": 0 })),
        Op::OtherTx => ok(parameters(json!([]))),
        Op::Health => ok(json!({ "status": "ok", "code": sim.code })),
        Op::StatusJson => ok(sim.status_json()),
        Op::NonTx => html(format!(
            "<html><body>FHIRsmith (simulated) {} {}: {}</body></html>",
            sim.role_name(),
            sim.code,
            outcome::printable(path)
        )),
        Op::Sim(_) => outcome_response(
            StatusCode::NOT_FOUND,
            &Outcome::error("not-found", "no such path"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parsing() {
        let q = parse_query(Some("mb=5&_sim_hang=1&x=a%20b+c&flag"));
        assert_eq!(q.get("mb").map(String::as_str), Some("5"));
        assert_eq!(q.get("x").map(String::as_str), Some("a b c"));
        assert_eq!(q.get("flag").map(String::as_str), Some(""));
        assert!(parse_query(None).is_empty());
    }
}
