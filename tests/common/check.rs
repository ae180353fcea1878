//! `fhircluster --check` and start refusals: run the real binary on a temporary data directory
//! and read its exit status and output (`tests/check.rs`, `tests/check_settings.rs`).

use super::*;

/// How long a `--check` (or a start that is refused) may take.
pub const CHECK_LIMIT: Duration = Duration::from_secs(20);

/// The repository's `config-template.json`.
pub fn template() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config-template.json");
    std::fs::read_to_string(path).expect("config-template.json in the repository")
}

/// `fhircluster --check` (plus `args`) on a data directory holding `config` as config.json.
pub fn check(config: &str, args: &[&str]) -> RunOutput {
    let dir = tempfile::tempdir().expect("temp data dir");
    std::fs::write(dir.path().join("config.json"), config).expect("write config.json");
    check_in(dir.path(), args)
}

pub fn check_in(dir: &Path, args: &[&str]) -> RunOutput {
    let mut cmd = launcher_command(dir);
    cmd.arg("--check").args(args);
    run_bounded(&mut cmd, CHECK_LIMIT)
}

/// A folder with an (empty) `server.js`, where `node server.js` finds its script.
pub fn fhirsmith_folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp folder");
    std::fs::write(dir.path().join("server.js"), "").expect("write server.js");
    dir
}

/// A bad setting: exit 1, nothing on stdout but perhaps warnings, one line on stderr naming it.
pub fn assert_refused(out: &RunOutput, needles: &[&str]) {
    assert_eq!(out.code, Some(1), "expected exit 1:\n{}", out.all());
    for n in needles {
        assert!(out.stderr.contains(n), "stderr lacks {n:?}:\n{}", out.all());
    }
    assert!(
        !out.stdout.contains("configuration ok"),
        "a refused config printed ok:\n{}",
        out.all()
    );
}
