//! `fhircluster print ...`: what a package would ship beside the binary, printed by the binary
//! itself so an operator has it wherever the binary is, and it always matches the binary: the
//! systemd unit, a logrotate config for the access log, nginx's and HAProxy's configurations,
//! Kubernetes manifests, the Prometheus alert rules and the Grafana dashboard (embedded from
//! this folder).
//!
//! The paths, ports and stop time come from the settings where they have one (the data
//! directory given with `--data-dir` or `FHIRSMITH_DATA_DIR` and its `config.json`); without a
//! data directory given, Deploy's layout (`/var/lib/fhirsmith`, defaults) is printed, so the
//! output is never tied to the directory it happened to be run in. Rendering is pure (`unit`,
//! `logrotate`, `nginx` take their inputs); `run` only gathers them.

mod haproxy;
mod hosts;
mod kubernetes;
mod logrotate;
mod nginx;
mod unit;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::cli::{Cli, Print};
use crate::settings::{self, Settings};

/// The Prometheus alert rules (`prometheus.yml`'s `rule_files:`).
pub const ALERTS: &str = include_str!("fhircluster-alerts.yml");
/// The Grafana dashboard (Dashboards > New > Import).
pub const DASHBOARD: &str = include_str!("fhircluster-dashboard.json");

pub(crate) use crate::cli::print::DEFAULT_DATA_DIR;
/// Prints `what` on stdout: exit 0, or 1 with one line on stderr when the settings are bad.
pub(crate) fn run(cli: &Cli, what: &Print) -> ExitCode {
    let text = match what {
        Print::Alerts => ALERTS.to_string(),
        Print::Dashboard => DASHBOARD.to_string(),
        other => match settings_for_print(cli).and_then(|(s, given)| match other {
            // The data directory's config.json goes into the manifests as it is.
            Print::Kubernetes { .. } => {
                let config = if given {
                    config_text(&s.data_dir.join("config.json"))?
                } else {
                    None
                };
                kubernetes(other, &s, config.as_deref())
            }
            _ => render(other, &s),
        }) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("fhircluster print: {e:#}");
                return ExitCode::from(1);
            }
        },
    };
    crate::ops::stdout::emit_then("print", &text, ExitCode::SUCCESS)
}

