//! Every key of config.json reaches its own field of `Settings` (CONF-1, OPT-1): one file that
//! sets them all (every row of the table), each to a value of its own.

use std::time::Duration;

use serde_json::json;

use super::*;

#[test]
fn every_setting_in_the_file_reaches_its_own_field() {
    // spec: CONF-1, OPT-1. Each value differs from its default and from its neighbours', so a
    // key wired to the wrong field fails here.
    let mut json = json!({
        "server": {
            "port": 4000,
            "cluster": {
                "workers": 3, "cores": 5, "workerRule": "classic", "memoryHeadroomGB": 1.5,
                "masterServesTx": false, "internalPort": 5000, "bindAddress": "0.0.0.0",
                "drainSeconds": 11, "maxOutstanding": 12, "queueSeconds": 13,
                "ownerQueueSeconds": 14, "cooldownSeconds": 15, "upstreamTimeoutSeconds": 16,
                "writeTimeoutSeconds": 17, "maxStartFailures": 18, "recycleSeconds": 19,
                "fastLaneExtra": 20, "normalMinSlots": 3, "fastLaneMaxBytes": 2048,
                "statusSeconds": 21, "sharedCache": true, "cacheAffinity": false,
                "sharedCacheMaxMB": 512, "sharedClosure": true,
                "command": ["/usr/bin/node", "--x", "server.js"], "killSeconds": 22,
                "headerTimeoutSeconds": 25, "headerMaxKB": 64, "bufferMaxMB": 128,
                "proxyThreads": 2, "saturatedPercent": 75, "adminAddress": 9100,
                "listenAddress": "127.0.0.1", "logFormat": "json", "logLevel": "debug",
                "hostPrefix": "h", "servedByHeader": "X-Served-By"
            },
            "memory": {"rejectFraction": 0.5, "abortFraction": 0.6, "trimAllocator": false}
        },
        "modules": {"tx": {"enabled": true, "instanceCode": "main", "endpoints": [{"path": "/r5"}]}},
        "stats": {"sampleSeconds": 23, "intervalMinutes": 24}
    });
    // Beyond what one `json!` can nest.
    for (k, v) in [
        ("accessLog", json!("json")),
        ("accessLogPath", json!("access.log")),
        ("accessLogQuery", json!(true)),
        ("trustedProxies", json!(["127.0.0.1", "::ffff:10.0.0.1"])),
        ("controlSocket", json!("/run/fhircluster/ctl.sock")),
        ("controlGroup", json!("fhirsmith")),
        ("pidFile", json!("run/fhircluster.pid")),
        ("nodeReport", json!(true)),
        ("predictiveAdmission", json!(true)),
        ("hangTimeoutSeconds", json!(26)),
        ("lameDuckSeconds", json!(27)),
        ("agentAddress", json!("127.0.0.1:9101")),
    ] {
        json["server"]["cluster"][k] = v;
    }
    // The file sets every setting of the table, so a new one must be added here.
    for setting in TABLE {
        let mut at = Some(&json);
        for part in setting.path.split('.') {
            at = at.and_then(|v| v.get(part));
        }
        assert!(at.is_some(), "{} is not in this test's file", setting.path);
    }
    let s = ok(&[], &[], Some(json));
    let secs = Duration::from_secs;
    let c = &s.cluster;
    assert_eq!(s.port, 4000);
    assert_eq!(s.command, vec!["/usr/bin/node", "--x", "server.js"]);
    assert_eq!(
        (c.workers, c.cores, c.worker_rule.as_str()),
        (Some(3), Some(5), "classic")
    );
    assert_eq!((c.memory_headroom_gb, c.master_serves_tx), (1.5, false));
    assert_eq!(
        (c.internal_port, c.bind_address.as_str()),
        (5000, "0.0.0.0")
    );
    assert_eq!(
        (c.drain, c.max_outstanding, c.queue),
        (secs(11), 12, secs(13))
    );
    assert_eq!(
        (c.owner_queue, c.cooldown, c.upstream_timeout),
        (secs(14), secs(15), secs(16))
    );
    assert_eq!(c.hang_timeout, secs(26));
    assert_eq!(
        (c.write_timeout, c.max_start_failures, c.recycle),
        (secs(17), 18, secs(19))
    );
    assert_eq!(
        (c.fast_lane_extra, c.normal_min_slots, c.fast_lane_max_bytes),
        (20, 3, 2048)
    );
    assert_eq!((c.status_interval, c.kill_after), (secs(21), secs(22)));
    assert_eq!(
        (c.shared_cache, c.cache_affinity, c.shared_closure),
        (true, false, true)
    );
    assert_eq!(c.shared_cache_max_mb, 512);
    assert_eq!(
        (c.header_timeout, c.header_max_kb, c.buffer_max_mb),
        (secs(25), 64, 128)
    );
    assert_eq!((c.proxy_threads, c.saturated_percent), (2, 75));
    assert!(c.predictive_admission);
    assert_eq!(
        (c.admin_address, c.listen_address),
        (
            Some(std::net::SocketAddr::from(([127, 0, 0, 1], 9100))),
            Some(std::net::IpAddr::from([127, 0, 0, 1]))
        )
    );
    assert_eq!(
        (c.log_format, &c.log_level, c.host_prefix.as_str()),
        (LogFormat::Json, &LogLevel::Debug, "h")
    );
    assert_eq!(c.served_by_header, "X-Served-By");
    assert_eq!(
        (c.lame_duck, c.agent_address),
        (
            secs(27),
            Some(std::net::SocketAddr::from(([127, 0, 0, 1], 9101)))
        )
    );
    assert_eq!(
        (c.control_socket.as_str(), c.control_group.as_str()),
        ("/run/fhircluster/ctl.sock", "fhirsmith")
    );
    assert_eq!(
        (
            c.access_log.word(),
            c.access_log_path.as_str(),
            c.access_log_query
        ),
        ("json", "access.log", true)
    );
    // An IPv4 address written as IPv6-mapped is the IPv4 peer it names.
    assert_eq!(
        c.trusted_proxies,
        ["127.0.0.1", "10.0.0.1"].map(|ip| ip.parse::<std::net::IpAddr>().expect("ip"))
    );
    assert_eq!(
        (c.pid_file.as_str(), c.node_report),
        ("run/fhircluster.pid", true)
    );
    assert_eq!(
        (s.memory.reject_fraction, s.memory.abort_fraction),
        (0.5, 0.6)
    );
    assert!(!s.memory.trim_allocator);
    assert_eq!((s.tx.enabled, s.tx.instance_code.as_str()), (true, "main"));
    assert_eq!(s.tx.endpoints, vec!["/r5"]);
    assert_eq!(
        (s.stats.sample, s.stats.interval_minutes),
        (Some(secs(23)), 24.0)
    );
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    let s = ok(
        &[],
        &[],
        cluster(json!({"sharedCache": true, "cacheAffinity": true})),
    );
    assert!(s.cluster.cache_affinity && !s.cluster.shared_closure);
}
