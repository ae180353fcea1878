//! The server's command (`server.cluster.command`, `--command`): what the launcher runs for the
//! master and every worker. Checked by `--check` and at start, before anything starts, so a
//! missing `node` or `server.js` is one clear line, not N+1 failed spawns and a master that
//! exits `maxStartFailures` times (31 s) before the launcher gives up.
//!
//! The program must resolve (a path, relative to the working directory, or a name on `PATH`)
//! to an executable file. When it is `node`, the script it would run (its first argument that is
//! neither an option nor an option's value) must exist as node would find it: the path itself,
//! or with `.js`, `.mjs`, `.cjs`, `.json` or `.node` added, or a directory.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::error::{quote, SettingsError};
use super::Settings;

const SETTING: &str = super::paths::command;

/// The command's program exists and is executable: a path (containing `/`, relative to `cwd`),
/// or a name found on `PATH`; for `node`, its script exists in `cwd`.
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
    let from = Some(s.sources.of(SETTING));
    let Some((program, args)) = s.command.split_first().filter(|(p, _)| !p.is_empty()) else {
        return Err(SettingsError::invalid(
            SETTING,
            "[]",
            from,
            "must name a program, then its arguments",
        ));
    };
    find_program(program, cwd, path_var)
        .map_err(|why| SettingsError::invalid(SETTING, quote(program), from.clone(), why))?;
    let is_node = matches!(
        Path::new(program).file_name().and_then(OsStr::to_str),
        Some("node" | "nodejs")
    );
    let Some(script) = node_script(args).filter(|_| is_node) else {
        return Ok(());
    };
    if node_finds(&cwd.join(script)) {
        return Ok(());
    }
    Err(SettingsError::invalid(
        SETTING,
        serde_json::to_string(&s.command).unwrap_or_default(),
        from,
        format!(
            "node's script {script} is not in {}, the working directory the processes run in: \
             start fhircluster in FHIRsmith's folder (WorkingDirectory= under systemd), or give \
             the script's full path",
            cwd.display()
        ),
    ))
}

/// Node options that take their value as the next argument (`--require x`), as `node --help`
/// lists them with `=...` (Node 20), and the debugger's ports.
const TAKES_VALUE: &[&str] = &[
    "-C",
    "--conditions",
    "-r",
    "--require",
    "--import",
    "--loader",
    "--experimental-loader",
    "--input-type",
    "--title",
    "--env-file",
    "--env-file-if-exists",
    "--cpu-prof-dir",
    "--cpu-prof-interval",
    "--cpu-prof-name",
    "--diagnostic-dir",
    "--disable-proto",
    "--disable-warning",
    "--dns-result-order",
    "--experimental-default-type",
    "--experimental-policy",
    "--experimental-sea-config",
    "--heap-prof-dir",
    "--heap-prof-interval",
    "--heap-prof-name",
    "--heapsnapshot-near-heap-limit",
    "--heapsnapshot-signal",
    "--icu-data-dir",
    "--inspect-port",
    "--debug-port",
    "--inspect-publish-uid",
    "--max-http-header-size",
    "--openssl-config",
    "--policy-integrity",
    "--redirect-warnings",
    "--report-dir",
    "--report-directory",
    "--report-filename",
    "--report-signal",
    "--secure-heap",
    "--secure-heap-min",
    "--snapshot-blob",
    "--stack-size",
    "--stack-trace-limit",
    "--tls-cipher-list",
    "--tls-keylog",
    "--trace-event-categories",
    "--trace-event-file-pattern",
    "--unhandled-rejections",
    "--use-largepages",
    "--watch-path",
    "--allow-fs-read",
    "--allow-fs-write",
    "--build-snapshot-config",
];

/// Node options after which node runs no script file: code given inline, the REPL, the test
/// runner, a package script.
const NO_SCRIPT: &[&str] = &[
    "-e",
    "--eval",
    "-p",
    "--print",
    "-i",
    "--interactive",
    "--test",
    "--run",
    "-v",
    "--version",
    "-h",
    "--help",
];