/// The file a subcommand prints, from settings already loaded; or why a value can't go in it.
fn render(what: &Print, s: &Settings) -> anyhow::Result<String> {
    let data_dir = absolute(&s.data_dir);
    Ok(match what {
        Print::SystemdUnit {
            user,
            working_directory,
            memory_max,
        } => {
            let exe =
                std::env::current_exe().unwrap_or_else(|_| "/usr/local/bin/fhircluster".into());
            let working_directory = absolute(working_directory);
            check_name("--user", user)?;
            if let Some(max) = memory_max.as_deref().filter(|m| !unit::valid_memory_max(m)) {
                anyhow::bail!(
                    "--memory-max {max:?}: give systemd's MemoryMax=, e.g. 16G, 512M, 80% or \
                     infinity"
                );
            }
            // What the launcher makes or renames in place, each in its directory.
            let files: Vec<PathBuf> = [
                s.control_socket_path(),
                crate::ops::pid_file::path(&data_dir, &s.cluster.pid_file),
                (!s.cluster.access_log_path.is_empty())
                    .then(|| logrotate::access_log_file(&data_dir, &s.cluster.access_log_path)),
            ]
            .into_iter()
            .flatten()
            .map(|f| absolute(&f))
            .collect();
            let writable = unit::writable_dirs(&data_dir, &files);
            for (what, path) in [
                ("the binary's path", &exe),
                ("--working-directory", &working_directory),
            ]
            .into_iter()
            .chain(writable.iter().map(|d| ("a directory it writes", d)))
            {
                check_path(what, path)?;
            }
            unit::render(&unit::Unit {
                exe,
                user,
                working_directory: &working_directory,
                data_dir: &data_dir,
                writable: &writable,
                memory_max: memory_max.as_deref(),
                longest_secs: unit::longest_stop(s).as_secs_f64().ceil() as u64,
                stop_secs: unit::timeout_stop_secs(s),
            })
        }
        Print::Logrotate { user } => {
            check_name("--user", user)?;
            let file = logrotate::access_log_file(&data_dir, &s.cluster.access_log_path);
            check_path("the access log's path", &file)?;
            logrotate::render(&file, user, s.cluster.access_log_path.is_empty())
        }
        Print::Nginx {
            listen,
            server_name,
            hosts,
        } => {
            if listen.is_empty() || listen.chars().any(|c| c.is_control() || ";{}#".contains(c)) {
                anyhow::bail!(
                    "--listen {listen:?}: give nginx's listen arguments, e.g. 80 or \"443 ssl\""
                );
            }
            let name = server_name.as_deref().unwrap_or(nginx::NO_NAME);
            if name.is_empty()
                || name
                    .chars()
                    .any(|c| c.is_whitespace() || c.is_control() || ";{}#'\"\\$".contains(c))
            {
                anyhow::bail!(
                    "--server-name {name:?}: give the one name clients use, e.g. fhir.example.org"
                );
            }
            if hosts.host.is_empty() {
                nginx::render(listen, name, &nginx::upstream(s))
            } else {
                let hosts = hosts::parse(&hosts.host, hosts.master_host.as_deref(), s)
                    .map_err(anyhow::Error::msg)?;
                nginx::render_many(listen, name, &hosts, &endpoints(s), &s.tx.instance_code)
            }
        }
        Print::Haproxy { listen, hosts } => {
            if listen.is_empty() || listen.chars().any(|c| c.is_control() || c == '#') {
                anyhow::bail!(
                    "--listen {listen:?}: give HAProxy's bind arguments, e.g. :80 or \":443 ssl crt /etc/haproxy/site.pem\""
                );
            }
            let hosts = if hosts.host.is_empty() {
                this_host(s)
            } else {
                hosts::parse(&hosts.host, hosts.master_host.as_deref(), s)
                    .map_err(anyhow::Error::msg)?
            };
            haproxy::check(&hosts).map_err(anyhow::Error::msg)?;
            haproxy::render(&haproxy::Farm {
                listen,
                hosts: &hosts,
                endpoints: &endpoints(s),
                master_code: &s.tx.instance_code,
            })
        }
        Print::Kubernetes { .. } => kubernetes(what, s, None)?,
        Print::Alerts => ALERTS.to_string(),
        Print::Dashboard => DASHBOARD.to_string(),
    })
}

/// A config.json's text, `None` when there is none (the manifests then hold a placeholder).
fn config_text(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow::anyhow!("{}: {e}", path.display())),
    }
}

/// The admin address's port in the pods (the probes'): the settings', else README's 9100.
const POD_ADMIN_PORT: u16 = 9100;

/// `print kubernetes`'s manifests from the settings, its options and config.json's text.
fn kubernetes(what: &Print, s: &Settings, config_json: Option<&str>) -> anyhow::Result<String> {
    let Print::Kubernetes {
        image,
        replicas,
        memory_limit,
        storage,
        namespace,
        resolver,
    } = what
    else {
        anyhow::bail!("not print kubernetes");
    };
    if image.is_empty() || image.chars().any(|c| c.is_whitespace() || c.is_control()) {
        anyhow::bail!(
            "--image {image:?}: give the image's name, e.g. registry.example.org/fhirsmith:1"
        );
    }
    for (flag, size) in [("--memory-limit", memory_limit), ("--storage", storage)] {
        anyhow::ensure!(
            kubernetes::valid_quantity(size),
            "{flag} {size:?}: give a Kubernetes quantity, e.g. 16Gi or 512Mi"
        );
    }
    anyhow::ensure!(
        kubernetes::valid_label(namespace),
        "--namespace {namespace:?}: a namespace's name is lowercase letters, digits and -"
    );
    anyhow::ensure!(
        !resolver.is_empty()
            && resolver
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c)),
        "--resolver {resolver:?}: give a DNS server's name or address"
    );
    Ok(kubernetes::render(&kubernetes::Cluster {
        name: kubernetes::NAME,
        namespace,
        image,
        replicas: *replicas,
        memory_limit,
        storage,
        resolver,
        port: s.port,
        admin_port: s.cluster.admin_address.map_or(POD_ADMIN_PORT, |a| a.port()),
        grace_secs: unit::timeout_stop_secs(s),
        lame_duck_secs: s.cluster.lame_duck.as_secs(),
        endpoints: &endpoints(s),
        master_code: &s.tx.instance_code,
        config_json,
    }))
}

