//! The IPC messages, both directions, as serde types: `#[serde(tag = "type")]`, camelCase fields.
//! cluster.md ("The IPC protocol") is the contract (version [`PROTOCOL_VERSION`]); keep the two in step.
//! Each direction has an `Unknown` fallback so a newer peer's messages are ignored, not errors.
//! Big payloads the launcher assembles elsewhere (the snapshot, events, graph history) are opaque
//! `serde_json::Value`s here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version this side speaks. A peer with another major version is logged as a
/// warning; messages are still exchanged (unknown types are ignored either way).
/// 1.1 added the child's `hello` and the master's `eventsReceived` (both optional).
pub const PROTOCOL_VERSION: &str = "1.1";

/// Whether a peer's version string has the same major version as ours.
pub fn same_major(peer: &str) -> bool {
    let major = |v: &str| v.split('.').next().unwrap_or("").trim().to_string();
    major(peer) == major(PROTOCOL_VERSION)
}

/// Whether a master speaking `peer` acknowledges the events it takes (`eventsReceived`, 1.1 on,
/// same major). An older master's events count as delivered once its channel write succeeded.
pub fn acknowledges_events(peer: &str) -> bool {
    let mut parts = peer.trim().split('.');
    let (Some(major), Some(minor)) = (parts.next(), parts.next()) else {
        return false;
    };
    match (major.parse::<u32>(), minor.parse::<u32>()) {
        (Ok(1), Ok(minor)) => minor >= 1,
        _ => false,
    }
}

/// Child (master or tx-worker) → launcher.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum FromChild {
    /// Optional (1.1), first, as soon as the process has its channel and before it listens: it
    /// speaks the protocol, so only its `ready` makes it ready, never its listening socket.
    #[serde(rename_all = "camelCase")]
    Hello {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        protocol: Option<String>,
        #[serde(default)]
        code: String,
        #[serde(default)]
        pid: u32,
    },
    /// Sent once, as the process begins to listen: the launcher's readiness signal.
    #[serde(rename_all = "camelCase")]
    Ready {
        code: String,
        /// `master` or `tx-worker`.
        role: String,
        pid: u32,
        /// The port it listens on (the one it was given, or the one it got for 0).
        port: u16,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        protocol: Option<String>,
        /// Bytes its memory guard measures against, or null when it has no limit.
        #[serde(default)]
        memory_limit: Option<u64>,
    },
    /// Every `statusSeconds`: the figures only the process knows (the launcher reads
    /// `/proc/<pid>/status` itself).
    Status(Status),
    /// Every `stats.sampleSeconds`: one graph sample.
    Sample(Sample),
    /// Tx-workers, every minute and once more as they stop: the counts since the last send.
    RequestCounts(RequestCounts),
    /// Optional (1.1), the master: it has kept every event up to this id (`events` message);
    /// the launcher deletes them from its outbox only then.
    #[serde(rename_all = "camelCase")]
    EventsReceived { up_to: u64 },
    /// A type this side doesn't know (a newer peer): ignored, logged once per type.
    #[serde(other)]
    Unknown,
}

/// A process's own figures (child → launcher `status`). Null where a figure isn't known.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    #[serde(default)]
    pub heap_used: Option<u64>,
    #[serde(default)]
    pub heap_limit: Option<u64>,
    #[serde(default)]
    pub client_caches: Option<u64>,
    #[serde(default)]
    pub client_concepts: Option<u64>,
    #[serde(default)]
    pub expansion_items: Option<u64>,
    pub in_flight: u32,
    pub refusing: bool,
    /// Requests served since the process started.
    pub requests: u64,
    /// Optional (1.1): its event loop's delay over the last interval, ms (the 99th percentile:
    /// the Node preload's `perf_hooks.monitorEventLoopDelay`); null or absent when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_loop_delay_ms: Option<f64>,
}

impl Status {
    /// The figures of a `status` message; None for any other message.
    pub(crate) fn from_message(msg: &FromChild) -> Option<Status> {
        match msg {
            FromChild::Status(s) => Some(s.clone()),
            _ => None,
        }
    }
}

