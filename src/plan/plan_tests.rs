//! The plan's unit tests.

use super::test_support::{settings, sizing};
use super::*;

fn env<'a>(p: &'a ProcessSpec, key: &str) -> Option<&'a str> {
    p.env
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[test]
fn master_and_workers_with_node() {
    // spec: ROLE-1..ROLE-8, ROLE-6, DEC-19
    let mut s = settings();
    s.node_flags = strings(&["--max-old-space-size=8192"]);
    let plan = plan(&s, &sizing(&s, 4, 4), None).unwrap();
    assert_eq!(plan.workers(), 2);
    let master = &plan.processes[0];
    assert_eq!(
        (master.id, master.role, master.code.as_str(), master.port),
        (ProcessId(0), Role::Master, "m0", 3001)
    );
    assert_eq!(
        master.argv,
        strings(&[
            "node",
            "--max-old-space-size=8192",
            "--expose-gc",
            "server.js",
            "--role=master",
            "--instance-code=m0",
            "--port=3001"
        ])
    );
    assert_eq!(
        master.env,
        vec![
            ("FHIRSMITH_ROLE".to_string(), "master".to_string()),
            ("FHIRSMITH_INSTANCE_CODE".to_string(), "m0".to_string()),
            ("PORT".to_string(), "3001".to_string()),
            ("HOST".to_string(), "127.0.0.1".to_string()),
            (
                "FHIRSMITH_DATA_DIR".to_string(),
                "/var/lib/fhirsmith".to_string()
            ),
            ("NODE_CHANNEL_FD".to_string(), "3".to_string()),
            (
                "NODE_CHANNEL_SERIALIZATION_MODE".to_string(),
                "json".to_string()
            ),
        ]
    );
    assert!(master.serves_tx);
    let tx2 = &plan.processes[2];
    assert_eq!(
        (tx2.id, tx2.role, tx2.code.as_str(), tx2.port),
        (ProcessId(2), Role::TxWorker, "tx2", 3003)
    );
    assert_eq!(
        tx2.argv[4..],
        strings(&["--role=tx-worker", "--instance-code=tx2", "--port=3003"])[..]
    );
    assert_eq!(env(tx2, "FHIRSMITH_ROLE"), Some("tx-worker"));
    assert_eq!(env(tx2, "PORT"), Some("3003"));
    assert_eq!(env(tx2, NODE_FLAGS_ENV), None);
    assert!(tx2.serves_tx);
    assert_eq!(tx2.connect_addr, "127.0.0.1:3003".parse().unwrap());
}

#[test]
fn the_configured_instance_code_and_master_serves_tx() {
    // spec: ROLE-2
    let mut s = settings();
    s.tx.instance_code = "main".to_string();
    s.cluster.master_serves_tx = false;
    let plan = replan(&s, 1, String::new()).unwrap();
    assert_eq!(plan.processes[0].code, "main");
    assert!(!plan.processes[0].serves_tx);
    assert_eq!(
        plan.processes[1].code, "tx1",
        "workers never take the config's code"
    );
}

#[test]
fn a_non_node_program_gets_the_flags_in_the_environment() {
    // spec: DEC-19
    let mut s = settings();
    s.command = strings(&["/opt/bin/fhirsmith-sim", "--fast"]);
    s.node_flags = strings(&["--max-old-space-size=4096"]);
    let plan = replan(&s, 1, String::new()).unwrap();
    let w = &plan.processes[1];
    assert_eq!(
        w.argv,
        strings(&[
            "/opt/bin/fhirsmith-sim",
            "--fast",
            "--role=tx-worker",
            "--instance-code=tx1",
            "--port=3002"
        ])
    );
    assert_eq!(
        env(w, NODE_FLAGS_ENV),
        Some("--max-old-space-size=4096 --expose-gc")
    );
}

