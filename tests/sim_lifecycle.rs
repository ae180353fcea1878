//! The real `fhirsmith-sim` binary's life: the one-thread cost model, SIGTERM, the IPC channel
//! (ready, status, samples, counts, what the master is sent, exit when it closes), refusing, and
//! the start/exit knobs.

use crate::common;

use std::time::{Duration, Instant};

use common::{Start, R};
use fhircluster::ipc::message::{FromChild, RequestCounts, Status, ToChild, PROTOCOL_VERSION};
use serde_json::json;

#[tokio::test]
async fn operations_take_turns_on_one_thread() -> R<()> {
    // spec: SIM-12
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let sim = Start::new("tx-worker", "tx1", dir.path())?.start().await?;
    let port = sim.port;
    let t0 = Instant::now();
    let expand = |n: u8| async move {
        common::http(
            port,
            "GET",
            &format!("/r4/ValueSet/$expand?n={n}"),
            &[],
            b"",
        )
        .await?;
        Ok::<Duration, String>(t0.elapsed())
    };
    let lookup = async {
        tokio::time::sleep(Duration::from_millis(30)).await;
        common::http(port, "GET", "/r4/CodeSystem/$lookup", &[], b"").await?;
        Ok::<Duration, String>(t0.elapsed())
    };
    let (a, b, l) = tokio::join!(expand(1), expand(2), lookup);
    let (a, b, l) = (a?, b?, l?);
    // Alone an expand takes 200 ms; two at once share the thread, so both end near 400 ms.
    assert!(
        a.min(b) >= Duration::from_millis(300),
        "expands {a:?} {b:?}"
    );
    // The lookup waits its turns behind the expands' slices, but doesn't wait for them to end.
    assert!(l >= Duration::from_millis(40), "lookup {l:?}");
    assert!(
        l < a.min(b),
        "lookup {l:?} should end before the expands {a:?} {b:?}"
    );
    Ok(())
}

#[tokio::test]
async fn sigterm_finishes_the_request_in_progress_then_exits_0() -> R<()> {
    // spec: SIM-19
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut sim = Start::new("tx-worker", "tx1", dir.path())?
        .env("SIM_COST_EXPAND_MS", "600")
        .start()
        .await?;
    let port = sim.port;
    let req =
        tokio::spawn(
            async move { common::http(port, "GET", "/r4/ValueSet/$expand", &[], b"").await },
        );
    tokio::time::sleep(Duration::from_millis(150)).await;
    sim.sigterm()?;
    let r = req.await.map_err(|e| e.to_string())??;
    assert_eq!(r.status, 200, "the request in progress was finished");
    let status = sim.wait_exit(Duration::from_secs(5)).await?;
    assert_eq!(status.code(), Some(0));
    Ok(())
}

#[tokio::test]
async fn runs_without_a_channel_and_with_no_role() -> R<()> {
    // spec: SIM-20
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut start = Start::new("master", "m0", dir.path())?;
    start.role = None;
    start.code = None;
    let sim = start.start().await?;
    let r = sim.get("/r4/metadata").await?;
    assert_eq!((r.status, r.header("x-served-by")), (200, Some("s0")));
    let s = sim.get("/dashboard/status.json").await?.json();
    assert_eq!(s["scope"], "process");
    assert_eq!(sim.get("/sim/info").await?.json()["channel"], false);
    Ok(())
}

