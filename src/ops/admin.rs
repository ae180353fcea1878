//! The launcher's own endpoints, on a listener of their own (`adminAddress`, off unless set) so
//! they never collide with FHIRsmith's paths, read-only: `/` (the status page, HTML,
//! `status_page.rs`), `/livez` (the launcher is up),
//! `/readyz` (`200` when the master and at least one tx process are ready and it isn't
//! draining, else `503` with a JSON reason), `/status` (the cluster snapshot with the front
//! door's live figures) and `/metrics` (Prometheus text). No action is here: an action's path
//! (`/upgrade`) is `404` naming the control socket (`control_socket.rs`), where the actions
//! go, for the service user and its group only. `Admin` is the figures both serve.

use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::debug;

use super::admin_room::Room;
use super::control_proto::{level_of, Level};
use super::metrics::{render, BufferFigures, MetricsInput, ProcessLoad};
use crate::logs::log_queue::{queue, Source};
use crate::process::ProcessId;
use crate::proxy::counters::CLASSES;
use crate::proxy::forward::{full, ProxyBody};
use crate::proxy::front::Front;
use crate::status::events::{LostKind, RefusalKind};
use crate::status::keeper::Report;
use crate::supervisor::{Control, Hooks};

/// How long `/status` and `/metrics` wait for the supervisor's figures.
const REPORT_WAIT: Duration = Duration::from_secs(2);

pub struct Admin {
    pub front: Arc<Front>,
    pub control: mpsc::Sender<Control>,
    /// Total refusals sampled every few seconds over the last minute, oldest first.
    pub window: std::sync::Mutex<std::collections::VecDeque<(tokio::time::Instant, u64)>>,
    /// The upgrades' outcomes, read by the status page (upgrades are asked on the control
    /// socket, never here).
    pub desk: super::upgrade_desk::UpgradeDesk,
}

impl Admin {
    /// The figures, and their sampler (the refusals in the last minute) started.
    pub(crate) fn start(
        front: Arc<Front>,
        control: mpsc::Sender<Control>,
        desk: super::upgrade_desk::UpgradeDesk,
    ) -> Arc<Admin> {
        let admin = Arc::new(Admin {
            front,
            control,
            window: Default::default(),
            desk,
        });
        let sampler = admin.clone();
        tokio::spawn(async move {
            loop {
                sampler.sample();
                // The refusals' one-minute window is sampled every 5 s: a period, not a wait.
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        });
        admin
    }

    /// `/status`'s JSON (and the control socket's `status`).
    pub(crate) async fn status_value(&self) -> Value {
        let report = report(self).await;
        let mut v = status_json(&self.front, report.as_ref());
        v["front"]["refusalsLastMinute"] = json!(self.refusals_last_minute());
        v
    }

    fn refusals_total(&self) -> u64 {
        let t = self.front.counters.tally();
        t.refused.iter().map(|(_, n)| n).sum()
    }

    /// Refusals in about the last minute.
    fn refusals_last_minute(&self) -> u64 {
        let now_total = self.refusals_total();
        let w = self.window.lock().unwrap_or_else(|p| p.into_inner());
        w.front()
            .map_or(now_total, |(_, then)| now_total.saturating_sub(*then))
    }

    fn sample(&self) {
        let now = tokio::time::Instant::now();
        let total = self.refusals_total();
        let mut w = self.window.lock().unwrap_or_else(|p| p.into_inner());
        w.push_back((now, total));
        while w
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > Duration::from_secs(60))
        {
            w.pop_front();
        }
    }
}

/// Serves the launcher's endpoints until the process exits.
/// At most `ADMIN_AT_MOST` connections hold a place at once, so a crowd on a published endpoint
/// can't take the descriptors the client port and the processes need; a newcomer is always
/// taken, the longest idle connection closed for it at the cap, or, when every one has a request
/// in progress, the oldest closed after its answer (`admin_room.rs`, DEC-76), so a health check
/// is answered whatever the crowd holds.
pub async fn serve(listener: TcpListener, admin: Arc<Admin>) {
    let room = Arc::new(Mutex::new(Room::new(
        crate::proxy::conn_limit::ADMIN_AT_MOST,
    )));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        // Kept in the room: dropped, it closes the connection at once; `true`, after its answer.
        let (handle, closing) = watch::channel(false);
        let taken = {
            let mut room = lock(&room);
            let taken = room.admit(handle);
            if let Some(id) = taken.as_ref().and_then(|t| t.finishing) {
                if let Some(h) = room.handle(id) {
                    h.send_replace(true);
                }
            }
            taken
        };
        let Some(taken) = taken else {
            debug!("admin connection closed at once: as many again are closing already");
            continue;
        };
        if taken.closed.is_some() {
            debug!("admin connection: the longest idle closed to make room");
        }
        tokio::spawn(connection(
            stream,
            taken.id,
            room.clone(),
            admin.clone(),
            closing,
        ));
        // The newcomer reads its head before the next accept: under a stream of connections
        // a health check's request, sent at once, makes it busy before 64 others come after it.
        tokio::task::yield_now().await;
    }
}

