//! The real `fhirsmith-sim` binary answering HTTP: FHIR-ish answers, X-Served-By, echoes,
//! routing errors on a worker, cache-ids across restarts, the shared cache.

use crate::common;

use std::time::Duration;

use common::{Start, R};

#[tokio::test]
async fn answers_stamps_and_echoes() -> R<()> {
    // spec: SIM-1, SIM-9, SIM-11
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let sim = Start::new("master", "m0", dir.path())?.start().await?;
    let r = sim.get("/r4/metadata").await?;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["resourceType"], "CapabilityStatement");
    assert_eq!(r.header("x-served-by"), Some("m0"));
    let r = sim
        .post(
            "/r4/ValueSet/$expand",
            &[
                ("X-Forwarded-For", "10.1.2.3"),
                ("X-Forwarded-Proto", "https"),
            ],
            b"{\"resourceType\":\"Parameters\"}",
        )
        .await?;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["resourceType"], "ValueSet");
    assert_eq!(r.header("x-sim-forwarded-for"), Some("10.1.2.3"));
    assert_eq!(r.header("x-sim-forwarded-proto"), Some("https"));
    assert_eq!(r.header("x-sim-body-length"), Some("29"));
    assert_eq!(r.header("x-sim-content-length"), Some("29"));
    assert_eq!(r.header("x-sim-chunked"), Some("false"));
    let r = sim
        .post(
            "/r4/CodeSystem/$lookup",
            &[("Transfer-Encoding", "chunked")],
            b"5\r\nhello\r\n0\r\n\r\n",
        )
        .await?;
    assert_eq!(
        (r.header("x-sim-chunked"), r.header("x-sim-body-length")),
        (Some("true"), Some("5"))
    );
    assert_eq!(r.header("x-sim-content-length"), Some("none"));
    for (path, status) in [
        ("/r4/CodeSystem/loinc", 200),
        ("/r4/CodeSystem", 200),
        ("/r4/$closure", 200),
        ("/", 200),
        ("/health", 200),
    ] {
        assert_eq!(sim.get(path).await?.status, status, "{path}");
    }
    let info = sim.get("/sim/info").await?.json();
    assert_eq!(info["code"], "m0");
    assert_eq!(info["role"], "master");
    assert!(
        info["argv"]
            .as_array()
            .is_some_and(|a| a.iter().any(|v| v == "--role=master")),
        "{info}"
    );
    Ok(())
}

#[tokio::test]
async fn node_flags_are_accepted_and_reported() -> R<()> {
    // spec: SIM-2
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let port = common::free_port();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_fhirsmith-sim"));
    cmd.args([
        "--expose-gc",
        "--max-old-space-size=512",
        "server.js",
        "--role=tx-worker",
        "--instance-code=tx1",
    ])
    .arg(format!("--port={port}"))
    .env("FHIRSMITH_DATA_DIR", dir.path())
    .env(
        "FHIRCLUSTER_NODE_FLAGS",
        "--expose-gc --max-old-space-size=512",
    )
    .kill_on_drop(true);
    let _child = cmd.spawn().map_err(|e| e.to_string())?;
    let sim = common::Sim {
        child: _child,
        port,
        channel: None,
    };
    sim.wait_listening().await?;
    let info = sim.get("/sim/info").await?.json();
    assert_eq!(
        info["unknownFlags"],
        serde_json::json!(["--expose-gc", "--max-old-space-size=512", "server.js"])
    );
    assert_eq!(info["nodeFlags"], "--expose-gc --max-old-space-size=512");
    assert_eq!(info["role"], "tx-worker");
    Ok(())
}

#[tokio::test]
async fn a_worker_answers_master_paths_with_a_routing_error() -> R<()> {
    // spec: SIM-10
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let sim = Start::new("tx-worker", "tx1", dir.path())?.start().await?;
    for path in [
        "/r4/$closure",
        "/r4/syndication",
        "/r4/info/vsac",
        "/",
        "/packages/x",
        "/dashboard/status.json",
        "/health",
    ] {
        let r = sim.get(path).await?;
        assert_eq!(r.status, 500, "{path}");
        assert!(
            r.text().contains("routing error: tx1 is a tx-worker"),
            "{path}: {}",
            r.text()
        );
        assert_eq!(r.header("x-served-by"), Some("tx1"));
    }
    assert_eq!(sim.get("/r4/CodeSystem/$lookup?code=1").await?.status, 200);
    // With sharedClosure a worker takes $closure.
    std::fs::write(
        dir.path().join("config.json"),
        r#"{ // comments allowed
        "server": {"cluster": {"sharedClosure": true}}}"#,
    )
    .map_err(|e| e.to_string())?;
    let sim2 = Start::new("tx-worker", "tx2", dir.path())?.start().await?;
    assert_eq!(sim2.get("/r4/$closure").await?.status, 200);
    Ok(())
}

async fn issue(sim: &common::Sim) -> R<String> {
    let r = sim.post("/r4/$cache-control", &[], b"{}").await?;
    assert_eq!(r.status, 200, "{}", r.text());
    let id = r.header("x-cache-id").ok_or("no X-Cache-Id")?.to_string();
    assert_eq!(r.json()["parameter"][0]["valueString"], id.as_str());
    Ok(id)
}

