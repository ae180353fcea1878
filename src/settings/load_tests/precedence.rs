//! Precedence: flag, then environment, then config.json, then the default (DEC-13).

use std::path::PathBuf;

use serde_json::json;

use super::*;

#[test]
fn nothing_given_is_the_defaults() {
    for file in [None, Some(json!({}))] {
        let s = ok(&[], &[], file);
        // No tx endpoint is not an error, but workers that get nothing are said (ROUTE-2b:
        // proxy/route_tests.rs).
        assert_eq!(s.warnings.len(), 1, "{:?}", s.warnings);
        assert!(s.warnings[0].starts_with("modules.tx.endpoints is not set"));
        assert_eq!(
            Settings {
                warnings: Vec::new(),
                servers_config: 0,
                ..s
            },
            Settings::default()
        );
    }
}

#[test]
fn port_precedence_is_flag_env_file_default() {
    // spec: DEC-13, CONF-2
    let file = Some(json!({"server": {"port": 4000}}));
    let env = [("PORT", "5000")];
    assert_eq!(ok(&["--port", "6000"], &env, file.clone()).port, 6000);
    assert_eq!(ok(&[], &env, file.clone()).port, 5000);
    assert_eq!(ok(&[], &[], file).port, 4000);
    assert_eq!(ok(&[], &[], None).port, 3000);
    // An empty variable counts as unset.
    assert_eq!(ok(&[], &[("PORT", "")], None).port, 3000);
}

#[test]
fn workers_precedence_is_flag_env_file_default() {
    // spec: DEC-13, CONF-3
    let file = cluster(json!({"workers": 2}));
    let env = [("FHIRSMITH_WORKERS", "3")];
    assert_eq!(
        ok(&["--workers=0"], &env, file.clone()).cluster.workers,
        Some(0)
    );
    assert_eq!(ok(&[], &env, file.clone()).cluster.workers, Some(3));
    assert_eq!(ok(&[], &[], file).cluster.workers, Some(2));
    assert_eq!(ok(&[], &[], None).cluster.workers, None);
}

#[test]
fn master_serves_tx_precedence_is_flag_file_default() {
    // spec: DEC-13, CONF-7
    let file = cluster(json!({"masterServesTx": true}));
    assert!(
        !ok(&["--master-serves-tx=false"], &[], file.clone())
            .cluster
            .master_serves_tx
    );
    assert!(
        ok(
            &["--master-serves-tx=true"],
            &[],
            cluster(json!({"masterServesTx": false}))
        )
        .cluster
        .master_serves_tx
    );
    assert!(
        !ok(&[], &[], cluster(json!({"masterServesTx": false})))
            .cluster
            .master_serves_tx
    );
    assert!(ok(&[], &[], None).cluster.master_serves_tx);
    refused(
        settings(&["--master-serves-tx=no"], &[], None),
        "server.cluster.masterServesTx",
        "true or false",
    );
}

#[test]
fn internal_port_precedence_and_its_default_follows_the_resolved_port() {
    // spec: DEC-13, CONF-8
    let file = Some(json!({"server": {"port": 4000, "cluster": {"internalPort": 5001}}}));
    assert_eq!(
        ok(&["--internal-port", "6001"], &[], file.clone())
            .cluster
            .internal_port,
        6001
    );
    assert_eq!(ok(&[], &[], file).cluster.internal_port, 5001);
    assert_eq!(ok(&[], &[], None).cluster.internal_port, 3001);
    // port + 1, after the port's own precedence.
    let file = Some(json!({"server": {"port": 4000}}));
    assert_eq!(
        ok(&[], &[("PORT", "7000")], file.clone())
            .cluster
            .internal_port,
        7001
    );
    assert_eq!(ok(&[], &[], file).cluster.internal_port, 4001);
    refused(
        settings(&["--port=65535"], &[], None),
        "server.cluster.internalPort",
        "server.port + 1",
    );
    assert_eq!(
        ok(&["--port=65535", "--internal-port=1000"], &[], None)
            .cluster
            .internal_port,
        1000
    );
}

#[test]
fn data_dir_precedence_is_flag_env_current_directory() {
    // spec: DEC-13, LAUNCH-1
    let env = [("FHIRSMITH_DATA_DIR", "/from/env")];
    assert_eq!(
        ok(&["--data-dir", "/from/flag"], &env, None).data_dir,
        PathBuf::from("/from/flag")
    );
    assert_eq!(ok(&[], &env, None).data_dir, PathBuf::from("/from/env"));
    assert_eq!(ok(&[], &[], None).data_dir, PathBuf::from("."));
    assert_eq!(
        data_dir(&cli(&[]), &env_of(&env)).1,
        Some(Source::Env("FHIRSMITH_DATA_DIR"))
    );
    assert_eq!(data_dir(&cli(&[]), &env_of(&[])).1, None);
}