/// One graph sample (child → launcher).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    /// When it was taken, ms since the Unix epoch.
    pub at: u64,
    /// Requests served in the sampling interval.
    pub requests: u64,
    #[serde(default)]
    pub client_caches: Option<u64>,
    #[serde(default)]
    pub client_concepts: Option<u64>,
    /// Memory-guard 503 refusals in the interval.
    pub refusals: u64,
    #[serde(default)]
    pub heap_used: Option<u64>,
    /// Mean turnaround of the requests in the interval, ms; null with none.
    #[serde(default)]
    pub turnaround_ms: Option<f64>,
}

/// Request counts since the last send (child → launcher; inside `workerCounts` launcher → master).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestCounts {
    /// 1, 2, 3 ... per process start, so a receiver can tell a repeat from a new send.
    pub seq: u64,
    /// The interval counted, ms since the Unix epoch.
    pub from: u64,
    pub to: u64,
    pub total: u64,
    /// Per operation (`$lookup`, `$expand`, `metadata`, `read`, `search`, ...).
    #[serde(default)]
    pub by_operation: BTreeMap<String, u64>,
    /// True on the last send, as the process stops.
    #[serde(default)]
    pub last: bool,
}

/// Launcher → child.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ToChild {
    /// The first message on every channel.
    #[serde(rename_all = "camelCase")]
    Hello {
        protocol: String,
        role: String,
        code: String,
        status_seconds: f64,
        sample_seconds: f64,
    },
    /// To the master, every `statusSeconds`: the cluster status object
    /// (`/dashboard/status.json` with `scope: "cluster"`).
    Snapshot { status: Value },
    /// To the master: one worker's counts, passed on exactly once.
    WorkerCounts { code: String, counts: RequestCounts },
    /// To the master: cluster events (exits, recycles, refusals ...), as they happen.
    Events { events: Vec<Value> },
    /// To the master: the graph history of every process.
    History { history: Value },
    /// A type this side doesn't know: ignored, logged once per type.
    #[serde(other)]
    Unknown,
}

/// Implemented by both directions' enums, so the channel can tell the fallback apart.
pub trait Message: serde::de::DeserializeOwned + Serialize + Send + 'static {
    fn is_unknown(&self) -> bool;
}

impl Message for FromChild {
    fn is_unknown(&self) -> bool {
        matches!(self, FromChild::Unknown)
    }
}