async fn use_id(sim: &common::Sim, id: &str) -> R<(u16, String)> {
    let r = common::http(
        sim.port,
        "GET",
        "/r4/CodeSystem/$lookup?code=1",
        &[("X-Cache-Id", id)],
        b"",
    )
    .await?;
    Ok((r.status, r.text()))
}

#[tokio::test]
async fn cache_ids_are_prefixed_and_lost_to_a_restart() -> R<()> {
    // spec: SIM-6, SIM-7
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let start = Start::new("tx-worker", "tx1", dir.path())?;
    let port = start.port;
    let mut sim = start.start().await?;
    let id = issue(&sim).await?;
    let parts: Vec<&str> = id.split('.').collect();
    assert_eq!(parts.len(), 3, "{id}");
    assert_eq!(parts[0], "tx1");
    assert!(parts[1]
        .chars()
        .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase()));
    assert_eq!(use_id(&sim, &id).await?.0, 200);
    let (status, text) = use_id(&sim, &format!("tx1.{}.nope", parts[1])).await?;
    assert_eq!(status, 404);
    assert!(
        text.contains("cache-id-unknown") && text.contains("never issued"),
        "{text}"
    );
    let (status, text) = use_id(&sim, &format!("tx2.{}.{}", parts[1], parts[2])).await?;
    assert_eq!(status, 404);
    assert!(text.contains("another instance's"), "{text}");

    sim.sigterm()?;
    assert!(sim.wait_exit(Duration::from_secs(5)).await?.success());
    // Base-36 milliseconds: make sure the new start is later.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let sim = Start::new("tx-worker", "tx1", dir.path())?
        .port(port)
        .start()
        .await?;
    let (status, text) = use_id(&sim, &id).await?;
    assert_eq!(status, 404);
    assert!(
        text.contains("cache-id-unknown") && text.contains("lost to a server restart"),
        "{text}"
    );
    Ok(())
}

#[tokio::test]
async fn a_shared_cache_outlives_a_worker_restart_and_not_a_master_start() -> R<()> {
    // spec: SIM-8
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"server": {"cluster": {"sharedCache": true}}}"#,
    )
    .map_err(|e| e.to_string())?;
    let mut master = Start::new("master", "m0", dir.path())?.start().await?;
    let start = Start::new("tx-worker", "tx1", dir.path())?;
    let port1 = start.port;
    let mut tx1 = start.start().await?;
    let tx2 = Start::new("tx-worker", "tx2", dir.path())?.start().await?;
    let id = issue(&tx1).await?;
    assert_eq!(
        use_id(&tx2, &id).await?.0,
        200,
        "any process answers any live id"
    );
    tx1.sigterm()?;
    tx1.wait_exit(Duration::from_secs(5)).await?;
    let tx1 = Start::new("tx-worker", "tx1", dir.path())?
        .port(port1)
        .start()
        .await?;
    assert_eq!(
        use_id(&tx1, &id).await?.0,
        200,
        "kept through a worker restart"
    );
    let (status, text) = use_id(&tx2, "tx1.abc.neverissued").await?;
    assert!(status == 404 && text.contains("never issued"), "{text}");
    let mport = master.port;
    master.sigterm()?;
    master.wait_exit(Duration::from_secs(5)).await?;
    let _master = Start::new("master", "m0", dir.path())?
        .port(mport)
        .start()
        .await?;
    let (status, text) = use_id(&tx2, &id).await?;
    assert_eq!(status, 404);
    assert!(text.contains("lost to a server restart"), "{text}");
    Ok(())
}

fn rss_anon_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("RssAnon:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn large_streams_hangs_and_real_memory() -> R<()> {
    // spec: SIM-14, SIM-21
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let sim = Start::new("master", "m0", dir.path())?.start().await?;
    assert_eq!(
        sim.get("/r4/CodeSystem?_sim_large_mb=3").await?.body.len(),
        3 << 20
    );
    assert_eq!(
        sim.get("/packages/big?_sim_large_mb=2").await?.body.len(),
        2 << 20
    );
    assert_eq!(sim.get("/sim/large?mb=1").await?.body.len(), 1 << 20);
    let t0 = std::time::Instant::now();
    let r = sim.get("/sim/stream?seconds=0.3").await?;
    assert!(r.text().starts_with("tick 0\n") && t0.elapsed() >= Duration::from_millis(300));
    let hung = common::http(sim.port, "GET", "/r4/CodeSystem?_sim_hang=1", &[], b"");
    assert!(
        tokio::time::timeout(Duration::from_millis(300), hung)
            .await
            .is_err(),
        "hangs"
    );
    let pid = sim.child.id().ok_or("pid")?;
    let before = rss_anon_kb(pid);
    assert_eq!(sim.post("/sim/alloc?mb=64", &[], b"").await?.status, 200);
    let grown = rss_anon_kb(pid);
    assert!(
        grown >= before + 60 * 1024,
        "RssAnon {before} -> {grown} kB"
    );
    assert_eq!(sim.post("/sim/free", &[], b"").await?.status, 200);
    let after = rss_anon_kb(pid);
    assert!(
        after + 50 * 1024 <= grown,
        "RssAnon {grown} -> {after} kB after free"
    );
    Ok(())
}