#[tokio::test]
async fn a_worker_reports_on_its_channel_and_sends_its_last_counts_on_sigterm() -> R<()> {
    // spec: SIM-3, SIM-15, SIM-16, SIM-17, STATUS-1, COUNT-2
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let start = Start::new("tx-worker", "tx1", dir.path())?
        .env("SIM_START_DELAY_MS", "200")
        .env("SIM_MEMORY_LIMIT_MB", "100")
        .env("SIM_COUNTS_SECONDS", "0.3")
        .channel();
    let port = start.port;
    let t0 = Instant::now();
    let mut sim = start.spawn()?;
    // Protocol 1.1: its hello comes first, before the start delay and before it listens.
    match sim.recv().await? {
        FromChild::Hello {
            protocol,
            code,
            pid,
        } => {
            assert_eq!(protocol.as_deref(), Some(PROTOCOL_VERSION));
            assert_eq!((code.as_str(), Some(pid)), ("tx1", sim.child.id()));
            assert!(
                t0.elapsed() < Duration::from_millis(200),
                "before the delay"
            );
        }
        other => return Err(format!("expected hello, got {other:?}")),
    }
    match sim.recv().await? {
        FromChild::Ready {
            code,
            role,
            pid,
            port: p,
            protocol,
            memory_limit,
        } => {
            assert!(
                t0.elapsed() >= Duration::from_millis(200),
                "ready after the start delay"
            );
            assert_eq!(
                (code.as_str(), role.as_str(), p),
                ("tx1", "tx-worker", port)
            );
            assert_eq!(Some(pid), sim.child.id());
            assert_eq!(protocol.as_deref(), Some(PROTOCOL_VERSION));
            assert_eq!(memory_limit, Some(100 * 1024 * 1024));
        }
        other => return Err(format!("expected ready, got {other:?}")),
    }
    // It listens when it says ready.
    assert_eq!(sim.get("/r4/CodeSystem/$lookup").await?.status, 200);
    let ch = sim.channel.as_mut().ok_or("channel")?;
    ch.send(&ToChild::Hello {
        protocol: "1.0".into(),
        role: "tx-worker".into(),
        code: "tx1".into(),
        status_seconds: 0.2,
        sample_seconds: 0.25,
    })
    .await
    .map_err(|e| e.to_string())?;
    let (mut status, mut sample, mut counts) = (None, None, Vec::new());
    while status.is_none() || sample.is_none() || counts.is_empty() {
        match sim.recv().await? {
            m @ FromChild::Status(_) => status = Some(m),
            FromChild::Sample(s) => sample = Some(s),
            FromChild::RequestCounts(c) => counts.push(c),
            other => return Err(format!("unexpected {other:?}")),
        }
    }
    if let Some(FromChild::Status(Status {
        requests,
        heap_used,
        refusing,
        ..
    })) = status
    {
        assert_eq!(requests, 1);
        assert!(heap_used.unwrap_or(0) > 0);
        assert!(!refusing);
    }
    let total: u64 = counts.iter().map(|c| c.total).sum();
    assert!(total <= 1);
    assert_eq!(sim.get("/r4/ValueSet/$expand").await?.status, 200);
    sim.sigterm()?;
    let mut last: Option<RequestCounts> = None;
    let mut all = counts;
    while last.is_none() {
        if let FromChild::RequestCounts(c) = sim.recv().await? {
            if c.last {
                last = Some(c.clone());
            }
            all.push(c);
        }
    }
    // Every request counted exactly once over all the sends.
    assert_eq!(all.iter().map(|c| c.total).sum::<u64>(), 2, "{all:?}");
    let seqs: Vec<u64> = all.iter().map(|c| c.seq).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    assert_eq!(sim.wait_exit(Duration::from_secs(5)).await?.code(), Some(0));
    Ok(())
}

