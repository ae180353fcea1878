//! Smoke test of the real `fhircluster-load` binary against a tiny hyper server started inside
//! the test (quick answers, a cache-id from `$cache-control` that is forgotten after five uses,
//! a `503` with `Connection: close` for every fifth `$expand`): the JSON reports parse and their
//! counts add up. The `fhirsmith-sim` server is not needed.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

const LOAD: &str = env!("CARGO_BIN_EXE_fhircluster-load");
/// How many times the test server honours a cache-id before it answers `cache-id-unknown`.
const USES_PER_CACHE: u32 = 5;

#[derive(Default)]
struct State {
    /// How long each `$expand` takes.
    expand_delay: Duration,
    caches: AtomicU64,
    expands: AtomicU64,
    uses: Mutex<HashMap<String, u32>>,
}

fn reply(status: u16, body: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    r
}

async fn handle(
    req: Request<Incoming>,
    state: Arc<State>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_string();
    let cache_id = req
        .headers()
        .get("x-cache-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let _ = req.into_body().collect().await;
    if path.ends_with("/$cache-control") {
        let n = state.caches.fetch_add(1, Ordering::Relaxed);
        let id = format!("t1.s0.{n}");
        // Half the ids come in the header, half only in the body, as either is allowed.
        let mut r = reply(
            200,
            &format!(r#"{{"resourceType":"Parameters","cacheId":"{id}"}}"#),
        );
        if n % 2 == 0 {
            if let Ok(v) = id.parse() {
                r.headers_mut().insert("x-cache-id", v);
            }
        }
        return Ok(r);
    }
    if let Some(id) = cache_id {
        let mut uses = state.uses.lock().unwrap_or_else(|e| e.into_inner());
        let used = uses.entry(id).or_insert(0);
        if *used >= USES_PER_CACHE {
            return Ok(reply(
                404,
                r#"{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"not-found","details":{"coding":[{"code":"cache-id-unknown"}]}}]}"#,
            ));
        }
        *used += 1;
    }
    if path.ends_with("/$expand") {
        tokio::time::sleep(state.expand_delay).await;
    }
    if path.ends_with("/$expand") && state.expands.fetch_add(1, Ordering::Relaxed) % 5 == 4 {
        let mut r = reply(503, r#"{"resourceType":"OperationOutcome"}"#);
        r.headers_mut().insert(
            "connection",
            hyper::header::HeaderValue::from_static("close"),
        );
        r.headers_mut()
            .insert("retry-after", hyper::header::HeaderValue::from_static("5"));
        return Ok(r);
    }
    Ok(reply(
        200,
        r#"{"resourceType":"Parameters","parameter":[]}"#,
    ))
}

/// The test server, on its own thread and runtime; stopped when dropped.
struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start() -> Server {
        Server::with_expand_delay(Duration::ZERO)
    }

    fn with_expand_delay(expand_delay: Duration) -> Server {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let listener = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let (stop, mut stopped) = oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let state = Arc::new(State {
                expand_delay,
                ..State::default()
            });
            runtime.block_on(async move {
                loop {
                    let accepted = tokio::select! {
                        _ = &mut stopped => break,
                        a = listener.accept() => a,
                    };
                    let Ok((stream, _)) = accepted else { continue };
                    let _ = stream.set_nodelay(true);
                    let state = state.clone();
                    tokio::spawn(async move {
                        let service = service_fn(move |req| handle(req, state.clone()));
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
        });
        Server {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn base(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn load(args: &[&str]) -> Output {
    Command::new(LOAD)
        .args(args)
        .output()
        .expect("run fhircluster-load")
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}, stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

fn n(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not a count in {v}"))
}

/// `sent = 2xx + non-2xx + timeouts + errors`, and the non-2xx split adds up too.
fn assert_counts_add_up(c: &Value) {
    assert_eq!(
        n(c, "sent"),
        n(c, "status_2xx") + n(c, "non_2xx") + n(c, "timeouts") + n(c, "errors"),
        "{c}"
    );
    assert_eq!(
        n(c, "non_2xx"),
        n(c, "status_503") + n(c, "status_504") + n(c, "status_other"),
        "{c}"
    );
}

#[test]
fn surge_reports_counts_that_add_up_and_a_probe_series() {
    let server = Server::start();
    let base = server.base();
    let out = load(&[
        "surge",
        "--base",
        &base,
        "--seconds",
        "2",
        "--rate",
        "50",
        "--probe-rate",
        "20",
        "--after-seconds",
        "1",
        "--timeout",
        "2",
        "--fast-ms",
        "1000",
        "--json",
    ]);
    let r = json_of(&out);
    assert_eq!(r["mode"], "surge");
    let heavy = &r["heavy"];
    assert_counts_add_up(heavy);
    assert_eq!(n(heavy, "scheduled"), 100);
    assert_eq!(n(heavy, "sent") + n(heavy, "unsent"), 100);
    // A quick server: everything is sent and answered, and every fifth $expand is a 503.
    assert_eq!(n(heavy, "sent"), 100, "{heavy}");
    assert!(n(heavy, "status_2xx") >= 90, "{heavy}");
    assert!(n(heavy, "status_503") >= 4, "{heavy}");
    // The 503s came with `Connection: close`: the next request on it reconnects cleanly.
    assert_eq!(
        (n(heavy, "errors"), n(heavy, "timeouts")),
        (0, 0),
        "{heavy}"
    );
    let small = &heavy["by_kind"]["validate_small"];
    assert_eq!(n(small, "sent"), 50, "the 1:2:1 mix: {heavy}");
    assert!(
        heavy["goodput_per_second"]
            .as_f64()
            .is_some_and(|g| g > 40.0),
        "{heavy}"
    );
    assert!(heavy["latency_ms"]["p99_ms"].is_number());

    let probe = &r["probe"];
    assert_eq!(n(probe, "scheduled"), 60);
    assert_counts_add_up(&probe["during_surge"]);
    assert_counts_add_up(&probe["after_surge"]);
    assert_eq!(
        n(&probe["during_surge"], "sent") + n(&probe["after_surge"], "sent"),
        60
    );
    let series = probe["series"].as_array().expect("series");
    assert_eq!(series.len(), 60);
    assert!(series
        .iter()
        .all(|p| p["t_ms"].is_number() && p["status"] == 200 && p["latency_ms"].is_number()));
    assert_eq!(probe["back_under_threshold_after_ms"], 0.0);
}

#[test]
fn arrivals_over_the_concurrency_cap_are_unsent_and_latency_counts_from_the_schedule() {
    let server = Server::with_expand_delay(Duration::from_millis(400));
    let base = server.base();
    let out = load(&[
        "surge",
        "--base",
        &base,
        "--seconds",
        "1",
        "--rate",
        "20",
        "--concurrency",
        "2",
        "--expand-weight",
        "1",
        "--small-weight",
        "0",
        "--large-weight",
        "0",
        "--probe-rate",
        "1",
        "--after-seconds",
        "0",
        "--timeout",
        "3",
        "--json",
    ]);
    let r = json_of(&out);
    let heavy = &r["heavy"];
    assert_counts_add_up(heavy);
    assert_eq!(n(heavy, "sent") + n(heavy, "unsent"), 20, "{heavy}");
    // Two at a time, 400 ms each, against one due every 50 ms: most cannot be sent.
    assert!(n(heavy, "unsent") >= 8, "{heavy}");
    assert!(n(heavy, "sent") >= 2, "{heavy}");
    let p50 = heavy["ok_latency_ms"]["p50_ms"].as_f64().unwrap_or(0.0);
    assert!(
        p50 >= 400.0,
        "a 400 ms answer is at least 400 ms from its due time: {heavy}"
    );
    // With no probe after the surge there is no recovery figure.
    assert_eq!(r["probe"]["back_under_threshold_after_ms"], Value::Null);
}

#[test]
fn sessions_restart_their_cache_on_cache_id_unknown_and_count_it() {
    let server = Server::start();
    let base = server.base();
    let out = load(&[
        "sessions",
        "--base",
        &base,
        "--clients",
        "3",
        "--requests",
        "12",
        "--timeout",
        "2",
        "--json",
    ]);
    let r = json_of(&out);
    assert_eq!(r["mode"], "sessions");
    let reqs = &r["requests"];
    assert_counts_add_up(reqs);
    assert_counts_add_up(&r["cache_control"]);
    // Per client: five uses, a cache-id-unknown, a new cache, five uses, a cache-id-unknown.
    assert_eq!(
        (
            n(reqs, "sent"),
            n(reqs, "status_2xx"),
            n(reqs, "status_other")
        ),
        (36, 30, 6),
        "{r}"
    );
    assert_eq!(
        (
            n(&r, "cache_id_unknown"),
            n(&r, "caches_started"),
            n(&r, "sessions_failed")
        ),
        (6, 6, 0),
        "{r}"
    );
    assert_eq!(n(&r["cache_control"], "sent"), 6);
    assert_eq!(r["stopped_early"], false);
    assert!(r["throughput_per_second"].as_f64().is_some_and(|t| t > 0.0));
    assert_eq!(n(&r["latency_ms"], "count"), 36);
}

#[test]
fn a_host_off_this_machine_is_refused_before_anything_is_sent() {
    let out = load(&[
        "surge",
        "--base",
        "http://192.168.1.1:8080",
        "--rate",
        "10",
        "--seconds",
        "1",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refusing host") && stderr.contains("loopback"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}
