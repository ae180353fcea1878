use std::time::{Duration, Instant};

use super::child::{read_inputs, write_inputs};
use super::*;
use crate::ipc::message::RequestCounts;
use crate::process::ProcessId;
use crate::supervisor::lifecycle::Lifecycle;
use crate::supervisor::RecycleState;
use crate::tree::guardian::GuardianState;

fn lifecycle_state() -> LifecycleState {
    let now = Instant::now();
    let mut l = Lifecycle::new(2, 3, Duration::from_secs(30));
    l.start(now);
    while l.poll_action().is_some() {}
    l.ready(ProcessId::MASTER, now);
    while l.poll_action().is_some() {}
    l.capture(now).expect("capture")
}

/// A deterministic state with something in every part (the writer's golden file is its encoding).
pub(super) fn handover() -> Handover {
    let counts = RequestCounts {
        seq: 7,
        total: 12,
        ..RequestCounts::default()
    };
    Handover {
        format: FORMAT,
        captured_monotonic_ms: 123_456,
        lifecycle: lifecycle_state(),
        children: vec![ChildState {
            id: 1,
            pid: 4242,
            generation: 9,
            channel_fd: 17,
            stdout_fd: Some(18),
            stderr_fd: None,
            // Half a message, and a UTF-8 character cut in two.
            unread: b"{\"type\":\"ready\",\"co".to_vec(),
            stdout_partial: vec![0xc3],
            stderr_partial: b"warn: no newline yet".to_vec(),
            queued: vec![ToChild::Events { events: vec![] }],
            spoke: true,
            inputs: Some(write_inputs(0x0123_4567_89ab_cdef)),
            port: None,
        }],
        shell: ShellState {
            generation: 9,
            master_acks: true,
            master_stalled: false,
            flushing: false,
            recycle: RecycleState {
                over_for_ms: vec![(1, 12_000)],
                warned: vec![1],
                rss_at_ready: vec![None, Some(40 << 20)],
            },
        },
        mailbox: vec![ToChild::WorkerCounts {
            code: "w1".into(),
            counts,
        }],
        keeper: serde_json::from_value(serde_json::json!({
            "rows": [{"code": "m0", "lastRestart": "exit code 1", "guardLimit": null,
                      "recycles": 2, "recycleReason": null}],
            "history": {
                "append": false,
                "sampleIntervalMs": 60_000,
                "sharedCache": false,
                "processes": [{"code": "m0", "role": "master", "state": "live", "points": [
                    {"kind": "sample", "at": 1_700_000_000_000_u64, "requests": 12,
                     "clientCaches": 1, "clientConcepts": null, "refusals": 0,
                     "heapUsed": 1_000_000, "turnaroundMs": 4.5, "rssAnon": 40_000_000_u64,
                     "inFlight": 2},
                    {"kind": "gap", "at": 1_700_000_060_000_u64},
                ]}],
                "memoryTotal": [{"at": 1_700_000_000_000_u64, "bytes": 80_000_000_u64}],
                "totals": [],
            },
            "startedMsAgo": 60_000,
        }))
        .expect("keeper state"),
        client_fd: 5,
        admin_fd: Some(6),
        control_fd: Some(7),
        control_file: Some((64_769, 1_234_567)),
        agent_fd: Some(9),
        mark: "123.456".into(),
        guardian: Some(GuardianState {
            pid: 99,
            fd: 7,
            groups: vec![4242],
            respawns: 0,
        }),
        cooldowns: vec![CooldownState {
            id: 1,
            left_ms: 1_500,
        }],
        reload_pending: true,
        counters: [(
            "fhircluster_requests_total{route=\"tx\",status=\"2xx\"}".to_string(),
            7.0,
        )]
        .into_iter()
        .collect(),
        last_reload: Some((false, 5_000)),
        client_conns: vec![ClientConnState {
            fd: 21,
            // A head begun as the drain came.
            unread: b"POST /r4/Patient HTTP/1.1\r\nHo".to_vec(),
            idle_ms: 1_250,
        }],
        prebound: vec![22, 23],
    }
}

#[test]
fn only_a_binary_that_names_client_conns_is_handed_them() {
    // #25: a binary from before them prints the numbers only; one after, the word too, which
    // an older reader skips.
    assert!(takes_client_conns(&formats_line()));
    assert!(reads(&formats_line(), FORMAT));
    assert!(!takes_client_conns("1"));
    assert!(!takes_client_conns("1 clientConnsX 2"));
}

#[test]
fn only_a_binary_that_names_listeners_is_handed_the_ones_bound_for_it() {
    // spec: DEC-70 — an older binary would leave them open and fail to bind the same address.
    assert!(takes_listeners(&formats_line()));
    assert!(!takes_listeners("1 clientConns"));
    assert!(!takes_listeners("1 listenersX"));
}

