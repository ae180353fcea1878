//! Protocol conformance with a real Node.js child: `tests/fixtures/ipc-child.js` uses only
//! `process.send()` and `process.on('message')`, so passing here means any FHIRsmith process
//! speaks our framing with Node's own channel (NODE_CHANNEL_SERIALIZATION_MODE=json).

use std::process::Stdio;
use std::time::Duration;

use fhircluster::ipc::channel::{self, Received};
use fhircluster::ipc::message::{FromChild, RequestCounts, Status, ToChild};
use serde_json::json;

async fn next_message(ch: &mut channel::LauncherChannel) -> Result<Received<FromChild>, String> {
    tokio::time::timeout(Duration::from_secs(10), ch.recv())
        .await
        .map_err(|_| "no message from the node child within 10 s".to_string())
}

async fn next_counts(ch: &mut channel::LauncherChannel) -> Result<RequestCounts, String> {
    match next_message(ch).await? {
        Received::Message(FromChild::RequestCounts(c)) => Ok(c),
        other => Err(format!("expected requestCounts, got {other:?}")),
    }
}

#[tokio::test]
async fn a_node_child_speaks_the_protocol_both_ways_and_exits_when_the_channel_closes(
) -> Result<(), String> {
    // spec: ROLE-8, STOP-11
    let (launcher_end, child_end) = channel::socketpair().map_err(|e| e.to_string())?;
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/ipc-child.js"
    ))
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::inherit())
    .kill_on_drop(true);
    channel::prepare_child(cmd.as_std_mut(), child_end);
    let mut child = cmd.spawn().map_err(|e| format!("spawn node: {e}"))?;
    drop(cmd); // closes the launcher's copy of the child's end
    let mut ch = channel::launcher(launcher_end).map_err(|e| e.to_string())?;

    match next_message(&mut ch).await? {
        Received::Message(FromChild::Ready {
            code,
            role,
            pid,
            port,
            protocol,
            memory_limit,
        }) => {
            assert_eq!(
                (code.as_str(), role.as_str(), port),
                ("tx9", "tx-worker", 3009)
            );
            assert_eq!(Some(pid), child.id());
            assert_eq!(protocol.as_deref(), Some("1.0"));
            assert_eq!(memory_limit, None);
        }
        other => return Err(format!("expected ready, got {other:?}")),
    }
    match next_message(&mut ch).await? {
        Received::Message(FromChild::Status(Status {
            heap_used,
            refusing,
            ..
        })) => {
            assert!(heap_used.unwrap_or(0) > 0);
            assert!(!refusing);
        }
        other => return Err(format!("expected status, got {other:?}")),
    }
    assert_eq!(
        next_message(&mut ch).await?,
        Received::Unknown {
            type_name: "fromTheFuture".into(),
            first_time: true
        }
    );
    let c = next_counts(&mut ch).await?;
    assert_eq!(
        (c.seq, c.total, c.by_operation.get("$lookup")),
        (1, 3, Some(&3))
    );

    // Launcher → child: the child echoes what it read.
    ch.send(&ToChild::Hello {
        protocol: "1.0".into(),
        role: "tx-worker".into(),
        code: "tx9".into(),
        status_seconds: 15.0,
        sample_seconds: 60.0,
    })
    .await
    .map_err(|e| e.to_string())?;
    let c = next_counts(&mut ch).await?;
    assert_eq!(c.total, 15);
    assert!(
        c.by_operation.contains_key("echo:tx9:tx-worker:1.0"),
        "{c:?}"
    );

    let text = "two\nlines, \"quotes\" and é ✓";
    ch.send(&ToChild::Snapshot {
        status: json!({ "text": text }),
    })
    .await
    .map_err(|e| e.to_string())?;
    let c = next_counts(&mut ch).await?;
    assert_eq!(c.total, text.encode_utf16().count() as u64);
    assert!(
        c.by_operation.contains_key(&format!("snapshot:{text}")),
        "{c:?}"
    );

    // Closing the launcher's end makes the child exit (what a launcher killed by SIGKILL does).
    drop(ch);
    let status = tokio::time::timeout(Duration::from_secs(2), child.wait())
        .await
        .map_err(|_| "node child still running 2 s after the channel closed".to_string())?
        .map_err(|e| e.to_string())?;
    assert!(status.success(), "{status:?}");
    Ok(())
}

#[tokio::test]
async fn the_launcher_sees_closed_when_the_child_exits() -> Result<(), String> {
    // spec: ROLE-8
    let (launcher_end, child_end) = channel::socketpair().map_err(|e| e.to_string())?;
    let mut cmd = tokio::process::Command::new("node");
    cmd.args(["-e", "process.send({type:'ready',code:'m0',role:'master',pid:process.pid,port:1,memoryLimit:null}); process.disconnect()"])
        .stdin(Stdio::null())
        .kill_on_drop(true);
    channel::prepare_child(cmd.as_std_mut(), child_end);
    let mut child = cmd.spawn().map_err(|e| format!("spawn node: {e}"))?;
    drop(cmd);
    let mut ch = channel::launcher(launcher_end).map_err(|e| e.to_string())?;
    assert!(matches!(
        next_message(&mut ch).await?,
        Received::Message(FromChild::Ready { .. })
    ));
    let mut closed = false;
    for _ in 0..3 {
        if next_message(&mut ch).await? == Received::Closed {
            closed = true;
            break;
        }
    }
    assert!(closed);
    assert_eq!(
        next_message(&mut ch).await?,
        Received::Closed,
        "closed stays closed"
    );
    let _ = child.wait().await;
    Ok(())
}