/// The tx endpoints the balancer routes as such: the settings', or FHIRsmith's usual `/r4` when
/// none are set (Deploy's layout, printed without a config.json).
fn endpoints(s: &Settings) -> Vec<String> {
    if s.tx.endpoints.is_empty() {
        vec!["/r4".to_string()]
    } else {
        s.tx.endpoints.clone()
    }
}

/// The one host `print haproxy` names without `--host`: this one, from its settings.
fn this_host(s: &Settings) -> hosts::Hosts {
    hosts::Hosts {
        hosts: vec![hosts::Host {
            prefix: s.cluster.host_prefix.clone(),
            addr: nginx::upstream(s).to_string(),
            admin: s.cluster.admin_address.map(|a| a.port()),
            agent: s.cluster.agent_address.map(|a| a.port()),
        }],
        master: 0,
    }
}

/// A user name as useradd takes it: letters, digits, `_`, `-`, `.`; so it goes into a unit or
/// a logrotate `su` line as one word.
fn check_name(flag: &str, name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    anyhow::ensure!(
        ok,
        "{flag} {name:?} is not a user name (letters, digits, _ - .)"
    );
    Ok(())
}

/// A path that goes into a unit or logrotate file as written: no whitespace, quotes, `%`
/// (systemd's specifiers), `\` or control characters, which each file would read otherwise.
fn check_path(what: &str, path: &Path) -> anyhow::Result<()> {
    let text = path
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("{what} {} is not UTF-8", path.display()))?;
    let bad = text
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || "\"'%\\".contains(*c));
    if let Some(c) = bad {
        anyhow::bail!("{what} {text:?} has {c:?}, which the printed file can't carry as written: use a path without it");
    }
    Ok(())
}

/// The settings of the data directory given; when none is, Deploy's layout's directory and
/// no config.json (the flags and environment still count: `--port 8080 print nginx`).
/// Whether a data directory was given comes with them.
fn settings_for_print(cli: &Cli) -> anyhow::Result<(Settings, bool)> {
    let env = |key: &str| std::env::var(key).ok();
    match settings::data_dir(cli, &env).1 {
        Some(_) => Ok((settings::load(cli)?, true)),
        None => Ok((
            Settings {
                data_dir: PathBuf::from(DEFAULT_DATA_DIR),
                ..settings::from_sources(cli, &env, None)?
            },
            false,
        )),
    }
}

