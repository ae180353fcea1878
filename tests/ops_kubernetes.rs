//! `fhircluster print kubernetes`: the manifests pass `kubernetes-validate --strict` (the
//! Kubernetes API's schemas, unknown fields refused); read back as YAML (PyYAML, which
//! kubernetes-validate brings), their probes, ports and grace period agree with the settings
//! they were printed from; the pod's command, run by the real binary on a host named as a
//! StatefulSet's pod, gives that pod's prefix (DEC-90); and the nginx configuration's map,
//! run by a real nginx, names each cache-id's pod. No Kubernetes cluster runs here: what a
//! cluster would do with them is not tested. Without kubernetes-validate installed these tests
//! fail, saying so (tests/run.sh installs it).

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::{json, Value};

/// The settings printed from: every time that counts in a stop differs from its default.
fn settings() -> Value {
    json!({
        "server": {
            "port": 3100,
            "cluster": {
                "adminAddress": "127.0.0.1:9250",
                "lameDuckSeconds": 20,
                "drainSeconds": 45,
                "killSeconds": 12
            }
        },
        "modules": { "tx": { "endpoints": [{ "path": "/r4" }] } }
    })
}

/// `fhircluster print kubernetes ARGS` on a data directory holding `config`: its output.
fn print_kubernetes(dir: &Path, config: &Value, args: &[&str]) -> String {
    write_config(dir, config);
    let out = run_bounded(
        launcher_command(dir)
            .args(["print", "kubernetes"])
            .args(args),
        Duration::from_secs(20),
    );
    assert_eq!(out.code, Some(0), "print kubernetes: {}", out.all());
    out.stdout
}

/// `kubernetes-validate --strict` on `yaml`: passes, or the test fails with what it said.
fn assert_valid(dir: &Path, yaml: &str) {
    let file = dir.join("fhircluster.yaml");
    std::fs::write(&file, yaml).expect("write the manifests");
    let out = run_bounded(
        Command::new("kubernetes-validate")
            .arg("--strict")
            .arg(&file),
        Duration::from_secs(120),
    );
    assert!(
        out.code.is_some() && !out.stderr.contains("No such file"),
        "kubernetes-validate is not installed (or not on PATH): tests/run.sh installs it \
         (python3 -m pip install kubernetes-validate): {}",
        out.all()
    );
    assert_eq!(
        out.code,
        Some(0),
        "kubernetes-validate --strict:\n{}\n{yaml}",
        out.all()
    );
    assert!(
        !out.all().contains("FAIL") && !out.all().contains("ERROR"),
        "{}",
        out.all()
    );
}

/// The YAML stream's documents, parsed by PyYAML (kubernetes-validate's own parser).
fn documents(dir: &Path) -> Vec<Value> {
    let out = run_bounded(
        Command::new("python3")
            .arg("-c")
            .arg(
                "import json, sys, yaml\n\
             json.dump(list(yaml.safe_load_all(open(sys.argv[1]))), sys.stdout)",
            )
            .arg(dir.join("fhircluster.yaml")),
        Duration::from_secs(60),
    );
    assert_eq!(out.code, Some(0), "PyYAML: {}", out.all());
    serde_json::from_str(&out.stdout).expect("the documents as JSON")
}

fn kind<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {docs:#?}"))
}

fn secs(config: &Value, key: &str) -> u64 {
    config["server"]["cluster"][key].as_u64().expect(key)
}