/// The admin connections held, each with the sender that closes it.
type Shared = Arc<Mutex<Room<watch::Sender<bool>>>>;

fn lock(room: &Shared) -> MutexGuard<'_, Room<watch::Sender<bool>>> {
    room.lock().unwrap_or_else(|p| p.into_inner())
}

/// One connection, served until it ends, is closed to make room (`closing`'s sender dropped), or
/// closes after its answer (`closing` turned true).
async fn connection(
    stream: TcpStream,
    id: u64,
    room: Shared,
    admin: Arc<Admin>,
    mut closing: watch::Receiver<bool>,
) {
    let _leave = Leave(room.clone(), id);
    let svc = service_fn(move |req| {
        let (admin, room) = (admin.clone(), room.clone());
        async move {
            lock(&room).begin(id);
            let _idle_after = Answered(room.clone(), id);
            Ok::<_, Infallible>(handle(&admin, req).await)
        }
    });
    let mut b = http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(10));
    let conn = b.serve_connection(TokioIo::new(stream), svc);
    tokio::pin!(conn);
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    debug!("admin connection: {e}");
                }
                return;
            }
            told = closing.changed() => {
                if told.is_err() {
                    return;
                }
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Its request answered (or given up): the connection is idle from now.
struct Answered(Shared, u64);

impl Drop for Answered {
    fn drop(&mut self) {
        lock(&self.0).end(self.1);
    }
}

/// The connection ended: its place is free.
struct Leave(Shared, u64);

impl Drop for Leave {
    fn drop(&mut self) {
        lock(&self.0).leave(self.1);
    }
}

fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<bytes::Bytes>,
) -> Response<ProxyBody> {
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn json_response(status: StatusCode, v: &Value) -> Response<ProxyBody> {
    respond(status, "application/json", v.to_string())
}

/// What this listener serves.
const ENDPOINTS: [&str; 5] = ["/", "/livez", "/readyz", "/status", "/metrics"];

async fn handle(admin: &Admin, req: Request<Incoming>) -> Response<ProxyBody> {
    // An action's path, whatever the method: not here (this listener only looks).
    let name = req.uri().path().trim_start_matches('/');
    if level_of(name) == Some(Level::Action) {
        return json_response(
            StatusCode::NOT_FOUND,
            &json!({
                "error": format!(
                    "not on this listener, which is read-only: {name} is an action, taken on \
                     the launcher's control socket (server.cluster.controlSocket) by \
                     `fhircluster {name}`, as the service user or controlGroup"
                ),
                "endpoints": ENDPOINTS,
            }),
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = json_response(
            StatusCode::METHOD_NOT_ALLOWED,
            &json!({"error": "only GET and HEAD"}),
        );
        r.headers_mut()
            .insert(http::header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    match req.uri().path() {
        "/" => status_page(admin).await,
        "/livez" => respond(StatusCode::OK, "text/plain", "live\n"),
        "/readyz" => readyz(&admin.front),
        "/status" => json_response(StatusCode::OK, &admin.status_value().await),
        "/metrics" => {
            let report = report(admin).await;
            respond(
                StatusCode::OK,
                "text/plain; version=0.0.4",
                metrics_text(&admin.front, report.as_ref()),
            )
        }
        _ => json_response(
            StatusCode::NOT_FOUND,
            &json!({"error": "not found", "endpoints": ENDPOINTS}),
        ),
    }
}

/// `GET /`: the status page (`status_page.rs`), from what `/status` shows, the graph history and
/// the last upgrade's outcome. Read-only.
async fn status_page(admin: &Admin) -> Response<ProxyBody> {
    let report = report(admin).await;
    let mut status = status_json(&admin.front, report.as_ref());
    status["front"]["refusalsLastMinute"] = json!(admin.refusals_last_minute());
    let now_ms = crate::clock::unix_ms();
    let history = report.map_or(Value::Null, |r| r.history.to_json(now_ms));
    let upgrade = admin.desk.state()["last"].clone();
    let html = super::status_page::render(&super::status_page::PageInput {
        status: &status,
        history: &history,
        upgrade: &upgrade,
        now_ms,
    });
    let mut r = respond(StatusCode::OK, "text/html; charset=utf-8", html);
    r.headers_mut().insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    r
}

/// Ready: the master and at least one tx process, and no stop begun (`readiness.rs`).
pub fn readiness(front: &Front) -> Result<(), &'static str> {
    super::readiness::readiness(&super::readiness::HostState::of(front))
}

fn readyz(front: &Front) -> Response<ProxyBody> {
    match readiness(front) {
        Ok(()) => json_response(StatusCode::OK, &json!({"ready": true})),
        Err(reason) => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"ready": false, "reason": reason}),
        ),
    }
}

