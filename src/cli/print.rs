//! `fhircluster print`'s subcommand as the command line parses it: what can be printed and the
//! defaults of Deploy's layout. What each prints is `kit/`'s; the words are here, beside the rest
//! of the command line, so the CLI imports nothing above it.

use std::path::PathBuf;

/// Where the launcher runs the servers from (their code), in Deploy's layout.
pub(crate) const DEFAULT_WORKING_DIR: &str = "/opt/fhirsmith";
/// The data directory of Deploy's layout: what `print` prints when none is given, and where
/// `status` and the actions look when the current directory has no launcher.
pub(crate) const DEFAULT_DATA_DIR: &str = "/var/lib/fhirsmith";
/// The service user of Deploy's layout.
const DEFAULT_USER: &str = "fhirsmith";

/// What `fhircluster print` prints.
#[derive(clap::Subcommand, Clone, Debug, PartialEq, Eq)]
pub enum Print {
    /// The systemd unit: `fhircluster print systemd-unit > /etc/systemd/system/fhircluster.service`
    /// (ExecStart= is this binary's path; TimeoutStopSec= covers the settings' longest stop)
    SystemdUnit {
        /// The service user
        #[arg(long, value_name = "NAME", default_value = DEFAULT_USER)]
        user: String,
        /// The servers' code directory (server.js), their working directory
        #[arg(long, value_name = "DIR", default_value = DEFAULT_WORKING_DIR)]
        working_directory: PathBuf,
        /// The service's memory limit (MemoryMax=: 16G, 80%), which the workers are sized
        /// against [default: none: the host's memory]
        #[arg(long, value_name = "SIZE")]
        memory_max: Option<String>,
    },
    /// A logrotate config for the access log (accessLogPath), reopened with SIGUSR1:
    /// `fhircluster print logrotate > /etc/logrotate.d/fhircluster`
    Logrotate {
        /// The service user, who owns the log
        #[arg(long, value_name = "NAME", default_value = DEFAULT_USER)]
        user: String,
    },
    /// nginx.md's configuration, for inside nginx's `http { }`: one host, or with --host
    /// many: `fhircluster print nginx > /etc/nginx/conf.d/fhircluster.conf`
    Nginx {
        /// What nginx listens on (its `listen` directive's arguments), e.g. "443 ssl"
        #[arg(long, value_name = "LISTEN", default_value = "80")]
        listen: String,
        /// The name clients use (server_name), e.g. fhir.example.org: beside another site
        /// that is nginx's default_server (Debian's and Ubuntu's default site), only requests
        /// for this name come here [default: _, none of its own]
        #[arg(long, value_name = "NAME")]
        server_name: Option<String>,
        #[command(flatten)]
        hosts: HostArgs,
    },
    /// HAProxy's configuration (haproxy.md), a whole haproxy.cfg: one host (this one), or with
    /// --host many; /readyz on adminAddress is the health check, agentAddress the weight
    Haproxy {
        /// What HAProxy binds (its `bind` line's arguments), e.g. ":443 ssl crt /etc/haproxy/site.pem"
        #[arg(long, value_name = "BIND", default_value = ":80")]
        listen: String,
        #[command(flatten)]
        hosts: HostArgs,
    },
    /// Kubernetes manifests (kubernetes.md): a StatefulSet of hosts, each pod's hostPrefix from
    /// its ordinal (h0, h1 ...), its data directory on a volume, the probes on the admin
    /// address, and nginx in front routing each cache-id to its pod:
    /// `fhircluster print kubernetes --image IMAGE > fhircluster.yaml`
    Kubernetes {
        /// The image you build: FHIRsmith (server.js in /opt/fhirsmith) with fhircluster on its
        /// PATH (README, In Docker)
        #[arg(long, value_name = "IMAGE", default_value = "fhirsmith:latest")]
        image: String,
        /// How many hosts (pods); pod 0 is the designated master host
        #[arg(long, value_name = "N", default_value_t = 2,
              value_parser = clap::value_parser!(u32).range(1..=999))]
        replicas: u32,
        /// Each pod's memory limit (resources.limits.memory), which the launcher sizes the
        /// workers against: 16Gi, 8G, 512Mi
        #[arg(long, value_name = "SIZE", default_value = "16Gi")]
        memory_limit: String,
        /// Each pod's data directory's volume (its databases)
        #[arg(long, value_name = "SIZE", default_value = "50Gi")]
        storage: String,
        /// The namespace, which the pods' names in nginx's configuration name
        #[arg(long, value_name = "NAME", default_value = "default")]
        namespace: String,
        /// The DNS server nginx asks for the pods' addresses as it runs
        #[arg(
            long,
            value_name = "NAME",
            default_value = "kube-dns.kube-system.svc.cluster.local"
        )]
        resolver: String,
    },
    /// The Prometheus alert rules (for rule_files: in prometheus.yml)
    Alerts,
    /// The Grafana dashboard (Dashboards > New > Import)
    Dashboard,
}

/// The hosts of a balancer in front of many (`print nginx`, `print haproxy`).
#[derive(clap::Args, Clone, Debug, PartialEq, Eq, Default)]
pub struct HostArgs {
    /// A host behind the balancer, repeated for each: its hostPrefix, its fhircluster's address
    /// (server.port), and its adminAddress and agentAddress ports when they differ from these
    /// settings': a=10.0.0.11:3000 or a=10.0.0.11:3000,admin=9100,agent=9101
    #[arg(long = "host", value_name = "PREFIX=ADDRESS")]
    pub host: Vec<String>,
    /// The designated master host ($closure, the master's pages), by its prefix [default: the
    /// first --host]
    #[arg(long, value_name = "PREFIX")]
    pub master_host: Option<String>,
}

pub(crate) const PRINT_HELP: &str = "\
Paths, ports and times come from the data directory's config.json when one is given (--data-dir
or FHIRSMITH_DATA_DIR); without one, Deploy's layout: /var/lib/fhirsmith and the defaults, never
the current directory.";
