//! `server.cluster.adminAddress`: its forms (a port, as README writes it, or an address and
//! port) and the ports it must leave to the front door and the processes; the control socket's
//! `controlSocket` (a path in the data directory, or `off`) and `controlGroup`.

use serde_json::{json, Value};

use super::*;

#[test]
fn admin_address_is_a_port_number_or_text() {
    // Issue 14: `"adminAddress": 9100`, as README writes it, was refused ("must be a string").
    let admin = |v: Value| {
        ok(&[], &[], cluster(json!({ "adminAddress": v })))
            .cluster
            .admin_address
    };
    let loopback = |port: u16| Some(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    assert_eq!(admin(json!(9100)), loopback(9100));
    assert_eq!(admin(json!(9100.0)), loopback(9100));
    assert_eq!(admin(json!("9100")), loopback(9100));
    assert_eq!(
        admin(json!("0.0.0.0:9100")),
        Some(std::net::SocketAddr::from(([0, 0, 0, 0], 9100)))
    );
    for bad in [
        json!(0),
        json!(65536),
        json!(9100.5),
        json!(-1),
        json!(true),
        json!("x:1"),
    ] {
        refused(
            settings(&[], &[], cluster(json!({ "adminAddress": bad }))),
            "server.cluster.adminAddress",
            "port",
        );
    }
}

#[test]
fn admin_address_must_not_take_the_client_port_or_a_process_port() {
    // Issue 20 item 7: refused naming both settings, from whichever layer gave them.
    refused(
        settings(&["--admin-address=3000"], &[], None),
        "server.cluster.adminAddress",
        "= 127.0.0.1:3000 (from --admin-address): must not use the port clients use, \
         server.port 3000 (the default)",
    );
    refused(
        settings(
            &["--workers=2"],
            &[],
            cluster(json!({"adminAddress": "0.0.0.0:3003"})),
        ),
        "server.cluster.adminAddress",
        "must not use one of the processes' ports 3001-3003 (the master and 2 workers, from \
         --workers), from server.cluster.internalPort 3001 (the default)",
    );
    // Next to them is fine, and so is a master alone below it.
    assert!(ok(&["--workers=2", "--admin-address=3004"], &[], None)
        .cluster
        .admin_address
        .is_some());
    assert!(ok(&["--workers=0", "--admin-address=3002"], &[], None)
        .cluster
        .admin_address
        .is_some());
}

#[test]
fn the_agent_address_takes_no_port_the_clients_processes_or_admin_endpoints_use() {
    // spec: DEC-89
    refused(
        settings(&[], &[], cluster(json!({"agentAddress": 3000}))),
        "server.cluster.agentAddress",
        "must not use the port clients use",
    );
    refused(
        settings(
            &["--workers=2"],
            &[],
            cluster(json!({"agentAddress": 3002})),
        ),
        "server.cluster.agentAddress",
        "must not use one of the processes' ports 3001-3003",
    );
    refused(
        settings(
            &["--admin-address=9100"],
            &[],
            cluster(json!({"agentAddress": "0.0.0.0:9100"})),
        ),
        "server.cluster.agentAddress",
        "must not use server.cluster.adminAddress's port",
    );
    let c = ok(
        &["--admin-address=9100"],
        &[],
        cluster(json!({"agentAddress": "9101"})),
    )
    .cluster;
    assert_eq!(c.agent_address, "127.0.0.1:9101".parse().ok());
}

#[test]
fn the_control_socket_is_in_the_data_directory_or_off_and_its_group_a_name_or_number() {
    // #26.4
    let path = |args: &[&str], v: Option<Value>| {
        let file = v.map(|v| json!({"server": {"cluster": {"controlSocket": v}}}));
        ok(args, &[], file).control_socket_path()
    };
    let d = std::path::Path::new("/d");
    let dir = ["--data-dir", "/d"];
    assert_eq!(path(&dir, None), Some(d.join("fhircluster.sock")));
    assert_eq!(
        path(&dir, Some(json!("ctl.sock"))),
        Some(d.join("ctl.sock"))
    );
    assert_eq!(
        path(&dir, Some(json!("/run/f.sock"))),
        Some(std::path::PathBuf::from("/run/f.sock"))
    );
    assert_eq!(path(&dir, Some(json!("off"))), None);
    assert_eq!(
        path(&["--control-socket", "off"], Some(json!("x.sock"))),
        None
    );
    for bad in [json!(""), json!(1)] {
        refused(
            settings(&[], &[], cluster(json!({ "controlSocket": bad }))),
            "server.cluster.controlSocket",
            "",
        );
    }
    let group = |v: Value| {
        ok(&[], &[], cluster(json!({ "controlGroup": v })))
            .cluster
            .control_group
    };
    assert_eq!(group(json!("fhirsmith")), "fhirsmith");
    assert_eq!(group(json!("998")), "998");
    assert_eq!(group(json!("")), "");
    for bad in [json!("a b"), json!("x:y"), json!(7)] {
        refused(
            settings(&[], &[], cluster(json!({ "controlGroup": bad }))),
            "server.cluster.controlGroup",
            "",
        );
    }
}
