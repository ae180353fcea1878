//! Precedence: flag, then environment, then config.json, then the default (DEC-13).

use std::path::PathBuf;

use serde_json::json;

use super::*;

#[test]
fn nothing_given_is_the_defaults() {
    assert_eq!(ok(&[], &[], None), Settings::default());
    assert_eq!(ok(&[], &[], Some(json!({}))), Settings::default());
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
    // spec: DEC-13, CONF-3, CONF-6
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
