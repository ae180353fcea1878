//! The Kubernetes manifests `fhircluster print kubernetes` prints (kubernetes.md): many hosts as
//! one StatefulSet, each pod a host with its fhircluster, its own `hostPrefix` from its ordinal
//! (`ordinal:h`, DEC-90: stable across restarts, so cache-ids stay routable), its data directory
//! on its own persistent volume; the probes on the admin address; a grace period the settings'
//! longest stop fits in (the printed systemd unit's `TimeoutStopSec=`); and nginx in front with
//! the many-hosts routing over the pods' stable names, looked up as it runs (an upstream's
//! names are looked up once, at nginx's start: a pod that moves would be lost). Pure: the
//! inputs in, the YAML out.

use std::fmt::Write;

use super::hosts::cache_id_regex;

/// What the manifests are made of.
pub(super) struct Cluster<'a> {
    /// The StatefulSet's name, which names its pods (`fhircluster-0`) and everything else.
    pub name: &'a str,
    pub namespace: &'a str,
    /// The image the operator built: FHIRsmith with fhircluster on its PATH.
    pub image: &'a str,
    /// How many hosts (pods).
    pub replicas: u32,
    /// `resources.limits.memory`, which the launcher sizes the workers against.
    pub memory_limit: &'a str,
    /// Each pod's data directory's volume.
    pub storage: &'a str,
    /// The DNS server nginx asks for the pods' addresses.
    pub resolver: &'a str,
    /// `server.port`, and the admin address's port (the probes').
    pub port: u16,
    pub admin_port: u16,
    /// `terminationGracePeriodSeconds`.
    pub grace_secs: u64,
    /// `lameDuckSeconds`: a warning when it is shorter than nginx takes to leave a stopping pod.
    pub lame_duck_secs: u64,
    /// The tx endpoints, and the master's instance code (the cache-ids' process code).
    pub endpoints: &'a [String],
    pub master_code: &'a str,
    /// config.json's text (into a ConfigMap), or `None`: a placeholder to fill in.
    pub config_json: Option<&'a str>,
}

/// The StatefulSet's name, and the prefix of every other object's.
pub(super) const NAME: &str = "fhircluster";

/// A Kubernetes quantity as a memory limit or a volume's size takes it: `16Gi`, `512M`, `1.5G`.
pub(super) fn valid_quantity(text: &str) -> bool {
    let number = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let suffix = &text[number.len()..];
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
    let number_ok = match number.split_once('.') {
        Some((whole, frac)) => digits(whole) && digits(frac),
        None => digits(number),
    };
    number_ok
        && [
            "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E",
        ]
        .contains(&suffix)
}