/// The script `node <args>` would run, if any: its first argument that is neither an option
/// nor an option's value (a bare number is taken as a V8 option's value, `--stack-size 2000`).
fn node_script(args: &[String]) -> Option<&str> {
    let mut args = args.iter();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--" => return args.next().map(String::as_str),
            "-" => return None,
            a if NO_SCRIPT.contains(&a) => return None,
            a if TAKES_VALUE.contains(&a) => {
                args.next();
            }
            a if a.starts_with('-') => {}
            a if a.bytes().all(|b| b.is_ascii_digit()) => {}
            a => return Some(a),
        }
    }
    None
}

/// Whether node would find a script at `path`: as given, with one of the extensions it tries,
/// or a directory (its `index.js` or `package.json`, node's business).
fn node_finds(path: &Path) -> bool {
    let with = |ext: &str| {
        let mut p = path.as_os_str().to_owned();
        p.push(ext);
        PathBuf::from(p)
    };
    path.exists()
        || [".js", ".mjs", ".cjs", ".json", ".node"]
            .iter()
            .any(|ext| with(ext).is_file())
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
    fn nodes_script_is_its_first_argument_that_is_no_option_nor_an_options_value() {
        let script = |args: &[&str]| {
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            node_script(&args).map(str::to_string)
        };
        assert_eq!(script(&["server.js"]), Some("server.js".into()));
        assert_eq!(
            script(&[
                "--expose-gc",
                "--max-old-space-size=8192",
                "server.js",
                "--port=1"
            ]),
            Some("server.js".into())
        );
        assert_eq!(
            script(&["-r", "./otel.js", "--require", "x", "app/main.js"]),
            Some("app/main.js".into())
        );
        assert_eq!(
            script(&["--stack-size", "2000", "s.js"]),
            Some("s.js".into())
        );
        assert_eq!(script(&["--", "-odd.js"]), Some("-odd.js".into()));
        for none in [&["-e", "1"][..], &["--test"], &["-"], &["--expose-gc"], &[]] {
            assert_eq!(script(none), None, "{none:?}");
        }
    }

    #[test]
    fn a_missing_node_script_names_it_and_the_working_directory() {
        // Issue 14: --check said "configuration ok" without server.js; the start then failed
        // 32 s later with "the master exited 6 times".
        let bin = tempfile::tempdir().unwrap();
        make_file(bin.path(), "node", 0o755);
        let cwd = tempfile::tempdir().unwrap();
        let path = Some(bin.path().as_os_str());
        let default = Settings::default();
        let e = check_command_with(&default, cwd.path(), path).unwrap_err();
        let line = e.to_string();
        assert!(
            line.starts_with(
                "server.cluster.command = [\"node\",\"server.js\"] (the default): node's script \
                 server.js is not in "
            ),
            "{line}"
        );
        assert!(line.contains(&cwd.path().display().to_string()), "{line}");
        assert!(line.contains("working directory"), "{line}");
        std::fs::write(cwd.path().join("server.js"), "").unwrap();
        assert_eq!(check_command_with(&default, cwd.path(), path), Ok(()));
        // As node finds it: an extension added, or a directory.
        std::fs::create_dir(cwd.path().join("app")).unwrap();
        std::fs::write(cwd.path().join("app/main.mjs"), "").unwrap();
        for ok in [
            &["node", "app/main"][..],
            &["node", "app"],
            &["node", "-e", "1"],
        ] {
            assert_eq!(
                check_command_with(&with_command(ok), cwd.path(), path),
                Ok(()),
                "{ok:?}"
            );
        }
        // Another program's arguments are its own business.
        make_file(bin.path(), "bun", 0o755);
        assert_eq!(
            check_command_with(&with_command(&["bun", "gone.js"]), cwd.path(), path),
            Ok(())
        );
    }

    #[test]
    fn a_directory_is_not_a_program() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("node")).unwrap();
        let bin = dir.path().as_os_str();
        assert!(check_command_with(&with_command(&["node"]), dir.path(), Some(bin)).is_err());
    }
}
