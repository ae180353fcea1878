//! The systemd unit `fhircluster print systemd-unit` prints: `Type=notify` (the launcher says
//! `READY=1` once clients can be served), `KillMode=mixed` (`SIGTERM` to the launcher alone,
//! which stops the workers before the master), `ExecReload=` sending `SIGHUP`, and a
//! `TimeoutStopSec=` longer than the settings' longest orderly stop (STOP-10), so systemd never
//! `SIGKILL`s a stop that is still going in order. README's "Under systemd" explains each key.

use std::path::Path;
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
    /// The settings' longest orderly stop, in seconds, and `TimeoutStopSec=`.
    pub longest_secs: u64,
    pub stop_secs: u64,
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
# The launcher and every process share this cgroup and its limit: this machine's share for them.
MemoryMax=16G
Restart=on-failure
RestartSec=5s

[Install]
WantedBy=multi-user.target
",
        user = u.user,
        wd = u.working_directory.display(),
        data = u.data_dir.display(),
        exe = u.exe.display(),
        longest = u.longest_secs,
        stop = u.stop_secs,
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
        let text = render(&Unit {
            exe: "/usr/bin/fhircluster".into(),
            user: "fhir",
            working_directory: Path::new("/srv/code"),
            data_dir: Path::new("/srv/data"),
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
        ] {
            assert!(text.contains(line), "{line:?} in:\n{text}");
        }
    }
}
