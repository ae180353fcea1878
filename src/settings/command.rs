//! The server's command (`server.cluster.command`, `--command`): what the launcher runs for the
//! master and every worker. Checked at start so a missing `node` is one clear line, not N+1
//! failed spawns and a restart loop.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::error::{quote, SettingsError};
use super::Settings;

/// The command's program exists and is executable: a path (containing `/`, relative to `cwd`),
/// or a name found on `PATH`.
pub fn check_command(s: &Settings, cwd: &Path) -> Result<(), SettingsError> {
    let path_var = std::env::var_os("PATH");
    check_command_with(s, cwd, path_var.as_deref())
}

/// [`check_command`] with an explicit `PATH`, so tests read no environment.
pub fn check_command_with(
    s: &Settings,
    cwd: &Path,
    path_var: Option<&OsStr>,
) -> Result<(), SettingsError> {
    let Some(program) = s.command.first().filter(|p| !p.is_empty()) else {
        return Err(SettingsError::invalid(
            "server.cluster.command",
            "[]",
            None,
            "must name a program, then its arguments",
        ));
    };
    find_program(program, cwd, path_var)
        .map(|_| ())
        .map_err(|why| SettingsError::invalid("server.cluster.command", quote(program), None, why))
}

/// Where `program` is, or why it can't be run.
pub fn find_program(
    program: &str,
    cwd: &Path,
    path_var: Option<&OsStr>,
) -> Result<PathBuf, String> {
    if program.contains('/') {
        let path = cwd.join(program);
        return if !path.exists() {
            Err(format!("program {} does not exist", path.display()))
        } else if !is_executable(&path) {
            Err(format!(
                "program {} is not an executable file",
                path.display()
            ))
        } else {
            Ok(path)
        };
    }
    let dirs = path_var.map(std::env::split_paths).into_iter().flatten();
    for dir in dirs {
        // An empty PATH entry means the working directory, as in a shell.
        let candidate = cwd.join(dir).join(program);
        if is_executable(&candidate) {
            return Ok(candidate);
        }
    }
    Err(format!(
        "program {program} is not found on PATH (install it, or give its path)"
    ))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn with_command(cmd: &[&str]) -> Settings {
        Settings {
            command: cmd.iter().map(|c| c.to_string()).collect(),
            ..Settings::default()
        }
    }

    fn make_file(dir: &Path, name: &str, mode: u32) {
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_program_on_path_or_at_a_path_is_found() {
        let dir = tempfile::tempdir().unwrap();
        make_file(dir.path(), "fakenode", 0o755);
        let bin = dir.path().as_os_str();
        assert_eq!(
            check_command_with(
                &with_command(&["fakenode", "server.js"]),
                Path::new("/"),
                Some(bin)
            ),
            Ok(())
        );
        assert_eq!(
            check_command_with(&with_command(&["./fakenode"]), dir.path(), None),
            Ok(())
        );
        let abs = dir.path().join("fakenode");
        assert_eq!(
            check_command_with(
                &with_command(&[abs.to_str().unwrap()]),
                Path::new("/"),
                None
            ),
            Ok(())
        );
    }

    #[test]
    fn a_missing_or_non_executable_program_names_the_setting_and_program() {
        let dir = tempfile::tempdir().unwrap();
        make_file(dir.path(), "plain", 0o644);
        let bin = dir.path().as_os_str();
        let e =
            check_command_with(&with_command(&["nosuchnode"]), dir.path(), Some(bin)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("server.cluster.command = \"nosuchnode\""),
            "{e}"
        );
        assert!(e.to_string().contains("not found on PATH"), "{e}");
        let e = check_command_with(&with_command(&["plain"]), dir.path(), Some(bin)).unwrap_err();
        assert!(e.to_string().contains("not found on PATH"), "{e}");
        let e = check_command_with(&with_command(&["./plain"]), dir.path(), None).unwrap_err();
        assert!(e.to_string().contains("not an executable file"), "{e}");
        let e = check_command_with(&with_command(&["./gone"]), dir.path(), None).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        let e = check_command_with(&with_command(&[]), dir.path(), None).unwrap_err();
        assert_eq!(e.setting(), "server.cluster.command");
    }

    #[test]
    fn a_directory_is_not_a_program() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("node")).unwrap();
        let bin = dir.path().as_os_str();
        assert!(check_command_with(&with_command(&["node"]), dir.path(), Some(bin)).is_err());
    }
}
