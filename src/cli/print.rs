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
