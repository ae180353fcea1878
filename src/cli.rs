//! fhircluster's command line, as raw values: numbers and booleans are kept as the text given, so
//! a bad one (`--workers=two`) becomes the settings loader's one-line error naming the setting
//! (exit 1), not a clap usage error (exit 2). `settings::from_sources` validates them.
//!
//! The environment is not read here: clap's `env` attributes would read the process environment
//! during parsing, and the loader's test entry point must not. The variables are listed in the
//! help instead, and read by `settings::load`.

use std::path::PathBuf;

use clap::Parser;

pub(crate) mod print;
pub use print::Print;

const ENV_HELP: &str = "\
Environment:
  FHIRSMITH_DATA_DIR        The data directory (as --data-dir)
  FHIRSMITH_WORKERS         How many tx-workers (as --workers)
  PORT                      The port clients use (as --port)
  FHIRSMITH_LISTEN_ADDRESS  The address that port listens on (as --listen-address)
  FHIRSMITH_HOST_PREFIX     The host's prefix in every cache-id (as --host-prefix)
  RUST_LOG                  Which log lines (as --log-level, or a whole tracing filter)

Precedence: flag, then environment, then config.json in the data directory, then the default.

Node flags for the servers go after --, e.g.
  fhircluster -- --max-old-space-size=8192
(--expose-gc is added; --inspect* and --watch* are refused).";

/// The text after the flags: the environment, then what each signal does.
fn after_help() -> String {
    format!("{ENV_HELP}\n\n{}", crate::signals::help_text())
}

/// Front door and supervisor for a FHIRsmith master and its tx-workers on one machine.
#[derive(Parser, Clone, Debug, Default, PartialEq, Eq)]
#[command(
    name = "fhircluster",
    version = crate::build_info::LONG_VERSION,
    long_version = crate::build_info::LONG_VERSION,
    about,
    after_help = after_help()
)]
pub struct Cli {
    /// How many tx-workers (a whole number; 0: the master alone) [env: FHIRSMITH_WORKERS]
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub(crate) workers: Option<String>,

    /// The port clients use [env: PORT] [default: 3000]
    #[arg(long, value_name = "PORT", allow_hyphen_values = true)]
    pub(crate) port: Option<String>,

    /// Whether the master also takes ordinary tx requests (true or false) [default: true]
    #[arg(long, value_name = "BOOL")]
    pub(crate) master_serves_tx: Option<String>,

    /// The master's port; worker n gets this + n [default: port + 1]
    #[arg(long, value_name = "PORT", allow_hyphen_values = true)]
    pub(crate) internal_port: Option<String>,

    /// The data directory, holding config.json [env: FHIRSMITH_DATA_DIR] [default: the current
    /// directory; for print, Deploy's /var/lib/fhirsmith; status, upgrade, scale and restart
    /// look there too when the current directory has no launcher]
    #[arg(long, value_name = "DIR", global = true)]
    pub(crate) data_dir: Option<PathBuf>,

    /// The server's program and arguments, in one string split on whitespace
    /// [default: "node server.js"]
    #[arg(long, value_name = "\"PROGRAM ARGS...\"", allow_hyphen_values = true)]
    pub(crate) command: Option<String>,

    /// Where the launcher's own read-only endpoints listen (/livez, /readyz, /status,
    /// /metrics): a port (on loopback) or ADDRESS:PORT [default: off]
    #[arg(long, value_name = "ADDR", global = true)]
    pub(crate) admin_address: Option<String>,

    /// The control socket (for `fhircluster status`, `upgrade`, `scale` and `restart`),
    /// relative to the data directory, or "off" [default: fhircluster.sock]
    #[arg(long, value_name = "PATH", global = true)]
    pub(crate) control_socket: Option<String>,

    /// The address server.port listens on, e.g. 127.0.0.1 [env: FHIRSMITH_LISTEN_ADDRESS]
    /// [default: every interface, IPv6 and IPv4]
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen_address: Option<String>,