#[test]
fn expose_gc_is_not_duplicated() {
    // spec: ROLE-6
    let mut s = settings();
    s.node_flags = strings(&["--expose-gc"]);
    let plan = replan(&s, 0, String::new()).unwrap();
    let count = |argv: &[String]| argv.iter().filter(|a| *a == "--expose-gc").count();
    assert_eq!(count(&plan.processes[0].argv), 1);
    s.node_flags.clear();
    s.command = strings(&["/usr/bin/node", "--expose-gc", "server.js"]);
    let plan = replan(&s, 0, String::new()).unwrap();
    assert_eq!(count(&plan.processes[0].argv), 1);
    assert_eq!(
        plan.processes[0].argv[..3],
        strings(&["/usr/bin/node", "--expose-gc", "server.js"])[..]
    );
}

#[test]
fn debugger_and_watcher_flags_are_not_passed_on() {
    // spec: LAUNCH-12, LAUNCH-13, LAUNCH-14
    let mut s = settings();
    s.node_flags = strings(&[
        "--inspect=9229",
        "--max-old-space-size=1024",
        "--watch",
        "--inspect-port",
        "9230",
        "--trace-warnings",
    ]);
    let plan = replan(&s, 0, String::new()).unwrap();
    assert_eq!(
        plan.processes[0].argv[..4],
        strings(&[
            "node",
            "--max-old-space-size=1024",
            "--trace-warnings",
            "--expose-gc"
        ])[..]
    );
    assert_eq!(
        plan.dropped_node_flags,
        strings(&["--inspect=9229", "--watch", "--inspect-port", "9230"])
    );
}

#[test]
fn bind_any_is_reached_over_loopback() {
    // spec: ROLE-9
    let mut s = settings();
    s.cluster.bind_address = "0.0.0.0".to_string();
    let plan = replan(&s, 1, String::new()).unwrap();
    assert_eq!(plan.processes[1].bind_address, "0.0.0.0");
    assert_eq!(
        plan.processes[1].connect_addr,
        "127.0.0.1:3002".parse().unwrap()
    );
    s.cluster.bind_address = "::".to_string();
    let plan = replan(&s, 1, String::new()).unwrap();
    assert_eq!(
        plan.processes[0].connect_addr,
        "[::1]:3001".parse().unwrap()
    );
    s.cluster.bind_address = "10.0.0.5".to_string();
    let plan = replan(&s, 0, String::new()).unwrap();
    assert_eq!(
        plan.processes[0].connect_addr,
        "10.0.0.5:3001".parse().unwrap()
    );
    // spec: DEC-40. A name: reached at every address it resolves to, the first first.
    s.cluster.bind_address = "localhost".to_string();
    let plan = replan(&s, 0, String::new()).unwrap();
    let p = &plan.processes[0];
    assert!(p.connect_addr.ip().is_loopback() && p.connect_addr.port() == 3001);
    assert!(p
        .also_at
        .iter()
        .all(|ip| ip.is_loopback() && *ip != p.connect_addr.ip()));
    assert_eq!(
        p.bind_address, "localhost",
        "the processes are told the name"
    );
    s.cluster.bind_address = "no-such-host.invalid".to_string();
    assert!(matches!(
        replan(&s, 0, String::new()),
        Err(PlanError::BindAddress(name, _)) if name == "no-such-host.invalid"
    ));
}

#[test]
fn the_port_range_must_leave_the_port_free_and_fit() {
    // spec: DEC-21
    let mut s = settings();
    s.port = 3005;
    let err = replan(&s, 4, String::new()).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("server.cluster.internalPort = 3001 (the default)"),
        "{err}"
    );
    assert!(
        err.to_string().contains("server.port 3005 (the default)"),
        "{err}"
    );
    assert!(replan(&s, 3, String::new()).is_ok());
    s.cluster.internal_port = 65_534;
    let err = replan(&s, 2, String::new()).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("server.cluster.internalPort = 65534"),
        "{err}"
    );
    assert!(err.to_string().contains("65535 at most"), "{err}");
    assert!(replan(&s, 1, String::new()).is_ok());
}

