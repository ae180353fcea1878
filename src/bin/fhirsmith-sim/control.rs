//! The sim's own paths, `/sim/...`: what it was started with (SIM-2), what the launcher sent it
//! (SIM-18), and the runtime knobs (refuse, channel pause, memory, hang, stream, large). Answered by any
//! process, never refused, never counted.

use std::sync::atomic::Ordering;

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::json;

use super::body::{self, SimBody};
use super::handler::{json_response, outcome_response, Query};
use super::path::SimPath;
use super::state::Sim;
use fhircluster::outcome::Outcome;

/// Environment variables `/sim/info` reports.
const REPORTED_ENV: &[&str] = &[
    "FHIRSMITH_ROLE",
    "FHIRSMITH_INSTANCE_CODE",
    "FHIRSMITH_DATA_DIR",
    "PORT",
    "FHIRCLUSTER_NODE_FLAGS",
    "NODE_OPTIONS",
    "NODE_CHANNEL_FD",
    "NODE_CHANNEL_SERIALIZATION_MODE",
];

pub async fn handle(sim: &Sim, p: SimPath, q: &Query, req: Request<Incoming>) -> Response<SimBody> {
    let num = |k: &str| q.get(k).and_then(|v| v.parse::<f64>().ok());
    let post = req.method() == Method::POST;
    match p {
        SimPath::Info => {
            let env: serde_json::Map<String, serde_json::Value> = REPORTED_ENV
                .iter()
                .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v.into())))
                .collect();
            let (status_s, sample_s) = *sim.periods.lock().unwrap_or_else(|e| e.into_inner());
            json_response(
                StatusCode::OK,
                &json!({
                    "code": sim.code,
                    "role": sim.role.map(|r| r.as_str()),
                    "pid": sim.pid,
                    "port": sim.port.load(Ordering::Relaxed),
                    "startedAt": sim.start_ms,
                    "argv": sim.args.argv,
                    "unknownFlags": sim.args.unknown,
                    "nodeFlags": std::env::var("FHIRCLUSTER_NODE_FLAGS").ok(),
                    "env": env,
                    "channel": sim.has_channel,
                    "dataDir": sim.data_dir.to_string_lossy(),
                    "bindAddress": sim.config.bind_address,
                    "endpoints": sim.config.endpoints,
                    "sharedCache": sim.config.shared_cache,
                    "sharedClosure": sim.config.shared_closure,
                    "statusSeconds": status_s,
                    "sampleSeconds": sample_s,
                    "refusing": sim.refusing.load(Ordering::Relaxed),
                    "requests": sim.requests.load(Ordering::Relaxed),
                    "inFlight": sim.in_flight.load(Ordering::Relaxed),
                }),
            )
        }
        SimPath::Received => {
            let r = sim.received.lock().unwrap_or_else(|e| e.into_inner());
            json_response(
                StatusCode::OK,
                &json!({
                    "hello": r.hello,
                    "snapshots": r.snapshots,
                    "lastSnapshot": r.last_snapshot,
                    "workerCounts": r.worker_counts,
                    "workerCountMessages": r.worker_count_messages,
                    "events": r.events,
                    "history": r.history,
                    "unknownTypes": r.unknown_types,
                }),
            )
        }
        SimPath::Refuse if post => {
            let on = q.get("on").is_none_or(|v| v != "0" && v != "false");
            sim.refusing.store(on, Ordering::Relaxed);
            json_response(StatusCode::OK, &json!({ "refusing": on }))
        }
        SimPath::Channel if post => {
            let seconds = num("pause").unwrap_or(0.0).clamp(0.0, 86_400.0);
            let until = (seconds > 0.0)
                .then(|| std::time::Instant::now() + std::time::Duration::from_secs_f64(seconds));
            *sim.channel_paused_until
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = until;
            sim.channel_pause_changed.notify_waiters();
            json_response(StatusCode::OK, &json!({ "pausedSeconds": seconds }))
        }
        SimPath::Alloc if post => {
            let mb = num("mb").unwrap_or(0.0).max(0.0) as u64;
            let held = sim.ballast.alloc(mb);
            json_response(StatusCode::OK, &json!({ "held": held }))
        }
        SimPath::Free if post => {
            sim.ballast.free();
            json_response(StatusCode::OK, &json!({ "held": 0 }))
        }
        SimPath::Hang => {
            let _req = req;
            std::future::pending::<Response<SimBody>>().await
        }
        SimPath::Stream => {
            let mut r = Response::new(body::stream(num("seconds").unwrap_or(5.0)));
            r.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain"),
            );
            r
        }
        SimPath::Large => Response::new(body::large(num("mb").unwrap_or(1.0).max(0.0) as u64)),
        SimPath::Refuse | SimPath::Channel | SimPath::Alloc | SimPath::Free => outcome_response(
            StatusCode::METHOD_NOT_ALLOWED,
            &Outcome::error("not-supported", "use POST"),
        ),
        SimPath::Unknown => outcome_response(
            StatusCode::NOT_FOUND,
            &Outcome::error("not-found", "no such /sim/ path"),
        ),
    }
}
