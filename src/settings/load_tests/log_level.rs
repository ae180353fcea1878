//! `server.cluster.logLevel`: flag, then `RUST_LOG` (the environment layer, a whole filter), then
//! config.json, then `info`.

use serde_json::json;

use super::*;

#[test]
fn log_level_precedence_is_flag_rust_log_file_default() {
    let file = cluster(json!({"logLevel": "warn"}));
    let env = [("RUST_LOG", "info,fhircluster::proxy=debug")];
    assert_eq!(
        ok(&["--log-level", "error"], &env, file.clone())
            .cluster
            .log_level,
        LogLevel::Error
    );
    assert_eq!(
        ok(&[], &env, file.clone()).cluster.log_level,
        LogLevel::Filter("info,fhircluster::proxy=debug".into())
    );
    assert_eq!(ok(&[], &[], file).cluster.log_level, LogLevel::Warn);
    assert_eq!(
        ok(&[], &[("RUST_LOG", "")], None).cluster.log_level,
        LogLevel::Info
    );
    assert_eq!(
        ok(&[], &[], cluster(json!({"logLevel": "debug"})))
            .cluster
            .log_level
            .filter(),
        "debug"
    );
}

#[test]
fn a_bad_log_level_is_refused_naming_the_setting() {
    refused(
        settings(&["--log-level", "verbose"], &[], None),
        "server.cluster.logLevel",
        "\"error\", \"warn\", \"info\" or \"debug\"",
    );
    refused(
        settings(&[], &[], cluster(json!({"logLevel": "trace"}))),
        "server.cluster.logLevel",
        "\"error\", \"warn\", \"info\" or \"debug\"",
    );
    refused(
        settings(&[], &[], cluster(json!({"logLevel": 3}))),
        "server.cluster.logLevel",
        "",
    );
    refused(
        settings(&[], &[("RUST_LOG", "info,[")], None),
        "server.cluster.logLevel",
        "RUST_LOG",
    );
}