async fn report(admin: &Admin) -> Option<Report> {
    let (tx, rx) = oneshot::channel();
    admin.control.send(Control::Report(tx)).await.ok()?;
    tokio::time::timeout(REPORT_WAIT, rx).await.ok()?.ok()
}

fn loads(front: &Front) -> Vec<ProcessLoad> {
    front
        .roster
        .present()
        .map(|p| {
            let l = front.admission.load(p.id);
            ProcessLoad {
                code: p.code.clone(),
                in_flight: l.in_flight,
                slots: l.slots,
                queued: l.queued,
                saturated: l.saturated,
                ready: front.roster.is_ready(p.id),
                cooling: l.cooling,
            }
        })
        .collect()
}

/// The snapshot, with each process's slots and queue from the front door, and the refusals.
pub fn status_json(front: &Front, report: Option<&Report>) -> Value {
    let mut v = report.map_or_else(|| json!({"processes": []}), |r| r.snapshot.clone());
    let loads = loads(front);
    if let Some(procs) = v["processes"].as_array_mut() {
        // The snapshot lists the processes in the plan's order, as the front door does; a
        // place's second process (DEC-92) has no slots of its own.
        let places = procs.iter_mut().filter(|p| p["beside"] != true);
        for (i, (p, l)) in places.zip(&loads).enumerate() {
            p["slots"] = json!(l.slots);
            p["queued"] = json!(l.queued);
            p["frontInFlight"] = json!(l.in_flight);
            p["saturated"] = json!(l.saturated);
            p["routable"] = json!(front.roster.is_ready(ProcessId(i as u16)));
        }
    }
    let t = front.counters.tally();
    v["front"] = json!({
        "queued": front.admission.queued(),
        "draining": front.admission.is_stopping(),
        "ready": readiness(front).is_ok(),
        "refusals": {
            "queueWait": t.refused[RefusalKind::QueueWait],
            // Of those, refused as they came (predictiveAdmission, DEC-50).
            "queueWaitAtOnce": front.counters.refused_early.load(std::sync::atomic::Ordering::Relaxed),
            "noProcessReady": t.refused[RefusalKind::NoProcessReady],
            "stopping": t.refused[RefusalKind::Stopping],
        },
        "writeTimeoutCloses": t.write_timeout_closes,
        "reload": front.counters.observed.reload_note.to_json(),
    });
    v
}

pub fn metrics_text(front: &Front, report: Option<&Report>) -> String {
    use std::sync::atomic::Ordering::Relaxed;
    let c = &front.counters;
    let mut requests = Vec::new();
    for (way, by_class) in c.answered_by_way() {
        for (class, n) in CLASSES.into_iter().zip(by_class) {
            requests.push((way, class, n));
        }
    }
    let t = c.tally();
    let input = MetricsInput {
        requests,
        lanes: c
            .lanes
            .iter()
            .map(|(lane, n)| (lane.label(), n.load(Relaxed)))
            .collect(),
        refusals: vec![
            ("queue_wait", t.refused[RefusalKind::QueueWait]),
            ("no_process_ready", c.refused_no_process.load(Relaxed)),
            ("stopping", t.refused[RefusalKind::Stopping]),
            ("master_not_ready", c.refused_master_down.load(Relaxed)),
            ("cache_id_lost", c.cache_id_lost.load(Relaxed)),
            ("request_timeout", c.request_timeouts.load(Relaxed)),
            ("head_too_large", c.heads_too_large.load(Relaxed)),
            ("bad_request_head", c.bad_heads.load(Relaxed)),
        ],
        upstream_errors: front
            .roster
            .all()
            .iter()
            .zip(&t.lost)
            .filter(|(p, _)| front.roster.is_present(p.id))
            .map(|(p, l)| {
                let (b502, t504) = (l[LostKind::BadGateway502], l[LostKind::Timeout504]);
                (p.code.clone(), b502, t504)
            })
            .collect(),
        write_timeout_closes: t.write_timeout_closes,
        buffer: BufferFigures {
            held: front.budget.used(),
            limit: front.budget.limit(),
            responses_streamed: front.budget.responses_streamed.load(Relaxed),
            requests_streamed: front.budget.requests_streamed.load(Relaxed),
        },
        queued: front.admission.queued(),
        queue_wait: &c.queue_wait,
        processes: loads(front),
        fronts: front
            .roster
            .present()
            .filter_map(|p| Some((p.code.clone(), front.front(p.id)?)))
            .collect(),
        snapshot: report.map(|r| &r.snapshot),
        recycles: report.map(|r| r.recycles.clone()).unwrap_or_default(),
        log_lines_dropped: Source::ALL
            .iter()
            .map(|&s| (s.label(), queue().dropped(s)))
            .collect(),
        observed: &c.observed,
        access_log_dropped: crate::logs::access_log::dropped(),
        started_ms: crate::exposition::process_self::start_time_ms().unwrap_or(0),
    };
    let text = render(&input);
    match front.carried.get() {
        Some(carried) => crate::proxy::carried_counters::add(&text, carried),
        None => text,
    }
}
