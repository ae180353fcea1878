//! A command line the parser refuses exits 1, as any bad setting does (DEC-12), with the
//! parser's message on stderr; never 2, which `fhircluster status` gives for "no launcher", so a
//! health check with a mistyped flag (`--admin-adress`) is not read as a launcher gone.
//! `--help` and `--version` exit 0.

use std::process::Command;
use std::time::Duration;

use crate::common::*;

fn run(args: &[&str]) -> RunOutput {
    let cwd = tempfile::tempdir().expect("cwd");
    let mut cmd = Command::new(LAUNCHER);
    cmd.args(args)
        .current_dir(cwd.path())
        .env_remove("FHIRSMITH_DATA_DIR");
    run_bounded(&mut cmd, Duration::from_secs(20))
}

#[test]
fn a_refused_command_line_exits_1_and_help_and_version_exit_0() {
    // spec: DEC-12
    let refused: [&[&str]; 5] = [
        &["bogus"],
        &["--wokers", "3"],
        &["status", "--admin-adress", "9100"],
        &["print", "nginx", "--listen"],
        &["upgrade", "--now"],
    ];
    for args in refused {
        let out = run(args);
        assert_eq!(out.code, Some(1), "{args:?}: {}", out.all());
        assert!(out.stderr.contains("error:"), "{args:?}: {}", out.all());
    }
    for args in [
        &["--help"][..],
        &["--version"],
        &["print", "--help"],
        &["status", "-h"],
    ] {
        let out = run(args);
        assert_eq!(out.code, Some(0), "{args:?}: {}", out.all());
        assert!(!out.stdout.is_empty(), "{args:?} prints on stdout");
    }
}
