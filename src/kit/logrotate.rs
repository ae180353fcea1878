//! The logrotate config `fhircluster print logrotate` prints, for the access log
//! (`server.cluster.accessLogPath`). logrotate renames the file, then the launcher reopens its
//! path on `SIGUSR1` and writes on in a new file: no line is lost (lines written between the
//! rename and the reopen go to the renamed file, which `delaycompress` leaves uncompressed until
//! the next rotation) and none is torn (each line is one write). The signal goes to the launcher
//! alone (`--kill-whom=main`): Node servers read `SIGUSR1` as "start the inspector".

use std::path::{Path, PathBuf};

/// The access log's file: `accessLogPath` from the data directory, or `access.log` there when
/// it is not set (the config then says how to set it).
pub(super) fn access_log_file(data_dir: &Path, access_log_path: &str) -> PathBuf {
    let name = if access_log_path.is_empty() {
        "access.log"
    } else {
        access_log_path
    };
    data_dir.join(name)
}

/// The config's text; `unset`: `accessLogPath` is not set, so the log is on stderr until it is.
pub(super) fn render(file: &Path, user: &str, unset: bool) -> String {
    let note = if unset {
        "# accessLogPath is not set, so the access log goes to stderr (the journal) and this file is\n\
         # not written: set \"accessLog\": \"text\" and \"accessLogPath\": \"access.log\" under\n\
         # server.cluster in config.json, then reload.\n"
    } else {
        ""
    };
    format!(
        "\
# logrotate for fhircluster's access log, as printed by `fhircluster print logrotate`. Install:
#   fhircluster print logrotate > /etc/logrotate.d/fhircluster
{note}{file} {{
    daily
    rotate 14
    maxsize 500M
    missingok
    notifempty
    compress
    # Lines written between the rename and the reopen are in the newest rotated file.
    delaycompress
    su {user} {user}
    create 0640 {user} {user}
    sharedscripts
    postrotate
        # The launcher reopens accessLogPath on SIGUSR1; the servers must not get it.
        systemctl kill --kill-whom=main --signal=USR1 fhircluster.service
    endscript
}}
",
        file = file.display(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_is_access_log_path_in_the_data_directory() {
        let d = Path::new("/var/lib/fhirsmith");
        assert_eq!(access_log_file(d, ""), d.join("access.log"));
        assert_eq!(access_log_file(d, "logs/a.log"), d.join("logs/a.log"));
        assert_eq!(
            access_log_file(d, "/var/log/fhir/a.log"),
            PathBuf::from("/var/log/fhir/a.log")
        );
    }

    #[test]
    fn the_config_reopens_through_the_launcher_alone_and_says_when_the_log_is_off() {
        let text = render(Path::new("/d/access.log"), "fhir", false);
        assert!(text.contains("\n/d/access.log {\n"), "{text}");
        assert!(text.contains("--kill-whom=main --signal=USR1"), "{text}");
        assert!(text.contains("su fhir fhir"), "{text}");
        assert!(!text.contains("accessLogPath is not set"));
        assert!(render(Path::new("/d/access.log"), "fhir", true).contains("is not set"));
    }
}