/// `dir` from the current directory when relative: a unit or logrotate file runs elsewhere.
fn absolute(dir: &Path) -> PathBuf {
    if dir.is_absolute() {
        return dir.to_path_buf();
    }
    let joined = std::env::current_dir().map_or_else(|_| dir.to_path_buf(), |c| c.join(dir));
    // `./x` and `x/.` would read oddly in a unit; the components without `.` say the same.
    joined
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::print::DEFAULT_WORKING_DIR;

    #[test]
    fn without_a_data_dir_deploys_layout_is_printed() {
        let s = settings_for_print(&Cli::default());
        // FHIRSMITH_DATA_DIR may be set where the tests run; only the unset case is Deploy's.
        if std::env::var_os("FHIRSMITH_DATA_DIR").is_none() {
            assert_eq!(
                s.expect("defaults").0.data_dir,
                PathBuf::from(DEFAULT_DATA_DIR)
            );
        }
    }

    #[test]
    fn values_the_files_cant_carry_are_refused_with_a_reason() {
        assert!(check_name("--user", "fhirsmith").is_ok());
        for bad in ["", "a b", "-x", "a\nExecStartPre=/bin/sh", "r%oot"] {
            assert!(check_name("--user", bad).is_err(), "{bad:?}");
        }
        assert!(check_path("p", Path::new("/var/lib/fhirsmith")).is_ok());
        for bad in ["/a b", "/a%h", "/a\"b", "/a\nb", "/a\\b"] {
            let e = check_path("p", Path::new(bad)).expect_err(bad).to_string();
            assert!(e.contains("can't carry"), "{e}");
        }
        let s = Settings::default();
        let nginx = |listen: &str, name: &str| {
            render(
                &Print::Nginx {
                    listen: listen.into(),
                    server_name: Some(name.into()),
                    hosts: Default::default(),
                },
                &s,
            )
        };
        assert!(nginx("443 ssl", "fhir.example.org").is_ok());
        assert!(nginx("80; include /etc/passwd", "x").is_err());
        for bad in ["", "a b", "x; include /etc/passwd", "a{", "$host"] {
            assert!(nginx("80", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn print_kubernetes_refuses_what_the_manifests_cant_carry() {
        let s = Settings::default();
        let print = |image: &str, memory: &str, namespace: &str| {
            kubernetes(
                &Print::Kubernetes {
                    image: image.into(),
                    replicas: 2,
                    memory_limit: memory.into(),
                    storage: "10Gi".into(),
                    namespace: namespace.into(),
                    resolver: "kube-dns.kube-system.svc.cluster.local".into(),
                },
                &s,
                None,
            )
        };
        let ok = print("r/f:1", "8Gi", "fhir").expect("prints");
        assert!(ok.contains("          image: \"r/f:1\"\n"), "{ok}");
        let e = |r: anyhow::Result<String>| r.expect_err("refused").to_string();
        assert!(e(print("r/f 1", "8Gi", "fhir")).contains("--image"));
        assert!(e(print("r/f:1", "80%", "fhir")).contains("--memory-limit"));
        assert!(e(print("r/f:1", "8Gi", "Fhir")).contains("--namespace"));
        let dir = tempfile::tempdir().expect("dir");
        assert_eq!(
            config_text(&dir.path().join("config.json")).ok(),
            Some(None)
        );
        assert!(config_text(dir.path()).is_err(), "a directory is no file");
    }

    #[test]
    fn relative_paths_are_made_absolute_without_dots() {
        let p = absolute(Path::new("./data/."));
        assert!(p.is_absolute() && p.ends_with("data"), "{p:?}");
        assert_eq!(absolute(Path::new("/srv/d")), PathBuf::from("/srv/d"));
    }

    #[test]
    fn help_lists_print_and_print_help_lists_what_it_prints() {
        use clap::CommandFactory;
        let mut cli = Cli::command();
        let help = cli.render_long_help().to_string();
        assert!(help.contains("print "), "{help}");
        let print = cli.find_subcommand_mut("print").expect("print");
        let help = print.render_long_help().to_string();
        for what in [
            "systemd-unit",
            "logrotate",
            "nginx",
            "haproxy",
            "kubernetes",
            "alerts",
            "dashboard",
        ] {
            assert!(help.contains(what), "{what} missing from:\n{help}");
        }
    }

    #[test]
    fn print_help_gives_one_default_data_directory() {
        use clap::CommandFactory;
        let mut cli = Cli::command();
        cli.build();
        let print = cli.find_subcommand_mut("print").expect("print");
        let help = print.render_long_help().to_string();
        assert!(help.contains(DEFAULT_DATA_DIR), "{help}");
        assert!(!help.contains("[default: .]"), "{help}");
    }

    #[test]
    fn print_takes_its_subcommands_and_their_flags() {
        use clap::Parser;
        let c = Cli::try_parse_from(["fhircluster", "print", "systemd-unit", "--user", "u"])
            .expect("parses");
        assert_eq!(
            c.action,
            Some(crate::cli::Action::Print(Print::SystemdUnit {
                user: "u".into(),
                working_directory: DEFAULT_WORKING_DIR.into(),
                memory_max: None,
            }))
        );
        assert!(Cli::try_parse_from(["fhircluster", "print", "recipes"]).is_err());
    }
}
