//! `--pid-file` / `server.cluster.pidFile`: the launcher's pid in a file, for the tools that find
//! a daemon that way (systemd's `PIDFile=`, logrotate's `postrotate`, monitoring checks), as
//! Unicorn's and the Node cluster reference's `pid` file. Written as soon as the launcher knows
//! its ports are free (before the master is ready, so a long load can be signalled), whole or
//! not at all (written beside, then renamed), and removed at the launcher's end; an in-place
//! upgrade keeps it, since the pid does not change.
//!
//! A file that names a running launcher is never taken over: that is a second launcher on the
//! same data, refused at start with the pid named. One that names a dead process, or a live one
//! that is not a launcher (the pid used again after a reboot), is stale and overwritten. The
//! decision (`judge`) is pure; `claim` and `release` do the I/O.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// What the file found at start says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// No file, an empty or unreadable one, or one that is not a pid.
    Nothing,
    /// A pid, with what `/proc` says of it now: `None` when no such process runs, else its
    /// command name (`/proc/<pid>/comm`).
    Pid { pid: u32, comm: Option<String> },
}

/// What to do with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Write ours (a stale pid is replaced; ours again after an upgrade is rewritten).
    Write,
    /// Another launcher runs with this pid: the start is refused.
    Running(u32),
}

/// The command name a launcher runs under (`/proc/<pid>/comm`, at most 15 bytes).
const LAUNCHER_COMM: &str = "fhircluster";

/// Whether the file found lets this launcher (`own` pid) write it.
pub fn judge(found: &Found, own: u32) -> Verdict {
    match found {
        Found::Pid {
            pid,
            comm: Some(comm),
        } if *pid != own && comm.trim_end() == LAUNCHER_COMM => Verdict::Running(*pid),
        _ => Verdict::Write,
    }
}

/// The file's path: relative to the data directory, as `accessLogPath`.
pub fn path(data_dir: &Path, setting: &str) -> Option<PathBuf> {
    (!setting.is_empty()).then(|| data_dir.join(setting))
}

/// Reads what the file at `path` names, and what that process is now.
fn found(path: &Path) -> Found {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Found::Nothing;
    };
    let Ok(pid) = text.trim().parse::<u32>() else {
        return Found::Nothing;
    };
    if pid == 0 {
        return Found::Nothing;
    }
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok();
    Found::Pid { pid, comm }
}

/// Refuses when the file names a running launcher other than this one.
pub fn refuse_running(path: &Path) -> anyhow::Result<()> {
    if let Verdict::Running(pid) = judge(&found(path), std::process::id()) {
        anyhow::bail!(
            "server.cluster.pidFile {}: names a running launcher (pid {pid}); stop it first, or \
             give this one another pidFile and data directory",
            path.display()
        );
    }
    Ok(())
}

/// At start: refuses when the file names a running launcher, else writes this one's pid into it
/// whole (a temporary file beside it, then renamed over it). The temporary file is made anew
/// (`O_EXCL`, so never through a link planted in the directory, which may be writable by others
/// than the launcher's user) under a name no one can guess, as `tempfile` makes it.
pub fn claim(path: &Path) -> anyhow::Result<()> {
    refuse_running(path)?;
    let own = std::process::id();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map_or_else(|| "pid".into(), |n| n.to_string_lossy().into_owned());
    let written = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        // As a file created plainly would be under the usual umask: readable by the tools that
        // look for the pid.
        .permissions(std::fs::Permissions::from_mode(0o644))
        .tempfile_in(dir)
        .and_then(|mut temp| {
            writeln!(temp, "{own}")?;
            temp.as_file().sync_all()?;
            // A failed rename removes the temporary file as it is dropped.
            temp.persist(path).map_err(|e| e.error)?;
            Ok(())
        });
    if let Err(e) = written {
        anyhow::bail!(
            "server.cluster.pidFile {}: cannot be written: {e}",
            path.display()
        );
    }
    Ok(())
}

/// At the launcher's end: removes the file if it still names this launcher (another may have
/// taken it over since, after this one was thought dead).
pub fn release(path: &Path) {
    if let Found::Pid { pid, .. } = found(path) {
        if pid == std::process::id() {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pid(pid: u32, comm: Option<&str>) -> Found {
        Found::Pid {
            pid,
            comm: comm.map(str::to_string),
        }
    }

    #[test]
    fn a_running_launcher_is_never_taken_over() {
        // spec: issue 29 (a pid file)
        assert_eq!(
            judge(&pid(41, Some("fhircluster\n")), 7),
            Verdict::Running(41)
        );
    }

    #[test]
    fn a_dead_pid_an_unrelated_process_nothing_or_our_own_pid_is_written_over() {
        assert_eq!(judge(&pid(41, None), 7), Verdict::Write);
        assert_eq!(judge(&pid(41, Some("bash\n")), 7), Verdict::Write);
        assert_eq!(judge(&Found::Nothing, 7), Verdict::Write);
        // After an in-place upgrade the file names this very launcher.
        assert_eq!(judge(&pid(7, Some("fhircluster\n")), 7), Verdict::Write);
    }

    #[test]
    fn claim_writes_the_pid_whole_and_release_removes_only_our_own() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("fhircluster.pid");
        std::fs::write(&file, "not a pid").expect("write");
        claim(&file).expect("claim");
        let own = std::process::id().to_string();
        assert_eq!(std::fs::read_to_string(&file).expect("read").trim(), own);
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("dir")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left.len(), 1, "no temporary file left: {left:?}");
        // Taken over by another since: kept.
        std::fs::write(&file, "1\n").expect("write");
        release(&file);
        assert!(file.exists());
        claim(&file).expect("pid 1 is init, not a launcher");
        release(&file);
        assert!(!file.exists());
    }

    #[test]
    fn claim_never_writes_through_a_link_planted_where_its_temporary_file_could_go() {
        // spec: issue 39 (the pid file's temporary file followed a symlink)
        let dir = tempfile::tempdir().expect("dir");
        let elsewhere = tempfile::tempdir().expect("another dir");
        let target = elsewhere.path().join("precious");
        std::fs::write(&target, "precious\n").expect("write");
        let file = dir.path().join("fhircluster.pid");
        let planted = dir
            .path()
            .join(format!(".fhircluster.pid.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&target, &planted).expect("plant a link");
        claim(&file).expect("claim");
        assert_eq!(
            std::fs::read_to_string(&target).expect("read"),
            "precious\n",
            "written through the link"
        );
        let meta = std::fs::symlink_metadata(&file).expect("the pid file");
        assert!(!meta.file_type().is_symlink(), "the pid file is the link");
        let own = std::process::id().to_string();
        assert_eq!(std::fs::read_to_string(&file).expect("read").trim(), own);
        assert!(
            std::fs::symlink_metadata(&planted).is_ok(),
            "the link left alone"
        );
    }

    #[test]
    fn the_path_is_relative_to_the_data_directory_and_empty_is_none() {
        assert_eq!(path(Path::new("/d"), ""), None);
        assert_eq!(
            path(Path::new("/d"), "run/f.pid"),
            Some(PathBuf::from("/d/run/f.pid"))
        );
        assert_eq!(
            path(Path::new("/d"), "/run/f.pid"),
            Some(PathBuf::from("/run/f.pid"))
        );
    }
}
