//! The simulated process's state, shared by the request handler, the IPC reporter and the
//! control paths: who it is, its counters, its caches and, as the master, what the launcher sent.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::args::SimArgs;
use super::cache_store::CacheStore;
use super::config::SimConfig;
use super::knobs::Knobs;
use super::memory::Ballast;
use fhircluster::ipc::message::{RequestCounts, Sample};
use fhircluster::process::Role;

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub struct Sim {
    pub code: String,
    pub role: Option<Role>,
    pub pid: u32,
    /// Start time, ms since the epoch; in base 36 it is the middle of this process's cache-ids.
    pub start_ms: u64,
    pub args: SimArgs,
    pub config: SimConfig,
    pub knobs: Knobs,
    pub data_dir: PathBuf,
    pub port: AtomicU64,
    pub has_channel: bool,
    pub refusing: AtomicBool,
    pub in_flight: AtomicU64,
    pub requests: AtomicU64,
    pub expansions: AtomicU64,
    pub concepts: AtomicU64,
    pub cache: Mutex<CacheStore>,
    pub ballast: Ballast,
    pub sample: Mutex<SampleWindow>,
    pub counts: Mutex<CountWindow>,
    pub received: Mutex<MasterInbox>,
    /// (statusSeconds, sampleSeconds): config's until the launcher's `hello` says otherwise.
    pub periods: Mutex<(f64, f64)>,
    /// Wakes the periodic senders when `hello` changes the periods.
    pub periods_changed: tokio::sync::Notify,
    /// `/sim/channel?pause=S`: the IPC channel is not read until then.
    pub channel_paused_until: Mutex<Option<std::time::Instant>>,
    /// Wakes the channel reader when the pause changes.
    pub channel_pause_changed: tokio::sync::Notify,
    random: Mutex<u64>,
}

/// Figures since the last graph sample.
#[derive(Default)]
pub struct SampleWindow {
    pub requests: u64,
    pub refusals: u64,
    pub turnaround_ms_sum: f64,
}

/// Counts since the last `requestCounts`.
#[derive(Default)]
pub struct CountWindow {
    pub seq: u64,
    pub from: u64,
    pub by_operation: BTreeMap<String, u64>,
}

/// What the launcher sent the master (SIM-18), kept so tests can check delivery.
#[derive(Default)]
pub struct MasterInbox {
    pub hello: Option<Value>,
    pub snapshots: u64,
    pub last_snapshot: Option<Value>,
    pub worker_counts: BTreeMap<String, u64>,
    pub worker_count_messages: Vec<Value>,
    pub events: Vec<Value>,
    pub history: Option<Value>,
    pub unknown_types: Vec<String>,
}

pub struct SimInit {
    pub code: String,
    pub role: Option<Role>,
    pub args: SimArgs,
    pub config: SimConfig,
    pub knobs: Knobs,
    pub data_dir: PathBuf,
    pub has_channel: bool,
    pub cache: CacheStore,
    pub start_ms: u64,
}

impl Sim {
    pub fn new(i: SimInit) -> Sim {
        let periods = (i.config.status_seconds, i.config.sample_seconds);
        Sim {
            refusing: AtomicBool::new(i.knobs.refuse),
            code: i.code,
            role: i.role,
            pid: std::process::id(),
            start_ms: i.start_ms,
            args: i.args,
            config: i.config,
            knobs: i.knobs,
            data_dir: i.data_dir,
            port: AtomicU64::new(0),
            has_channel: i.has_channel,
            in_flight: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            expansions: AtomicU64::new(0),
            concepts: AtomicU64::new(0),
            cache: Mutex::new(i.cache),
            ballast: Ballast::default(),
            sample: Mutex::new(SampleWindow::default()),
            counts: Mutex::new(CountWindow {
                seq: 0,
                from: i.start_ms,
                by_operation: BTreeMap::new(),
            }),
            received: Mutex::new(MasterInbox::default()),
            periods: Mutex::new(periods),
            periods_changed: tokio::sync::Notify::new(),
            channel_paused_until: Mutex::new(None),
            channel_pause_changed: tokio::sync::Notify::new(),
            random: Mutex::new(
                i.start_ms ^ (u64::from(std::process::id()) << 32) ^ 0x9e37_79b9_7f4a_7c15,
            ),
        }
    }