#[test]
fn a_state_from_a_program_that_hands_over_no_client_connections_reads_as_none() {
    // #25: the client connections are a field of format 1 an older program does not write.
    let mut json = serde_json::to_value(handover()).expect("json");
    json.as_object_mut().expect("object").remove("clientConns");
    let h = decode(&serde_json::to_vec(&json).expect("bytes")).expect("decode");
    assert!(h.client_conns.is_empty());
    let written = serde_json::to_value(handover()).expect("json");
    assert_eq!(written["clientConns"][0]["fd"], 21);
    assert_eq!(
        written["clientConns"][0]["unread"],
        "504f5354202f72342f50617469656e7420485454502f312e310d0a486f"
    );
}

#[test]
fn a_state_from_a_program_that_defers_no_sighup_reads_as_none_pending() {
    // #25: the deferred SIGHUP is a field of format 1 an older program does not write.
    let mut json = serde_json::to_value(handover()).expect("json");
    json.as_object_mut()
        .expect("object")
        .remove("reloadPending");
    let bytes = serde_json::to_vec(&json).expect("bytes");
    let h = decode(&bytes).expect("decode");
    assert!(!h.reload_pending);
    assert_eq!(h.cooldowns, handover().cooldowns);
}

#[test]
fn a_childs_inputs_are_a_compatible_field_of_format_1() {
    // An older program writes no `inputs`: read as not known (the new program takes its own,
    // restarting nothing); an older reader skips the field it doesn't know.
    let written = serde_json::to_value(handover()).expect("json");
    assert_eq!(written["children"][0]["inputs"], "0123456789abcdef");
    assert_eq!(read_inputs("0123456789abcdef"), Some(0x0123_4567_89ab_cdef));
    assert_eq!(read_inputs("123"), None);
    assert_eq!(read_inputs("zz23456789abcdef"), None);
    let mut json = written;
    json["children"][0]
        .as_object_mut()
        .expect("object")
        .remove("inputs");
    let h = decode(&serde_json::to_vec(&json).expect("bytes")).expect("decode");
    assert_eq!(h.children[0].inputs, None);
}

#[test]
fn a_handover_reads_back_as_it_was_written() {
    let h = handover();
    let bytes = encode(&h);
    let back = decode(&bytes).expect("decode");
    assert_eq!(back, h);
    // Byte for byte the same again: nothing is lost or reordered on the way.
    assert_eq!(encode(&back), bytes);
}

#[test]
fn the_format_number_is_in_the_json_and_bytes_are_hex() {
    let v: serde_json::Value = serde_json::from_slice(&encode(&handover())).expect("json");
    assert_eq!(v["format"], FORMAT);
    assert_eq!(v["children"][0]["stdoutPartial"], "c3");
}

#[test]
fn a_format_this_program_does_not_read_is_refused_with_both_numbers() {
    let mut v: serde_json::Value = serde_json::from_slice(&encode(&handover())).expect("json");
    v["format"] = serde_json::json!(99);
    let err = decode(&serde_json::to_vec(&v).expect("bytes")).expect_err("format 99");
    assert!(matches!(err, StateError::UnknownFormat(99)));
    let msg = err.to_string();
    assert!(
        msg.contains("format 99") && msg.contains("reads 1"),
        "{msg}"
    );
}

#[test]
fn a_state_without_a_format_or_not_json_is_refused() {
    assert!(matches!(decode(b"{}"), Err(StateError::NoFormat)));
    assert!(matches!(
        decode(b"not json"),
        Err(StateError::Unreadable(_))
    ));
    assert!(matches!(
        decode(br#"{"format":1}"#),
        Err(StateError::Unreadable(_))
    ));
}

#[test]
fn bad_hex_is_refused_not_guessed() {
    let mut v: serde_json::Value = serde_json::from_slice(&encode(&handover())).expect("json");
    v["children"][0]["unread"] = serde_json::json!("abc");
    assert!(matches!(
        decode(&serde_json::to_vec(&v).expect("bytes")),
        Err(StateError::Unreadable(_))
    ));
}

#[test]
fn a_new_binary_reads_a_format_when_its_list_names_it() {
    assert!(reads(&formats_line(), FORMAT));
    assert!(reads("1 2\n", 2));
    assert!(!reads("2 3", 1));
    assert!(!reads("", 1));
    assert!(!reads("11", 1));
}

#[test]
fn the_capture_instant_is_as_long_ago_as_the_monotonic_clock_says() {
    let now = Instant::now() + Duration::from_secs(10);
    assert_eq!(
        capture_instant(1_000, 1_250, now),
        now - Duration::from_millis(250)
    );
    // A clock reading that went backwards (it cannot, but data may say so) is "now".
    assert_eq!(capture_instant(2_000, 1_000, now), now);
}