    /// This host's prefix before every instance code, when many hosts share a balancer: letters
    /// and digits (a), or ordinal:LETTERS for LETTERS and the number that ends the host's name
    /// ($HOSTNAME: a StatefulSet's pod fhircluster-1 takes h1 from ordinal:h)
    /// [env: FHIRSMITH_HOST_PREFIX] [default: none]
    #[arg(long, value_name = "PREFIX")]
    pub(crate) host_prefix: Option<String>,

    /// A file to hold the launcher's pid while it runs (relative to the data directory)
    /// [default: none]; `status`, `upgrade`, `scale` and `restart` find the launcher (its
    /// control socket) through it when no --control-socket is given
    #[arg(long, value_name = "PATH", global = true)]
    pub(crate) pid_file: Option<String>,

    /// Log lines as text or json [default: text]
    #[arg(long, value_name = "FORMAT")]
    pub(crate) log_format: Option<String>,

    /// The launcher's log lines written: error, warn, info or debug (and those above it)
    /// [env: RUST_LOG, a full tracing filter] [default: info]
    #[arg(long, value_name = "LEVEL")]
    pub(crate) log_level: Option<String>,

    /// Validate the settings and print the plan; start nothing (-t, as nginx -t)
    #[arg(long, short = 't')]
    pub(crate) check: bool,

    /// Run with the built-in simulated FHIRsmith server instead of the command
    #[arg(long)]
    pub(crate) demo: bool,

    /// Print the in-place upgrade's state formats this binary reads, and exit (asked by the
    /// launcher it is to replace)
    #[arg(long, hide = true)]
    pub(crate) upgrade_formats: bool,

    /// What to do instead of running the cluster
    #[command(subcommand)]
    pub(crate) action: Option<Action>,

    /// Node flags for every server process (after --)
    #[arg(last = true, value_name = "NODE FLAGS")]
    pub(crate) node_flags: Vec<String>,
}

/// Subcommands.
#[derive(clap::Subcommand, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Show a running launcher's processes, slots, memory and refusals (through its control
    /// socket in the data directory, or the one of the launcher --pid-file names, or with
    /// --admin-address its read-only HTTP listener).
    /// Exit status: 0 ready, 1 not ready or draining, 2 no launcher answers.
    #[command(after_help = STATUS_HELP)]
    Status {
        /// Print the launcher's /status JSON (the same figures) instead of the table
        #[arg(long)]
        json: bool,
        /// Every column of the table (its memory mapped, own requests and JS heap, the front
        /// door's requests and queue), wider than 100 columns
        #[arg(long)]
        wide: bool,
    },
    /// Upgrade the running launcher in place (as `kill -USR2` does: the binary now at its path,
    /// same pid, same processes), through its control socket in the data directory (never the
    /// HTTP listener), and wait for the outcome. Exit status: 0 upgraded, 1 refused or failed
    /// (the reason is printed), 2 no launcher answers.
    Upgrade,
    /// Set the running launcher's tx-worker count from now on (as `kill -TTIN` / `-TTOU` do
    /// for +1 / -1), through its control socket, and wait until it holds: the new workers ready,
    /// the ones taken away (the highest-numbered, drained first) stopped. It lasts until the
    /// next reload or start, which go back to config.json. Exit status: 0 done, 1 refused (the
    /// reason is printed: the internalPort range, the memory fit, the last worker) or not done
    /// in time, 2 no launcher answers.
    Scale {
        /// The worker count (3), or a step (+1, -1)
        #[arg(allow_hyphen_values = true, value_name = "N|+N|-N")]
        count: String,
    },
    /// Restart every FHIRsmith process in turn, the master last, each drained first (new
    /// server code with the same settings; a SIGHUP restarts only the processes whose command,
    /// flags, environment or config.json changed), through the control socket, and wait until
    /// it is over. Exit status: 0 done, 1 refused or stopped (the reason is printed), 2 no
    /// launcher answers.
    Restart,
    /// Print what a package ships beside the binary: the systemd unit, logrotate and nginx
    /// configs, the Prometheus alert rules, the Grafana dashboard
    #[command(subcommand, after_help = print::PRINT_HELP)]
    Print(Print),
}