    pub fn role_name(&self) -> &'static str {
        self.role.map(Role::as_str).unwrap_or("server")
    }

    pub fn is_worker(&self) -> bool {
        self.role == Some(Role::TxWorker)
    }

    /// 128 fresh pseudo-random bits (splitmix64): unguessable enough for a simulation's ids.
    pub fn random_bits(&self) -> u128 {
        let mut s = self.random.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = || {
            *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = *s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        (u128::from(next()) << 64) | u128::from(next())
    }

    /// Records one answered (admitted) request.
    pub fn record(&self, op_name: &str, turnaround_ms: f64) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        {
            let mut s = self.sample.lock().unwrap_or_else(|e| e.into_inner());
            s.requests += 1;
            s.turnaround_ms_sum += turnaround_ms;
        }
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        *c.by_operation.entry(op_name.to_string()).or_default() += 1;
    }

    pub fn record_refusal(&self) {
        self.sample
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .refusals += 1;
    }

    pub fn heap_used(&self) -> u64 {
        // A Node process's heap is never empty: 10 MB of baseline, plus the ballast.
        10 * 1024 * 1024 + self.ballast.held()
    }

    pub fn heap_limit(&self) -> Option<u64> {
        self.args.max_old_space_mb.map(|mb| mb * 1024 * 1024)
    }

    pub fn memory_limit(&self) -> Option<u64> {
        self.knobs.memory_limit_mb.map(|mb| mb * 1024 * 1024)
    }

    pub fn client_caches(&self) -> u64 {
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .live_count()
    }

    pub fn take_sample(&self) -> Sample {
        let w = std::mem::take(&mut *self.sample.lock().unwrap_or_else(|e| e.into_inner()));
        Sample {
            at: now_ms(),
            requests: w.requests,
            client_caches: Some(self.client_caches()),
            client_concepts: Some(self.concepts.load(Ordering::Relaxed)),
            refusals: w.refusals,
            heap_used: Some(self.heap_used()),
            turnaround_ms: (w.requests > 0).then(|| w.turnaround_ms_sum / w.requests as f64),
        }
    }

    /// The counts since the last send, and starts a new window.
    pub fn take_counts(&self, last: bool) -> RequestCounts {
        let now = now_ms();
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        c.seq += 1;
        let by_operation = std::mem::take(&mut c.by_operation);
        let counts = RequestCounts {
            seq: c.seq,
            from: c.from,
            to: now,
            total: by_operation.values().sum(),
            by_operation,
            last,
        };
        c.from = now;
        counts
    }

    /// `/dashboard/status.json` (SIM-18): the launcher's last snapshot, or this process alone.
    pub fn status_json(&self) -> Value {
        let own = self.requests.load(Ordering::Relaxed);
        let inbox = self.received.lock().unwrap_or_else(|e| e.into_inner());
        let workers: u64 = inbox.worker_counts.values().sum();
        let requests = json!({
            "own": own,
            "workers": inbox.worker_counts,
            "total": own + workers,
        });
        if let (Some(Role::Master), Some(snapshot)) = (self.role, &inbox.last_snapshot) {
            let mut s = snapshot.clone();
            if let Some(obj) = s.as_object_mut() {
                obj.insert("requests".to_string(), requests);
            }
            return s;
        }
        json!({
            "scope": "process",
            "process": {
                "code": self.code,
                "role": self.role_name(),
                "pid": self.pid,
                "uptime": now_ms().saturating_sub(self.start_ms),
                "heapUsed": self.heap_used(),
                "heapLimit": self.heap_limit(),
                "inFlight": self.in_flight.load(Ordering::Relaxed),
                "refusing": self.refusing.load(Ordering::Relaxed),
            },
            "memory": { "limit": self.memory_limit() },
            "requests": requests,
        })
    }
}