/// A DNS label (a namespace's name): lowercase letters, digits and `-`, not at either end.
pub(super) fn valid_label(text: &str) -> bool {
    (1..=63).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

/// Where the data directory is in the pod, and the image's code directory.
pub(super) const DATA_DIR: &str = "/var/lib/fhirsmith";
pub(super) const WORKING_DIR: &str = "/opt/fhirsmith";
/// The letters before each pod's ordinal in its prefix.
pub(super) const PREFIX_LETTERS: &str = "h";
/// How long the master may load before Kubernetes restarts the pod: the startup probe's
/// period and failures (an hour: a first start builds the databases).
const STARTUP_PERIOD_SECS: u64 = 10;
const STARTUP_FAILURES: u64 = 360;
/// nginx 1.22: the resolver's variables in proxy_pass (no upstream `resolve` before 1.27.3).
const NGINX_IMAGE: &str = "nginx:1.22";
/// How long nginx keeps a name's addresses: a pod that stops leaves `-ready`'s addresses at its
/// first failed readiness probe (every 5 s), and nginx follows within this (kubernetes.md:
/// `lameDuckSeconds` covers both).
pub(super) const RESOLVER_VALID_SECS: u64 = 5;
/// The readiness probe's period.
const READY_PERIOD_SECS: u64 = 5;

/// What the manifests say of a lame duck shorter than a stopping pod takes to leave nginx's
/// answers (its readiness probe fails, then nginx's copy of the ready pods' addresses expires).
pub(super) fn lame_duck_note(lame_duck_secs: u64) -> String {
    let needed = READY_PERIOD_SECS + RESOLVER_VALID_SECS;
    if lame_duck_secs >= needed {
        return String::new();
    }
    format!(
        "\x20     # lameDuckSeconds is {lame_duck_secs}: a stopping pod leaves nginx's addresses within\n\
         \x20     # {needed} s (its readiness probe, then nginx's DNS answers), so set it to {needed} or more\n\
         \x20     # in config.json: else requests reach a pod that has begun its drain (kubernetes.md).\n"
    )
}

/// A YAML scalar as a double-quoted string (JSON's escapes are YAML's).
fn q(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// A block scalar's lines, indented.
fn block(text: &str, indent: usize) -> String {
    let pad = " ".repeat(indent);
    text.lines()
        .map(|l| {
            if l.is_empty() {
                "\n".to_string()
            } else {
                format!("{pad}{l}\n")
            }
        })
        .collect()
}

/// A pod's stable name in the cluster's DNS: `fhircluster-0.fhircluster.default.svc.cluster.local`.
pub(super) fn pod_host(c: &Cluster<'_>, ordinal: &str) -> String {
    format!(
        "{name}-{ordinal}.{name}.{ns}.svc.cluster.local",
        name = c.name,
        ns = c.namespace
    )
}

/// Every manifest, as one YAML stream.
pub(super) fn render(c: &Cluster<'_>) -> String {
    let mut out = format!(
        "# fhircluster on Kubernetes (kubernetes.md), as printed by `fhircluster print kubernetes`:\n\
         # {replicas} hosts in a StatefulSet, each pod a fhircluster with its own hostPrefix\n\
         # ({PREFIX_LETTERS}0, {PREFIX_LETTERS}1 ... from its ordinal), and nginx in front routing each cache-id to its pod.\n\
         #   fhircluster print kubernetes --image registry.example.org/fhirsmith:1 > fhircluster.yaml\n\
         #   kubectl apply -f fhircluster.yaml\n",
        replicas = c.replicas
    );
    out.push_str(&config_map(c));
    out.push_str(&services(c));
    out.push_str(&stateful_set(c));
    out.push_str(&nginx(c));
    out
}

fn config_map(c: &Cluster<'_>) -> String {
    let (note, text) = match c.config_json {
        Some(text) => ("the data directory's config.json, as printed", text),
        None => (
            "no config.json was given (--data-dir): put FHIRsmith's here",
            "{ \"server\": { \"cluster\": {} } }\n",
        ),
    };
    format!(
        "---\n# config.json for every pod ({note}); each pod's hostPrefix, admin address and\n\
         # port are given in its arguments and override it.\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}-config\n  namespace: {ns}\n\
         data:\n  config.json: |2\n{body}",
        name = c.name,
        ns = c.namespace,
        body = block(text, 4)
    )
}

fn services(c: &Cluster<'_>) -> String {
    format!(
        "---\n# The pods' stable names ({first}): headless, and published while not\n\
         # ready, so a cache-id still reaches its pod through the lame duck and the drain.\n\
         apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n\
         \x20 clusterIP: None\n  publishNotReadyAddresses: true\n  selector:\n    app: {name}\n\
         \x20 ports:\n    - name: http\n      port: {port}\n      targetPort: http\n\
         ---\n# The ready pods alone, for tx requests without a cache-id: nginx spreads them over\n\
         # the addresses this name has.\n\
         apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}-ready\n  namespace: {ns}\nspec:\n\
         \x20 clusterIP: None\n  selector:\n    app: {name}\n\
         \x20 ports:\n    - name: http\n      port: {port}\n      targetPort: http\n",
        first = pod_host(c, "0"),
        name = c.name,
        ns = c.namespace,
        port = c.port,
    )
}

fn stateful_set(c: &Cluster<'_>) -> String {
    format!(
        "---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: {name}\n  namespace: {ns}\n\
spec:\n  serviceName: {name}\n  replicas: {replicas}\n\
\x20 # Pods start and stop together: each is a whole host; pod 0 is the designated master host.\n\
\x20 podManagementPolicy: Parallel\n  selector:\n    matchLabels:\n      app: {name}\n\
\x20 template:\n    metadata:\n      labels:\n        app: {name}\n    spec:\n\
\x20     # The lame duck, the drain and the stop in order (the settings' longest stop and a\n\
\x20     # margin, as the systemd unit's TimeoutStopSec=), before Kubernetes sends SIGKILL.\n\
\x20     terminationGracePeriodSeconds: {grace}\n{note}\
\x20     containers:\n        - name: fhircluster\n          image: {image}\n\
\x20         workingDir: {wd}\n\
\x20         # Arguments to the image's entrypoint: an init (tini) there reaps orphans, as Docker's\n\
\x20         # --init does (without one, fhircluster is PID 1).\n\
\x20         args:\n            - fhircluster\n            - --host-prefix\n            - ordinal:{letters}\n\
\x20           - --admin-address\n            - {admin}\n            - --port\n            - {port_q}\n\
\x20         env:\n            - name: FHIRSMITH_DATA_DIR\n              value: {data}\n\
\x20         ports:\n            - name: http\n              containerPort: {port}\n\
\x20           - name: admin\n              containerPort: {admin_port}\n\
\x20         # The launcher sizes the workers against this limit (its cgroup's memory.max).\n\
\x20         resources:\n            requests:\n              memory: {mem}\n            limits:\n              memory: {mem}\n\
\x20         # The master loads (a first start builds its databases) for up to {startup_min} minutes.\n\
\x20         startupProbe:\n            httpGet:\n              path: /readyz\n              port: {admin_port}\n\
\x20           periodSeconds: {startup_period}\n            failureThreshold: {startup_failures}\n\
\x20         # 503 while the master loads, no tx process is ready, or it stops (lame duck, drain).\n\
\x20         readinessProbe:\n            httpGet:\n              path: /readyz\n              port: {admin_port}\n\
\x20           periodSeconds: {READY_PERIOD_SECS}\n            failureThreshold: 1\n\
\x20         # 200 while the launcher runs, through the lame duck and the drain.\n\
\x20         livenessProbe:\n            httpGet:\n              path: /livez\n              port: {admin_port}\n\
\x20           periodSeconds: 10\n            timeoutSeconds: 5\n            failureThreshold: 6\n\
\x20         volumeMounts:\n            - name: data\n              mountPath: {data}\n\
\x20           - name: config\n              mountPath: {data}/config.json\n              subPath: config.json\n\
\x20     volumes:\n        - name: config\n          configMap:\n            name: {name}-config\n\
\x20 volumeClaimTemplates:\n    - metadata:\n        name: data\n      spec:\n\
\x20       accessModes:\n          - ReadWriteOnce\n        resources:\n          requests:\n            storage: {storage}\n",
        name = c.name,
        ns = c.namespace,
        replicas = c.replicas,
        grace = c.grace_secs,
        note = lame_duck_note(c.lame_duck_secs),
        image = q(c.image),
        wd = WORKING_DIR,
        letters = PREFIX_LETTERS,
        admin = q(&format!("0.0.0.0:{}", c.admin_port)),
        admin_port = c.admin_port,
        port = c.port,
        port_q = q(&c.port.to_string()),
        data = DATA_DIR,
        mem = q(c.memory_limit),
        storage = q(c.storage),
        startup_min = STARTUP_PERIOD_SECS * STARTUP_FAILURES / 60,
        startup_period = STARTUP_PERIOD_SECS,
        startup_failures = STARTUP_FAILURES,
    )
}

/// nginx's many-hosts configuration over the pods' names: each cache-id's prefix names its pod
/// (`h1` → `fhircluster-1`), so the map needs no list of pods and holds as the StatefulSet is
/// scaled.
pub(super) fn nginx_conf(c: &Cluster<'_>) -> String {
    let any = format!(
        "{}-ready.{}.svc.cluster.local:{}",
        c.name, c.namespace, c.port
    );
    let ord_re = cache_id_regex(
        &format!("{PREFIX_LETTERS}(?<fhir_ord>[0-9]+)"),
        c.master_code,
    );
    let mut out = format!(
        "# Names are looked up as requests come (variables in proxy_pass), not once at the start:\n\
         # a pod that restarts gets a new address.\n\
         resolver {resolver} valid={RESOLVER_VALID_SECS}s;\nresolver_timeout 2s;\n\n\
         # A cache-id goes to the pod whose prefix begins it; others to a ready pod.\n\
         map $http_x_cache_id $fhir_tx_host {{\n    default {any};\n    \"~{ord_re}\" {pod}:{port};\n}}\n\n\
         server {{\n    listen 80;\n    server_name _;\n    set $fhir_master {master}:{port};\n    set $fhir_ready {any};\n\
         \x20   # A fallback's own failure goes on to the FHIR 503 below.\n    recursive_error_pages on;\n{server}",
        resolver = c.resolver,
        pod = pod_host(c, "$fhir_ord"),
        port = c.port,
        server = super::nginx::MANY_SERVER,
        master = pod_host(c, "0"),
    );
    for e in c.endpoints {
        let _ = write!(
            out,
            "\n    # The master's paths inside {e}: the designated master host, pod 0.\n\
             \x20   location ~ ^{e}/(.*\\$closure|syndication|info/) {{\n\
             \x20       proxy_pass http://$fhir_master;\n    }}\n\n\
             \x20   # Tx requests, by cache-id or to a ready pod. A cache-id whose pod nginx can't reach\n\
             \x20   # (gone, restarting) goes to a ready pod, which answers cache-id-unknown for it.\n\
             \x20   location {e}/ {{\n        proxy_pass http://$fhir_tx_host;\n\
             \x20       error_page 502 = @fhir_ready;\n        error_page 503 504 = @fhircluster_down;\n    }}\n"
        );
    }
    let _ = write!(
        out,
        "\n    location @fhir_ready {{\n        proxy_pass http://$fhir_ready;\n    }}\n\n\
         \x20   # Everything else is the master's.\n    location / {{\n        proxy_pass http://$fhir_master;\n    }}\n{}",
        super::nginx::DOWN_PAGE
    );
    out
}

fn nginx(c: &Cluster<'_>) -> String {
    format!(
        "---\n# nginx's many-hosts configuration (nginx.md), over the pods' names.\n\
         apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}-nginx\n  namespace: {ns}\n\
         data:\n  default.conf: |2\n{conf}\
         ---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}-nginx\n  namespace: {ns}\n\
         spec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: {name}-nginx\n\
         \x20 template:\n    metadata:\n      labels:\n        app: {name}-nginx\n    spec:\n\
         \x20     containers:\n        - name: nginx\n          image: {nginx_image}\n\
         \x20         ports:\n            - name: http\n              containerPort: 80\n\
         \x20         volumeMounts:\n            - name: conf\n              mountPath: /etc/nginx/conf.d\n\
         \x20     volumes:\n        - name: conf\n          configMap:\n            name: {name}-nginx\n\
         ---\n# Where clients come in: expose it as your cluster does (an Ingress, a LoadBalancer).\n\
         apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}-nginx\n  namespace: {ns}\nspec:\n\
         \x20 selector:\n    app: {name}-nginx\n  ports:\n    - name: http\n      port: 80\n      targetPort: http\n",
        name = c.name,
        ns = c.namespace,
        conf = block(&nginx_conf(c), 4),
        nginx_image = NGINX_IMAGE,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(config_json: Option<&str>) -> Cluster<'_> {
        Cluster {
            name: NAME,
            namespace: "fhir",
            image: "r/fhirsmith:1",
            replicas: 3,
            memory_limit: "8Gi",
            storage: "20Gi",
            resolver: "10.96.0.10",
            port: 3000,
            admin_port: 9100,
            grace_secs: 120,
            lame_duck_secs: 0,
            endpoints: &[],
            master_code: "m0",
            config_json,
        }
    }

    #[test]
    fn sizes_are_kubernetes_quantities_and_a_namespace_a_dns_label() {
        for ok in ["16Gi", "512Mi", "8G", "1.5Gi", "1073741824", "500k"] {
            assert!(valid_quantity(ok), "{ok}");
        }
        for bad in ["", "Gi", "16 Gi", "16GiB", "-1Gi", "1.Gi", "16gi", "16Gi\n"] {
            assert!(!valid_quantity(bad), "{bad:?}");
        }
        for ok in ["default", "fhir-prod", "a1"] {
            assert!(valid_label(ok), "{ok}");
        }
        for bad in ["", "Fhir", "-a", "a-", "a.b", "a_b", &"a".repeat(64)] {
            assert!(!valid_label(bad), "{bad:?}");
        }
    }

    #[test]
    fn each_pod_is_named_in_the_namespace_and_the_map_takes_its_ordinal_from_the_cache_id() {
        // spec: DEC-90
        let c = cluster(None);
        assert_eq!(
            pod_host(&c, "0"),
            "fhircluster-0.fhircluster.fhir.svc.cluster.local"
        );
        let conf = nginx_conf(&Cluster {
            endpoints: &["/r4".to_string(), "/r5".to_string()],
            ..c
        });
        assert!(conf.contains(
            "\"~^h(?<fhir_ord>[0-9]+)(m0|tx[0-9]+)\\.\" \
             fhircluster-$fhir_ord.fhircluster.fhir.svc.cluster.local:3000;"
        ));
        assert!(conf.contains("resolver 10.96.0.10 valid=5s;"), "{conf}");
        assert!(conf.contains("location /r5/ {"), "{conf}");
    }

    #[test]
    fn config_json_goes_into_the_config_map_as_given_or_a_placeholder_says_to_give_it() {
        let text = render(&cluster(Some("{\n  \"server\": {}\n}\n")));
        assert!(
            text.contains("  config.json: |2\n    {\n      \"server\": {}\n    }\n---"),
            "{text}"
        );
        let text = render(&cluster(None));
        assert!(text.contains("no config.json was given"), "{text}");
        assert!(text.contains("# lameDuckSeconds is 0:"), "{text}");
        let quiet = render(&Cluster {
            lame_duck_secs: 10,
            ..cluster(None)
        });
        assert!(!quiet.contains("lameDuckSeconds is"), "{quiet}");
        for line in [
            "  replicas: 3\n",
            "          image: \"r/fhirsmith:1\"\n",
            "      terminationGracePeriodSeconds: 120\n",
            "              memory: \"8Gi\"\n",
            "            storage: \"20Gi\"\n",
            "            - ordinal:h\n",
        ] {
            assert!(text.contains(line), "{line:?} in:\n{text}");
        }
    }
}