#[test]
fn print_kubernetes_passes_kubernetes_validate_strict_and_its_probes_and_grace_agree_with_the_settings(
) {
    // spec: DEC-88, DEC-90, STOP-10
    let dir = tempfile::tempdir().expect("data dir");
    let config = settings();
    let yaml = print_kubernetes(
        dir.path(),
        &config,
        &[
            "--image",
            "registry.example.org/fhirsmith:1",
            "--replicas",
            "3",
            "--memory-limit",
            "12Gi",
        ],
    );
    assert_valid(dir.path(), &yaml);
    let docs = documents(dir.path());
    let set = kind(&docs, "StatefulSet", "fhircluster");
    assert_eq!(set["spec"]["replicas"], 3);
    let pod = &set["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(c["image"], "registry.example.org/fhirsmith:1");

    // The grace period covers the lame duck, the drain, the workers' and the master's
    // killSeconds and the workers' last counts (5 s) between them.
    let stop = secs(&config, "lameDuckSeconds")
        + secs(&config, "drainSeconds")
        + 2 * secs(&config, "killSeconds")
        + 5;
    let grace = pod["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("grace");
    assert!(
        grace >= stop,
        "terminationGracePeriodSeconds {grace} < the stop's {stop} s"
    );

    // The probes ask the admin address's port, which the pod listens on for the kubelet.
    let admin_port = 9250;
    for (probe, path) in [
        ("startupProbe", "/readyz"),
        ("readinessProbe", "/readyz"),
        ("livenessProbe", "/livez"),
    ] {
        assert_eq!(c[probe]["httpGet"]["port"], admin_port, "{probe}: {c:#}");
        assert_eq!(c[probe]["httpGet"]["path"], path, "{probe}");
    }
    let command: Vec<&str> = c["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let after = |flag: &str| {
        command
            .iter()
            .position(|a| *a == flag)
            .and_then(|i| command.get(i + 1))
            .copied()
    };
    assert_eq!(
        after("--admin-address"),
        Some("0.0.0.0:9250"),
        "{command:?}"
    );
    assert_eq!(after("--host-prefix"), Some("ordinal:h"), "{command:?}");
    let ports: Vec<u64> = c["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .filter_map(|p| p["containerPort"].as_u64())
        .collect();
    assert_eq!(ports, [3100, admin_port]);

    // The memory limit the launcher sizes the workers from, and the data directory on the
    // pod's own volume, with the settings printed from as its config.json.
    assert_eq!(c["resources"]["limits"]["memory"], "12Gi");
    let data_dir = c["env"]
        .as_array()
        .and_then(|e| e.iter().find(|v| v["name"] == "FHIRSMITH_DATA_DIR"))
        .map(|v| v["value"].clone())
        .expect("FHIRSMITH_DATA_DIR");
    let claim = &set["spec"]["volumeClaimTemplates"][0]["metadata"]["name"];
    let mounts = c["volumeMounts"].as_array().expect("mounts");
    assert!(
        mounts
            .iter()
            .any(|m| m["name"] == *claim && m["mountPath"] == data_dir),
        "{mounts:?}"
    );
    let printed_config = kind(&docs, "ConfigMap", "fhircluster-config")["data"]["config.json"]
        .as_str()
        .expect("config.json");
    let printed_config: Value = serde_json::from_str(printed_config).expect("JSON");
    assert_eq!(printed_config, config);

    // The governing Service is headless and publishes the pods while not ready (a cache-id
    // reaches its pod through the lame duck), and selects the pods.
    let names = kind(&docs, "Service", "fhircluster");
    assert_eq!(set["spec"]["serviceName"], "fhircluster");
    assert_eq!(names["spec"]["clusterIP"], "None");
    assert_eq!(names["spec"]["publishNotReadyAddresses"], true);
    assert_eq!(
        names["spec"]["selector"]["app"],
        set["spec"]["template"]["metadata"]["labels"]["app"]
    );

    // nginx looks the pods' names up as it runs: no upstream block (resolved once), and every
    // proxy_pass is a variable.
    let conf = kind(&docs, "ConfigMap", "fhircluster-nginx")["data"]["default.conf"]
        .as_str()
        .expect("default.conf")
        .to_string();
    assert!(
        conf.contains("\nresolver kube-dns.kube-system.svc.cluster.local "),
        "{conf}"
    );
    assert!(
        !conf
            .lines()
            .any(|l| l.trim_start().starts_with("upstream ")),
        "{conf}"
    );
    for line in conf.lines().filter(|l| l.contains("proxy_pass ")) {
        assert!(line.contains("proxy_pass http://$"), "{line}");
    }
}

#[test]
fn the_pods_command_gives_each_pod_its_prefix_from_its_ordinal() {
    // spec: DEC-90
    let dir = tempfile::tempdir().expect("data dir");
    let yaml = print_kubernetes(dir.path(), &settings(), &[]);
    assert_valid(dir.path(), &yaml);
    let docs = documents(dir.path());
    let c = &kind(&docs, "StatefulSet", "fhircluster")["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(args.first(), Some(&"fhircluster"), "{args:?}");
    // The pod's own arguments, on this data directory (the ConfigMap's config.json), checked
    // and the plan printed as a pod of that name would start it.
    let pod_check = |pod: &str| {
        run_bounded(
            launcher_command(dir.path())
                .args(&args[1..])
                .args(["--demo", "--check", "--workers", "1"])
                .env("HOSTNAME", pod),
            CHECK_LIMIT,
        )
    };
    for (pod, code) in [("fhircluster-0", "h0m0"), ("fhircluster-12", "h12tx1")] {
        let out = pod_check(pod);
        assert_eq!(out.code, Some(0), "{}", out.all());
        assert!(
            out.stdout.contains(&format!(" {code} on ")),
            "{pod}: {}",
            out.all()
        );
        assert!(
            out.stdout.contains("admin endpoint: 0.0.0.0:9250 "),
            "{}",
            out.all()
        );
    }
    let out = pod_check("fhircluster");
    assert_eq!(out.code, Some(1), "{}", out.all());
    assert!(
        out.stderr.contains("\"fhircluster\" has none"),
        "{}",
        out.all()
    );
}

/// The printed routing tier's nginx configuration (validated), its resolver this machine's and
/// its `listen` a placeholder for the test's port.
fn printed_nginx_conf() -> String {
    let dir = tempfile::tempdir().expect("data dir");
    let yaml = print_kubernetes(dir.path(), &settings(), &[]);
    assert_valid(dir.path(), &yaml);
    let docs = documents(dir.path());
    kind(&docs, "ConfigMap", "fhircluster-nginx")["data"]["default.conf"]
        .as_str()
        .expect("default.conf")
        .replace(
            "resolver kube-dns.kube-system.svc.cluster.local",
            "resolver 127.0.0.1",
        )
        .replace("listen 80;", "listen {{LISTEN}};")
}

#[test]
fn the_printed_nginx_map_names_each_cache_ids_pod_and_other_requests_the_ready_pods() {
    // spec: DEC-90
    let conf = printed_nginx_conf();
    // No cluster DNS here: nginx answers with where it would send each request instead of
    // sending it (the map and the variables are the printed ones).
    let conf = conf
        .replace(
            "proxy_pass http://$fhir_tx_host;",
            "return 200 \"tx $fhir_tx_host\";",
        )
        .replace(
            "proxy_pass http://$fhir_master;",
            "return 200 \"master $fhir_master\";",
        );
    let nginx = Nginx::start(&conf, &[]);
    let to = |path: &str, id: Option<&str>| {
        let headers: Vec<(&str, &str)> = id.map(|i| ("X-Cache-Id", i)).into_iter().collect();
        nginx.request("GET", path, &headers, b"").text()
    };
    let pod = |n: &str| format!("fhircluster-{n}.fhircluster.default.svc.cluster.local:3100");
    let ready = "fhircluster-ready.default.svc.cluster.local:3100";
    assert_eq!(
        to("/r4/ValueSet/$expand", Some("h1tx2.ab.c")),
        format!("tx {}", pod("1"))
    );
    assert_eq!(
        to("/r4/ValueSet/$expand", Some("h12m0.x")),
        format!("tx {}", pod("12"))
    );
    assert_eq!(
        to("/r4/ValueSet/$expand", Some("h3tx10.x")),
        format!("tx {}", pod("3"))
    );
    for other in [None, Some("atx1.x"), Some("h1zz.x"), Some("htx1.x")] {
        assert_eq!(
            to("/r4/CodeSystem/$lookup", other),
            format!("tx {ready}"),
            "{other:?}"
        );
    }
    assert_eq!(
        to("/r4/ConceptMap/$closure", None),
        format!("master {}", pod("0"))
    );
    assert_eq!(
        to("/metadata", Some("h1tx2.x")),
        format!("master {}", pod("0"))
    );
}

#[test]
fn a_cache_id_whose_pod_nginx_cannot_reach_goes_to_a_ready_pod() {
    // spec: DEC-90
    let conf = printed_nginx_conf();
    // No cluster DNS here, so no pod's name resolves: the request for pod 1's cache-id fails
    // in nginx (a 502 of its own) and goes on to the ready pods, whose address nginx answers
    // with instead of sending the request there.
    let conf = conf.replace(
        "proxy_pass http://$fhir_ready;",
        "return 200 \"ready $fhir_ready\";",
    );
    let nginx = Nginx::start(&conf, &[]);
    let r = nginx.request(
        "GET",
        "/r4/ValueSet/$expand",
        &[("X-Cache-Id", "h1tx2.x")],
        b"",
    );
    assert_eq!(
        (r.status, r.text()),
        (
            200,
            "ready fhircluster-ready.default.svc.cluster.local:3100".to_string()
        ),
        "{}",
        nginx.error_log()
    );
    // The master host unreachable: the FHIR 503, not nginx's HTML page.
    let r = nginx.request("GET", "/metadata", &[], b"");
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.text().contains("OperationOutcome"), "{}", r.text());
}