impl Message for ToChild {
    fn is_unknown(&self) -> bool {
        matches!(self, ToChild::Unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipc::codec::{decode, encode, parse_frame};
    use serde_json::json;

    fn roundtrip<T: Message + std::fmt::Debug + PartialEq>(m: T) -> Value {
        let bytes = encode(&m).unwrap_or_default();
        let frame = parse_frame(&bytes[..bytes.len() - 1]);
        let back: Result<T, _> = frame
            .clone()
            .map_err(|e| e.to_string())
            .and_then(|f| decode(f).map_err(|e| e.to_string()));
        assert_eq!(back.as_ref().ok(), Some(&m));
        frame.map(|f| f.value).unwrap_or_default()
    }

    #[test]
    fn wire_names_are_camel_case_with_a_type() {
        let v = roundtrip(FromChild::Ready {
            code: "tx1".into(),
            role: "tx-worker".into(),
            pid: 42,
            port: 3002,
            protocol: Some("1.0".into()),
            memory_limit: None,
        });
        assert_eq!(
            v,
            json!({"type":"ready","code":"tx1","role":"tx-worker","pid":42,"port":3002,"protocol":"1.0","memoryLimit":null})
        );
        let v = roundtrip(FromChild::Status(Status {
            heap_used: Some(1),
            heap_limit: None,
            client_caches: Some(2),
            client_concepts: Some(3),
            expansion_items: Some(4),
            in_flight: 5,
            refusing: true,
            requests: 6,
            event_loop_delay_ms: Some(1.5),
        }));
        assert_eq!(v["type"], "status");
        assert_eq!(v["eventLoopDelayMs"], 1.5);
        assert_eq!(v["inFlight"], 5);
        assert_eq!(v["heapLimit"], Value::Null);
        let v = roundtrip(FromChild::RequestCounts(RequestCounts {
            seq: 1,
            total: 3,
            by_operation: [("$lookup".to_string(), 3)].into(),
            ..Default::default()
        }));
        assert_eq!(v["type"], "requestCounts");
        assert_eq!(v["byOperation"]["$lookup"], 3);
        let v = roundtrip(FromChild::Sample(Sample {
            at: 9,
            ..Default::default()
        }));
        assert_eq!(v["type"], "sample");
        let v = roundtrip(ToChild::Hello {
            protocol: "1.0".into(),
            role: "master".into(),
            code: "m0".into(),
            status_seconds: 15.0,
            sample_seconds: 60.0,
        });
        assert_eq!(v["statusSeconds"], 15.0);
        let v = roundtrip(ToChild::WorkerCounts {
            code: "tx1".into(),
            counts: RequestCounts::default(),
        });
        assert_eq!(v["type"], "workerCounts");
        roundtrip(ToChild::Snapshot {
            status: json!({"scope":"cluster"}),
        });
        roundtrip(ToChild::Events {
            events: vec![json!({"kind":"exit"})],
        });
        roundtrip(ToChild::History { history: json!({}) });
    }

    #[test]
    fn unknown_types_and_extra_fields_are_tolerated() {
        let f = parse_frame(br#"{"type":"fromTheFuture","x":1}"#);
        let m: Result<FromChild, _> = f
            .map_err(|e| e.to_string())
            .and_then(|f| decode(f).map_err(|e| e.to_string()));
        assert_eq!(m, Ok(FromChild::Unknown));
        let f = parse_frame(
            br#"{"type":"status","inFlight":1,"refusing":false,"requests":2,"newField":true}"#,
        );
        let m: Result<FromChild, _> = f
            .map_err(|e| e.to_string())
            .and_then(|f| decode(f).map_err(|e| e.to_string()));
        assert!(matches!(
            m,
            Ok(FromChild::Status(Status {
                in_flight: 1,
                heap_used: None,
                ..
            }))
        ));
    }

    #[test]
    fn a_known_type_with_bad_fields_is_an_error() {
        let f = parse_frame(br#"{"type":"ready","code":"tx1","pid":"seven","port":1,"role":"x"}"#);
        let m: Result<FromChild, _> = f
            .map_err(|e| e.to_string())
            .and_then(|f| decode(f).map_err(|e| e.to_string()));
        assert!(m.is_err());
    }

    #[test]
    fn the_children_hello_and_the_acknowledgement_on_the_wire() {
        let v = roundtrip(FromChild::Hello {
            protocol: Some("1.1".into()),
            code: "m0".into(),
            pid: 7,
        });
        assert_eq!(
            v,
            json!({"type":"hello","protocol":"1.1","code":"m0","pid":7})
        );
        let v = roundtrip(FromChild::EventsReceived { up_to: 12 });
        assert_eq!(v, json!({"type":"eventsReceived","upTo":12}));
        // A bare hello (anything more is optional) still says the child speaks the protocol.
        let f = parse_frame(br#"{"type":"hello"}"#);
        let m: Result<FromChild, _> = f
            .map_err(|e| e.to_string())
            .and_then(|f| decode(f).map_err(|e| e.to_string()));
        assert!(matches!(m, Ok(FromChild::Hello { .. })), "{m:?}");
    }

    #[test]
    fn masters_from_1_1_on_acknowledge_events() {
        assert!(acknowledges_events("1.1"));
        assert!(acknowledges_events("1.12"));
        assert!(!acknowledges_events("1.0"));
        assert!(!acknowledges_events("2.3"));
        assert!(!acknowledges_events("1"));
        assert!(!acknowledges_events("x.y"));
    }

    #[test]
    fn major_version_check() {
        assert!(same_major("1.0"));
        assert!(same_major("1.7"));
        assert!(!same_major("2.0"));
        assert!(!same_major(""));
    }
}