#[test]
fn bad_flag_and_env_values_are_errors_naming_the_setting_and_layer() {
    // spec: CONF-5
    refused(
        settings(&["--workers=two"], &[], None),
        "server.cluster.workers",
        "(from --workers)",
    );
    refused(
        settings(&["--workers=4.5"], &[], None),
        "server.cluster.workers",
        "whole number",
    );
    refused(
        settings(&["--workers", "-1"], &[], None),
        "server.cluster.workers",
        "whole number",
    );
    refused(
        settings(&[], &[("FHIRSMITH_WORKERS", "x")], None),
        "server.cluster.workers",
        "FHIRSMITH_WORKERS",
    );
    refused(
        settings(&[], &[("PORT", "x")], None),
        "server.port",
        "(from environment PORT)",
    );
    refused(
        settings(&["--port=0"], &[], None),
        "server.port",
        "from 1 to 65535",
    );
    refused(
        settings(&["--internal-port=70000"], &[], None),
        "server.cluster.internalPort",
        "from 1 to 65535",
    );
    refused(
        settings(&["--port="], &[], None),
        "server.port",
        "from 1 to 65535",
    );
}

#[test]
fn workers_in_the_file_must_be_whole_and_not_negative() {
    // spec: CONF-5, DEC-7
    for bad in [json!(4.5), json!(-1), json!("x"), json!("4"), json!(true)] {
        refused(
            settings(&[], &[], cluster(json!({"workers": bad}))),
            "server.cluster.workers",
            FILE,
        );
    }
    assert_eq!(
        ok(&[], &[], cluster(json!({"workers": 4.0})))
            .cluster
            .workers,
        Some(4)
    );
}

#[test]
fn each_setting_names_the_layer_that_gave_it() {
    // spec: DEC-13. Issue 14: a --workers flag was reported as set by server.cluster.workers.
    use crate::sizing::{decision_line, size_for, CpuInputs};
    let file = cluster(json!({"workers": 1}));
    let inputs = CpuInputs {
        vcpu: 8,
        detected_cores: Some(4),
        quota: None,
    };
    let line_for = |s: &Settings| decision_line(&size_for(s, &inputs).expect("a known rule"), None);
    let flag = ok(
        &["--workers=2"],
        &[("FHIRSMITH_WORKERS", "3")],
        file.clone(),
    );
    assert_eq!(
        flag.sources.of("server.cluster.workers"),
        Source::Flag("--workers")
    );
    assert!(
        line_for(&flag).starts_with("workers 2: set by --workers;"),
        "{}",
        line_for(&flag)
    );

    let env = ok(&[], &[("FHIRSMITH_WORKERS", "3")], file.clone());
    assert_eq!(
        env.sources.of("server.cluster.workers"),
        Source::Env("FHIRSMITH_WORKERS")
    );
    assert!(line_for(&env).starts_with("workers 3: set by environment FHIRSMITH_WORKERS;"));

    let from_file = ok(&[], &[], file);
    assert!(
        line_for(&from_file).starts_with(&format!(
            "workers 1: set by server.cluster.workers in {FILE};"
        )),
        "{}",
        line_for(&from_file)
    );
    let sized = ok(&[], &[], None);
    assert_eq!(sized.sources.of("server.cluster.workers"), Source::Default);
    assert!(
        line_for(&sized).starts_with("workers 4: "),
        "{}",
        line_for(&sized)
    );
}

#[test]
fn errors_between_settings_name_where_each_came_from() {
    // spec: DEC-12, DEC-13
    refused(
        settings(
            &["--workers=3", "--port=3003"],
            &[],
            cluster(json!({"internalPort": 3001})),
        ),
        "server.cluster.internalPort",
        &format!(
            "= 3001 (from {FILE}): the processes' ports 3001-3004 (the master and 3 workers, \
             from --workers) must not include server.port 3003 (from --port)"
        ),
    );
    refused(
        settings(
            &[],
            &[("PORT", "4000"), ("FHIRSMITH_WORKERS", "2")],
            cluster(json!({"internalPort": 3999})),
        ),
        "server.cluster.internalPort",
        "(the master and 2 workers, from environment FHIRSMITH_WORKERS) must not include \
         server.port 4000 (from environment PORT)",
    );
    refused(
        settings(&["--port=65535"], &[], None),
        "server.cluster.internalPort",
        "its default, server.port + 1",
    );
    let w = ok(&["--workers=0", "--master-serves-tx=false"], &[], None).warnings;
    assert!(
        w.iter().any(|l| l.contains(
            "server.cluster.masterServesTx false (from --master-serves-tx) and \
             server.cluster.workers 0 (from --workers)"
        )),
        "{w:?}"
    );
}