#[tokio::test]
async fn the_master_keeps_what_the_launcher_sends() -> R<()> {
    // spec: SIM-18, COUNT-1, EVENT-17 (acknowledged, protocol 1.1)
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut sim = Start::new("master", "m0", dir.path())?
        .channel()
        .start()
        .await?;
    let before = sim.get("/dashboard/status.json").await?.json();
    assert_eq!(before["scope"], "process");
    let ch = sim.channel.as_mut().ok_or("channel")?;
    let counts = RequestCounts {
        seq: 1,
        total: 7,
        ..Default::default()
    };
    for m in [
        ToChild::Snapshot {
            status: json!({"scope": "cluster", "inFlight": 3}),
        },
        ToChild::WorkerCounts {
            code: "tx1".into(),
            counts: counts.clone(),
        },
        ToChild::WorkerCounts {
            code: "tx1".into(),
            counts: RequestCounts { seq: 2, ..counts },
        },
        ToChild::Events {
            events: vec![
                json!({"id": 4, "kind": "exit", "code": "tx2"}),
                json!({"id": 5, "kind": "unavailable", "code": "tx2"}),
            ],
        },
        ToChild::History {
            history: json!({"m0": [1, 2]}),
        },
    ] {
        ch.send(&m).await.map_err(|e| e.to_string())?;
    }
    let mut got = serde_json::Value::Null;
    for _ in 0..100 {
        got = sim.get("/sim/received").await?.json();
        if got["history"] != serde_json::Value::Null {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Protocol 1.1: the master acknowledges the events it took, up to the highest id.
    loop {
        match sim.recv().await? {
            FromChild::EventsReceived { up_to } => {
                assert_eq!(up_to, 5);
                break;
            }
            FromChild::Status(_) | FromChild::Sample(_) => {}
            other => return Err(format!("expected eventsReceived, got {other:?}")),
        }
    }
    assert_eq!(got["snapshots"], 1);
    assert_eq!(got["workerCounts"]["tx1"], 14);
    assert_eq!(got["events"][0]["code"], "tx2");
    assert_eq!(got["history"]["m0"][1], 2);
    let after = sim.get("/dashboard/status.json").await?.json();
    assert_eq!(after["scope"], "cluster");
    assert_eq!(after["inFlight"], 3);
    assert_eq!(after["requests"]["workers"]["tx1"], 14);
    assert!(after["requests"]["own"].as_u64().unwrap_or(0) >= 1);
    Ok(())
}

#[tokio::test]
async fn it_exits_when_the_channel_closes() -> R<()> {
    // spec: SIM-20, STOP-11
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut sim = Start::new("tx-worker", "tx1", dir.path())?
        .channel()
        .start()
        .await?;
    sim.channel = None;
    assert_eq!(sim.wait_exit(Duration::from_secs(2)).await?.code(), Some(0));
    Ok(())
}

#[tokio::test]
async fn refusing_like_the_memory_guard() -> R<()> {
    // spec: SIM-13, SIM-5
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let sim = Start::new("master", "m0", dir.path())?
        .env("SIM_REFUSE_HEALTH", "1")
        .start()
        .await?;
    assert_eq!(sim.get("/health").await?.status, 503);
    assert_eq!(sim.get("/r4/metadata").await?.status, 200);
    assert_eq!(sim.post("/sim/refuse?on=1", &[], b"").await?.status, 200);
    let r = sim.get("/r4/metadata").await?;
    assert_eq!(r.status, 503);
    assert!(r.header("retry-after").is_some());
    assert_eq!(r.json()["resourceType"], "OperationOutcome");
    assert_eq!(
        sim.get("/dashboard/status.json").await?.json()["process"]["refusing"],
        true
    );
    sim.post("/sim/refuse?on=0", &[], b"").await?;
    assert_eq!(sim.get("/r4/metadata").await?.status, 200);
    Ok(())
}

#[tokio::test]
async fn start_and_exit_knobs() -> R<()> {
    // spec: SIM-4
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut sim = Start::new("tx-worker", "tx1", dir.path())?
        .env("SIM_FAIL_AT_START_tx1", "7")
        .env("SIM_FAIL_AT_START", "0")
        .channel()
        .spawn()?;
    assert_eq!(sim.wait_exit(Duration::from_secs(5)).await?.code(), Some(7));
    let mut said = Vec::new();
    while let Ok(m) = sim.recv().await {
        said.push(m);
    }
    assert!(
        !said.iter().any(|m| matches!(m, FromChild::Ready { .. })),
        "no ready before failing: {said:?}"
    );
    let mut sim = Start::new("tx-worker", "tx2", dir.path())?
        .env("SIM_EXIT_AFTER_MS", "100")
        .env("SIM_EXIT_SIGNAL", "KILL")
        .channel()
        .start()
        .await?;
    let status = sim.wait_exit(Duration::from_secs(5)).await?;
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9));
    let mut sim = Start::new("tx-worker", "tx3", dir.path())?
        .env("SIM_EXIT_AFTER_MS", "50")
        .env("SIM_EXIT_CODE", "3")
        .start()
        .await?;
    assert_eq!(sim.wait_exit(Duration::from_secs(5)).await?.code(), Some(3));
    Ok(())
}
