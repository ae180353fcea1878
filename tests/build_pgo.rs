//! The optimised build's profile (cluster.md, DEC-61 and DEC-69): `release-lto.sh` runs cargo
//! with the `release-lto` profile and gives rustc the committed profile of the launcher under
//! load (`pgo/llvm-N.profdata`, `-Cprofile-use`) only when rustc's LLVM major version is N.
//! What these hold that no compiler lint or clippy setting can: the script's choice of profile
//! (a Debian or an older toolchain must still build, without it), the flags a caller already
//! gave kept beside it, and the committed profile being one this rustc reads (rustc only warns
//! of a profile it cannot read, and the build goes on slower).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn executable(path: &Path, text: &str) {
    std::fs::write(path, text).expect("a script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// The script copied into `dir` beside a `pgo/llvm-77.profdata`, a stand-in rustc that says it
/// is built on LLVM 77, and a stand-in cargo that prints its arguments, then the flags it was
/// given, one a line (`CARGO_ENCODED_RUSTFLAGS` split on its separator, or `RUSTFLAGS: ...`).
struct Stage {
    script: PathBuf,
    rustc: PathBuf,
    cargo: PathBuf,
}

fn stage(dir: &Path) -> Stage {
    std::fs::create_dir_all(dir.join("pgo")).expect("pgo dir");
    std::fs::write(dir.join("pgo/llvm-77.profdata"), b"").expect("a profile");
    let script = dir.join("release-lto.sh");
    std::fs::copy(repo().join("release-lto.sh"), &script).expect("the script");
    let rustc = dir.join("rustc");
    executable(
        &rustc,
        "#!/bin/sh\n[ \"$1\" = -vV ] || exit 1\necho 'rustc 1.0.0'\necho 'LLVM version: 77.1.0'\n",
    );
    let cargo = dir.join("cargo");
    executable(
        &cargo,
        "#!/bin/bash\nfor a in \"$@\"; do echo \"$a\"; done\n\
         if [ -n \"${CARGO_ENCODED_RUSTFLAGS+set}\" ]; then echo '--'; \
         printf '%s' \"$CARGO_ENCODED_RUSTFLAGS\" | tr '\\037' '\\n'; echo; fi\n\
         if [ -n \"${RUSTFLAGS+set}\" ]; then echo \"RUSTFLAGS: $RUSTFLAGS\"; fi\n",
    );
    Stage {
        script,
        rustc,
        cargo,
    }
}

/// What the stand-in cargo printed, run by the script with `args` and `env`.
fn run(s: &Stage, args: &[&str], env: &[(&str, &str)]) -> (Vec<String>, Output) {
    let mut cmd = Command::new(&s.script);
    cmd.args(args)
        .env("RUSTC", &s.rustc)
        .env("CARGO", &s.cargo)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run the script");
    assert!(out.status.success(), "{out:?}");
    let lines = String::from_utf8(out.stdout.clone())
        .expect("utf-8")
        .lines()
        .map(str::to_string)
        .collect();
    (lines, out)
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

// spec: DEC-69
#[test]
fn the_script_gives_the_profile_only_to_a_rustc_on_its_llvm() {
    // A path with a space: RUSTFLAGS would split it, the encoded flags do not.
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("a checkout");
    let s = stage(&dir);
    let profile = format!(
        "-Cprofile-use={}",
        dir.canonicalize()
            .expect("the dir's path")
            .join("pgo/llvm-77.profdata")
            .display()
    );

    // No arguments: the optimised build, with the profile.
    let (seen, _) = run(&s, &[], &[]);
    assert_eq!(
        seen,
        strings(&["build", "--profile", "release-lto", "--", &profile])
    );
    // Any cargo subcommand, the package's among them, with its own arguments after the profile.
    let (seen, _) = run(&s, &["deb", "--no-build", "--deb-version", "1.2"], &[]);
    assert_eq!(
        seen,
        strings(&[
            "deb",
            "--profile",
            "release-lto",
            "--no-build",
            "--deb-version",
            "1.2",
            "--",
            &profile
        ])
    );
    // The caller's own flags are kept, before the profile.
    let (seen, _) = run(
        &s,
        &[],
        &[("RUSTFLAGS", "-Ctarget-cpu=native  -Cdebuginfo=1")],
    );
    assert_eq!(
        seen,
        strings(&[
            "build",
            "--profile",
            "release-lto",
            "--",
            "-Ctarget-cpu=native",
            "-Cdebuginfo=1",
            &profile
        ])
    );
    let (seen, _) = run(&s, &[], &[("CARGO_ENCODED_RUSTFLAGS", "-Ca=b c")]);
    assert_eq!(
        seen,
        strings(&[
            "build",
            "--profile",
            "release-lto",
            "--",
            "-Ca=b c",
            &profile
        ])
    );

    // No profile for this rustc's LLVM (Debian's rustc, an older one): the same build without
    // one, the caller's flags untouched, and a word on stderr saying so.
    std::fs::rename(
        dir.join("pgo/llvm-77.profdata"),
        dir.join("pgo/llvm-76.profdata"),
    )
    .expect("rename");
    let (seen, out) = run(&s, &["build", "--bins"], &[]);
    assert_eq!(
        seen,
        strings(&["build", "--profile", "release-lto", "--bins"])
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("LLVM 77") && said.contains("without"),
        "{said}"
    );
    let (seen, _) = run(&s, &[], &[("RUSTFLAGS", "-Cx")]);
    assert_eq!(
        seen,
        strings(&["build", "--profile", "release-lto", "RUSTFLAGS: -Cx"])
    );
}

// spec: DEC-69
#[test]
fn the_committed_profile_is_one_this_rustc_reads_without_a_word_or_none_is_used() {
    let version = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc -vV");
    let version = String::from_utf8(version.stdout).expect("utf-8");
    let llvm = version
        .lines()
        .find_map(|l| l.strip_prefix("LLVM version: "))
        .and_then(|v| v.split('.').next())
        .expect("rustc names its LLVM");
    let profile = repo().join(format!("pgo/llvm-{llvm}.profdata"));
    let dir = tempfile::tempdir().expect("temp dir");
    let lib = dir.path().join("lib.rs");
    std::fs::write(&lib, "pub fn f(x: u32) -> u32 { x.wrapping_mul(3) }\n").expect("lib.rs");
    let rustc = |profile: &Path| {
        Command::new("rustc")
            .args(["--crate-type", "lib", "-C", "opt-level=3", "--out-dir"])
            .arg(dir.path())
            .arg(format!("-Cprofile-use={}", profile.display()))
            .arg(&lib)
            .output()
            .expect("rustc")
    };
    // What the silence below is worth: rustc does speak of a profile it cannot read (and
    // builds on without it).
    let garbage = dir.path().join("garbage.profdata");
    std::fs::write(&garbage, b"not a profile").expect("garbage");
    let said = String::from_utf8_lossy(&rustc(&garbage).stderr).to_string();
    assert!(said.contains("invalid instrumentation profile"), "{said}");
    // None for this LLVM: the script builds without one (the test above).
    if profile.exists() {
        assert!(
            std::fs::metadata(&profile).expect("the profile").len() > 0,
            "{profile:?} is empty"
        );
        let out = rustc(&profile);
        assert!(out.status.success(), "{profile:?}: {out:?}");
        let said = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!said.contains("warning"), "{profile:?}: {said}");
    }
}