const STATUS_HELP: &str = "\
Exit status (for scripts and health checks such as Docker's HEALTHCHECK):
  0  ready: the master and at least one tx process are ready, and it is not draining
  1  not ready, or draining (the table or JSON says why)
  2  no launcher answers on the control socket or the admin address (none there, not allowed
     to connect, or its answer can't be read)";

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("fhircluster").chain(args.iter().copied()))
            .expect("parses")
    }

    #[test]
    fn the_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_status_subcommand_takes_the_admin_address_and_data_dir_after_it() {
        let c = parse(&["status", "--admin-address", "9100", "--data-dir", "/srv/d"]);
        assert_eq!(
            c.action,
            Some(Action::Status {
                json: false,
                wide: false
            })
        );
        assert_eq!(
            parse(&["status", "--json"]).action,
            Some(Action::Status {
                json: true,
                wide: false
            })
        );
        assert_eq!(c.admin_address.as_deref(), Some("9100"));
        assert_eq!(c.data_dir.as_deref(), Some(std::path::Path::new("/srv/d")));
        assert_eq!(
            parse(&["--admin-address", "9100", "status"]).admin_address,
            c.admin_address
        );
    }

    #[test]
    fn no_flags_is_all_unset() {
        assert_eq!(parse(&[]), Cli::default());
    }

    #[test]
    fn numeric_flags_are_kept_as_text_so_the_loader_reports_bad_ones() {
        let c = parse(&["--workers=two", "--port", "-1", "--internal-port=4.5"]);
        assert_eq!(c.workers.as_deref(), Some("two"));
        assert_eq!(c.port.as_deref(), Some("-1"));
        assert_eq!(c.internal_port.as_deref(), Some("4.5"));
    }

    #[test]
    fn master_serves_tx_takes_a_value() {
        // spec: CONF-7
        assert_eq!(
            parse(&["--master-serves-tx=false"])
                .master_serves_tx
                .as_deref(),
            Some("false")
        );
        assert_eq!(
            parse(&["--master-serves-tx", "maybe"])
                .master_serves_tx
                .as_deref(),
            Some("maybe")
        );
    }

    #[test]
    fn the_rest_of_the_flags_parse() {
        let c = parse(&[
            "--data-dir",
            "/srv/d",
            "--command",
            "node --x server.js",
            "--check",
            "--demo",
        ]);
        assert_eq!(c.data_dir, Some(PathBuf::from("/srv/d")));
        assert_eq!(c.command.as_deref(), Some("node --x server.js"));
        assert!(c.check && c.demo);
        assert!(parse(&["-t"]).check, "nginx's habit");
    }

    #[test]
    fn node_flags_come_after_double_dash() {
        // spec: DEC-19
        let c = parse(&[
            "--workers",
            "2",
            "--",
            "--max-old-space-size=8192",
            "--inspect",
        ]);
        assert_eq!(c.node_flags, vec!["--max-old-space-size=8192", "--inspect"]);
        assert!(Cli::try_parse_from(["fhircluster", "--max-old-space-size=1"]).is_err());
    }

    #[test]
    fn help_lists_the_signals() {
        let help = Cli::command().render_long_help().to_string();
        for (sig, what) in crate::signals::TABLE {
            assert!(
                help.contains(sig) && help.contains(what),
                "{sig} missing from:\n{help}"
            );
        }
    }

    #[test]
    fn help_lists_the_environment_variables() {
        // The settings' variables: settings/table_tests.rs.
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("FHIRSMITH_DATA_DIR"), "{help}");
        assert!(Cli::command()
            .render_version()
            .contains(env!("CARGO_PKG_VERSION")));
    }
}
