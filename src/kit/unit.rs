//! The systemd unit `fhircluster print systemd-unit` prints: `Type=notify` (the launcher says
//! `READY=1` once clients can be served), `KillMode=mixed` (`SIGTERM` to the launcher alone,
//! which stops the workers before the master), `ExecReload=` sending `SIGHUP`, and a
//! `TimeoutStopSec=` longer than the settings' longest orderly stop (STOP-10), so systemd never
//! `SIGKILL`s a stop that is still going in order. README's "Under systemd" explains each key.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::settings::Settings;

/// What the unit is made of.
pub(super) struct Unit<'a> {
    /// The launcher's executable (`ExecStart=`): the binary printing the unit.
    pub exe: std::path::PathBuf,
    pub user: &'a str,
    /// Where the servers' code is (`server.js`): they run in the launcher's directory.
    pub working_directory: &'a Path,
    pub data_dir: &'a Path,
    /// The directories the launcher and its processes write (`ReadWritePaths=`): the data
    /// directory first, then those of the control socket, pid file and access log outside it.
    pub writable: &'a [PathBuf],
    /// `MemoryMax=`, when the operator names one (`--memory-max`).
    pub memory_max: Option<&'a str>,
    /// The settings' longest orderly stop, in seconds, and `TimeoutStopSec=`.
    pub longest_secs: u64,
    pub stop_secs: u64,
}

/// The unit's `RuntimeDirectory=`, the service user's and writable already.
const RUNTIME_DIR: &str = "/run/fhircluster";

/// The directories to write in: `data_dir`, then the directory of each of `files` (the control
/// socket, the pid file, the access log: each made or renamed in its directory) not already in
/// one listed nor in the runtime directory, in order, each once.
pub(super) fn writable_dirs(data_dir: &Path, files: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs = vec![data_dir.to_path_buf()];
    for dir in files.iter().filter_map(|f| f.parent()) {
        if !dirs.iter().any(|d| dir.starts_with(d)) && !dir.starts_with(RUNTIME_DIR) {
            dirs.push(dir.to_path_buf());
        }
    }
    dirs
}

/// `ProtectHome=`: `yes` (home directories out of sight) unless the code or a directory it
/// writes is in one, which must then stay visible: `read-only` (`ReadWritePaths=` still applies).
fn protect_home(paths: &[&Path]) -> &'static str {
    let home = |p: &&Path| {
        ["/home", "/root", "/run/user"]
            .iter()
            .any(|h| p.starts_with(h))
    };
    if paths.iter().any(home) {
        "read-only"
    } else {
        "yes"
    }
}

/// `PrivateTmp=`: `yes` (a /tmp of the service's own) unless the code or a directory it writes
/// is in the host's /tmp, which it must then see.
fn private_tmp(paths: &[&Path]) -> &'static str {
    if paths
        .iter()
        .any(|p| p.starts_with("/tmp") || p.starts_with("/var/tmp"))
    {
        "no"
    } else {
        "yes"
    }
}

/// `--memory-max` as systemd reads `MemoryMax=`: bytes with an optional `K`, `M`, `G` or `T`
/// (1024-based), a percentage of the host's memory, or `infinity`.
pub(super) fn valid_memory_max(text: &str) -> bool {
    let number = |n: &str| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit() || c == '.');
    text == "infinity"
        || text.strip_suffix('%').is_some_and(number)
        || number(text.trim_end_matches(['K', 'M', 'G', 'T']))
            && text.len() - text.trim_end_matches(['K', 'M', 'G', 'T']).len() <= 1
}

/// What a stop may take beyond its phases' sum (the processes' own exit, the journal): measured
/// at well under a second (tests/ops_systemd.rs); 25 s leaves room on a loaded host.
const STOP_MARGIN: Duration = Duration::from_secs(25);

/// The longest orderly stop (STOP-10): the lame duck (DEC-88), the drain, the workers' `SIGTERM`
/// to `SIGKILL`, their last counts, then the master's `SIGTERM` to `SIGKILL`.
pub(crate) fn longest_stop(s: &Settings) -> Duration {
    let c = &s.cluster;
    c.lame_duck + c.drain + c.kill_after + crate::supervisor::lifecycle::COUNTS_WAIT + c.kill_after
}

/// `TimeoutStopSec=`: the longest stop and a margin, rounded up to a half minute (120 s for the
/// defaults' 95 s).
pub(super) fn timeout_stop_secs(s: &Settings) -> u64 {
    let secs = (longest_stop(s) + STOP_MARGIN).as_secs_f64().ceil() as u64;
    secs.div_ceil(30) * 30
}