#[test]
fn the_start_plan_checks_the_cpu_count_before_memory_lowers_it() {
    // spec: DEC-21 — 16/8 gives 8 workers (3001..3009), which includes port 3009.
    let mut s = settings();
    s.port = 3009;
    let sz = sizing(&s, 16, 8);
    let fit = MemoryFit {
        fits: Some(2),
        workers: 2,
        warnings: Vec::new(),
    };
    let err = plan(&s, &sz, Some(&fit)).unwrap_err();
    assert!(matches!(err, PlanError::Ports(_)), "{err}");
    assert!(
        err.to_string()
            .contains("3001-3009 (the master and 8 workers)"),
        "{err}"
    );
    s.port = 3000;
    let p = plan(&s, &sz, Some(&fit)).unwrap();
    assert_eq!(p.workers(), 2);
    assert!(
        p.decision
            .starts_with("workers 2: 8 physical cores (16 vCPU, SMT 2)"),
        "{}",
        p.decision
    );
}

#[test]
fn an_empty_command_is_an_error() {
    let mut s = settings();
    s.command.clear();
    assert_eq!(replan(&s, 1, String::new()), Err(PlanError::EmptyCommand));
}

#[test]
fn a_host_prefix_goes_before_every_instance_code() {
    let mut s = Settings::default();
    s.cluster.host_prefix = "a".to_string();
    let p = replan(&s, 2, String::new()).expect("plan");
    let codes: Vec<&str> = p.processes.iter().map(|p| p.code.as_str()).collect();
    assert_eq!(codes, vec!["am0", "atx1", "atx2"]);
    assert!(p.processes[1]
        .argv
        .contains(&"--instance-code=atx1".to_string()));
}

#[test]
fn the_plan_says_which_paths_are_tx_paths_and_where_that_came_from() {
    // Issue 18: FHIRsmith has no default tx endpoints (its tx module stops at start without
    // them), so none set means none: every request is the master's, and the plan says so.
    let mut s = settings();
    assert_eq!(
        tx_endpoints_line(&s),
        "tx endpoints: none (modules.tx.endpoints is not set; FHIRsmith has no default): every request goes to the master"
    );
    s.tx.endpoints = vec!["/r4".into(), "/tx/r5".into()];
    s.sources.set(
        "modules.tx.endpoints",
        crate::settings::Source::File("/d/config.json".into()),
    );
    let p = replan(&s, 1, String::new()).unwrap();
    assert_eq!(
        p.tx_endpoints,
        "tx endpoints: /r4, /tx/r5 (modules.tx.endpoints in /d/config.json)"
    );
}

#[test]
fn node_report_adds_the_preload_where_node_flags_go() {
    // spec: DEC-19 (proposed: nodeReport's --require follows it; a wrapper also gets NODE_OPTIONS)
    let preload = "/run/user/0/fhircluster-7/node-report.js".to_string();
    let mut s = settings();
    s.node_preload = Some(preload.clone().into());
    s.command = strings(&["node", "server.js"]);
    let off = replan(&s, 1, String::new()).unwrap();
    assert!(!off.processes[1].argv.contains(&"--require".to_string()));
    assert_eq!(env(&off.processes[1], "NODE_OPTIONS"), None);

    s.cluster.node_report = true;
    let on = replan(&s, 1, String::new()).unwrap();
    for p in &on.processes {
        // After node, before the script: node's own flags.
        assert_eq!(
            p.argv[..4],
            strings(&["node", "--expose-gc", "--require", &preload])[..]
        );
        assert_eq!(p.argv[4], "server.js");
        assert_eq!(env(p, "NODE_OPTIONS"), None, "node itself gets it once");
    }

    s.command = strings(&["sh", "-c", "exec node server.js"]);
    let wrapped = replan(&s, 1, String::new()).unwrap();
    for p in &wrapped.processes {
        assert!(!p.argv.contains(&"--require".to_string()));
        let want = format!("--expose-gc --require {preload}");
        assert_eq!(env(p, NODE_FLAGS_ENV), Some(want.as_str()));
        let options = env(p, "NODE_OPTIONS").unwrap_or_default();
        assert!(
            options.ends_with(&format!("--require {preload}")),
            "{options}"
        );
    }
    assert_eq!(node_options(None, "/r/p.js"), "--require /r/p.js");
    assert_eq!(
        node_options(Some(" --max-old-space-size=100 "), "/r/p.js"),
        "--max-old-space-size=100 --require /r/p.js"
    );
}