/// The unit file's text.
pub(super) fn render(u: &Unit<'_>) -> String {
    let memory = match u.memory_max {
        Some(max) => format!(
            "# The launcher and every process share this cgroup and its limit (--memory-max): the\n\
             # launcher sizes the workers and its memory meter against it.\nMemoryMax={max}\n"
        ),
        None => "# No memory limit: the launcher sizes the workers against the host's memory. To give\n\
                 # the service a share of its own (the workers are then sized against it), print the\n\
                 # unit again with --memory-max (e.g. --memory-max 16G), or add MemoryMax= with\n\
                 # `systemctl edit fhircluster`.\n"
            .to_string(),
    };
    // The data directory must exist; another is ignored while missing (`-`), so a start is not
    // refused for it before the launcher can say which file it could not make there.
    let writable: Vec<String> = u
        .writable
        .iter()
        .enumerate()
        .map(|(i, d)| format!("{}{}", if i == 0 { "" } else { "-" }, d.display()))
        .collect();
    let mut visible: Vec<&Path> = vec![u.working_directory];
    visible.extend(u.writable.iter().map(PathBuf::as_path));
    format!(
        "\
# fhircluster's systemd unit, as printed by `fhircluster print systemd-unit`. Install:
#   fhircluster print systemd-unit > /etc/systemd/system/fhircluster.service
#   systemctl daemon-reload && systemctl enable --now fhircluster
[Unit]
Description=FHIRsmith (fhircluster: a master and tx-workers)
After=network-online.target
Wants=network-online.target

[Service]
Type=notify
NotifyAccess=main
User={user}
WorkingDirectory={wd}
Environment=FHIRSMITH_DATA_DIR={data}
ExecStart={exe}
# systemctl reload: read config.json again, restart the processes one at a time.
ExecReload=/bin/kill -HUP $MAINPID
# The launcher alone gets SIGTERM; it drains, then stops its processes in order. Whatever is
# left when TimeoutStopSec runs out gets SIGKILL.
KillMode=mixed
# The longest orderly stop with these settings, {longest} s (drainSeconds + killSeconds for
# the workers + their last counts + killSeconds for the master), and a margin.
TimeoutStopSec={stop}s
# The master loads its terminology before READY=1 (the launcher extends this while it loads).
TimeoutStartSec=10min
WatchdogSec=30s
{memory}# Each client connection and each connection to a process takes a descriptor: the launcher
# raises its soft limit to this hard one at start. Raise it for more clients.
LimitNOFILE=524288
Restart=on-failure
RestartSec=5s

# Hardening (systemd-analyze security rates it about 2). What the launcher and node need stays:
# node's JIT writes and runs code in memory (no MemoryDenyWriteExecute=), and the launcher reads
# /proc/meminfo, /proc/net/tcp*, the processes' /proc/<pid> and the cgroup files (no
# ProcSubset=pid, no ProtectProc=invisible).
# The file system is read-only but for the data directory (config.json, the servers' files, the
# control socket) and the directories of the pid file, control socket and access log, when the
# settings put them elsewhere; a server that writes anywhere else needs a ReadWritePaths= line
# for it. /tmp is private to the service (unless the code or data is in it); /run/fhircluster
# (RuntimeDirectory=) is the service user's, for a pid file
# (--pid-file /run/fhircluster/fhircluster.pid).
ProtectSystem=strict
ReadWritePaths={writable}
RuntimeDirectory={runtime}
ProtectHome={home}
PrivateTmp={tmp}
PrivateDevices=yes
PrivateMounts=yes
# No privileges at all: server.port and adminAddress above 1023 (a lower port: give
# AmbientCapabilities=CAP_NET_BIND_SERVICE and CapabilityBoundingSet=CAP_NET_BIND_SERVICE).
NoNewPrivileges=yes
CapabilityBoundingSet=
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
RemoveIPC=yes
# TCP for the clients and processes, Unix sockets for the control socket, the processes'
# channels and the journal, netlink for node's view of the network interfaces.
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK
SystemCallArchitectures=native
# A system service's calls (chown is among them: the control socket's controlGroup); any other
# fails with EPERM rather than killing the process (node probes io_uring and memory protection
# keys, and does without them when refused).
SystemCallFilter=@system-service
SystemCallErrorNumber=EPERM
# Files the service makes: not for other users (the control socket sets its own mode, 0660).
UMask=0027

[Install]
WantedBy=multi-user.target
",
        user = u.user,
        wd = u.working_directory.display(),
        data = u.data_dir.display(),
        exe = u.exe.display(),
        longest = u.longest_secs,
        stop = u.stop_secs,
        writable = writable.join(" "),
        home = protect_home(&visible),
        tmp = private_tmp(&visible),
        runtime = RUNTIME_DIR.trim_start_matches("/run/"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_timeout_covers_the_longest_stop_of_the_settings() {
        // spec: STOP-10
        let mut s = Settings::default();
        assert_eq!(longest_stop(&s), Duration::from_secs(95));
        assert_eq!(timeout_stop_secs(&s), 120);
        s.cluster.drain = Duration::from_secs(300);
        // 300 + 30 + 5 + 30 = 365 s, and the margin.
        assert_eq!(longest_stop(&s), Duration::from_secs(365));
        assert_eq!(timeout_stop_secs(&s), 390);
        s.cluster.kill_after = Duration::from_secs(31);
        assert_eq!(timeout_stop_secs(&s), 420, "rounded up to a half minute");
    }

    #[test]
    fn the_stop_timeout_counts_the_lame_duck() {
        // spec: DEC-88, STOP-10
        let mut s = Settings::default();
        s.cluster.lame_duck = Duration::from_secs(20);
        // 20 + 30 + 30 + 5 + 30 = 115 s, and the margin: 140, rounded up to 150.
        assert_eq!(longest_stop(&s), Duration::from_secs(115));
        assert_eq!(timeout_stop_secs(&s), 150);
    }

    #[test]
    fn the_unit_names_the_paths_and_user_it_is_given() {
        let writable = writable_dirs(Path::new("/srv/data"), &[]);
        let text = render(&Unit {
            exe: "/usr/bin/fhircluster".into(),
            user: "fhir",
            working_directory: Path::new("/srv/code"),
            data_dir: Path::new("/srv/data"),
            writable: &writable,
            memory_max: None,
            longest_secs: 95,
            stop_secs: 120,
        });
        for line in [
            "\nUser=fhir\n",
            "\nWorkingDirectory=/srv/code\n",
            "\nEnvironment=FHIRSMITH_DATA_DIR=/srv/data\n",
            "\nExecStart=/usr/bin/fhircluster\n",
            "\nTimeoutStopSec=120s\n",
            "\nType=notify\n",
            "\nKillMode=mixed\n",
            "\nReadWritePaths=/srv/data\n",
            "\nProtectHome=yes\n",
        ] {
            assert!(text.contains(line), "{line:?} in:\n{text}");
        }
        assert!(!text.contains("\nMemoryMax="), "{text}");
    }

    #[test]
    fn the_directories_written_are_the_data_directory_and_those_outside_it_and_stay_visible() {
        let files: Vec<PathBuf> = [
            "/d/fhircluster.sock",
            "/run/fhircluster/x.pid",
            "/var/log/f/a.log",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        let dirs = writable_dirs(Path::new("/d"), &files);
        assert_eq!(dirs, ["/d", "/var/log/f"].map(PathBuf::from));
        let unit = render(&Unit {
            exe: "/usr/bin/fhircluster".into(),
            user: "fhir",
            working_directory: Path::new("/srv/code"),
            data_dir: Path::new("/d"),
            writable: &dirs,
            memory_max: Some("8G"),
            longest_secs: 95,
            stop_secs: 120,
        });
        assert!(unit.contains("\nReadWritePaths=/d -/var/log/f\n"), "{unit}");
        assert!(unit.contains("\nRuntimeDirectory=fhircluster\n"), "{unit}");
        assert!(unit.contains("\nMemoryMax=8G\n"), "{unit}");
        assert_eq!(protect_home(&[Path::new("/opt/f"), Path::new("/d")]), "yes");
        assert_eq!(
            protect_home(&[Path::new("/home/u/f"), Path::new("/d")]),
            "read-only"
        );
        assert_eq!(private_tmp(&[Path::new("/opt/f"), Path::new("/d")]), "yes");
        assert_eq!(
            private_tmp(&[Path::new("/opt/f"), Path::new("/tmp/d")]),
            "no"
        );
    }

    #[test]
    fn a_memory_limit_is_what_systemd_reads() {
        for ok in ["16G", "512M", "1073741824", "80%", "infinity", "1.5G"] {
            assert!(valid_memory_max(ok), "{ok}");
        }
        for bad in [
            "",
            "G",
            "16 G",
            "16GG",
            "lots",
            "16G\nUser=root",
            "-1G",
            "%",
        ] {
            assert!(!valid_memory_max(bad), "{bad:?}");
        }
    }
}
