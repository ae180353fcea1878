//! The release build's profile (cluster.md, DEC-69): `.cargo/rustc-pgo`, cargo's rustc wrapper,
//! adds `-Cprofile-use` with the committed profile for rustc's LLVM to the optimised
//! compilations only, and leaves every other rustc run as it was asked.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The wrapper copied into `dir/.cargo/` beside a `pgo/llvm-77.profdata`, and a stand-in rustc
/// that says it is built on LLVM 77 and prints the arguments it was run with.
fn wrapper_in(dir: &Path) -> (PathBuf, PathBuf) {
    let cargo = dir.join(".cargo");
    std::fs::create_dir_all(cargo.join("pgo")).expect("pgo dir");
    std::fs::write(cargo.join("pgo/llvm-77.profdata"), b"").expect("a profile");
    let wrapper = cargo.join("rustc-pgo");
    std::fs::copy(repo().join(".cargo/rustc-pgo"), &wrapper).expect("the wrapper");
    let rustc = dir.join("rustc");
    std::fs::write(
        &rustc,
        "#!/bin/sh\nif [ \"$1\" = -vV ]; then echo 'rustc 1.0.0'; echo 'LLVM version: 77.1.0'; \
         exit 0; fi\nfor a in \"$@\"; do echo \"$a\"; done\n",
    )
    .expect("the stand-in rustc");
    std::fs::set_permissions(&rustc, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    (wrapper, rustc)
}

/// The arguments rustc was run with through `wrapper`.
fn run(wrapper: &Path, rustc: &Path, args: &[&str]) -> Vec<String> {
    let out = Command::new(wrapper)
        .arg(rustc)
        .args(args)
        .output()
        .expect("run the wrapper");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(str::to_string)
        .collect()
}

// spec: DEC-69
#[test]
fn the_profile_is_added_to_optimised_compilations_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (wrapper, rustc) = wrapper_in(dir.path());
    let profile = format!(
        "-Cprofile-use={}",
        dir.path()
            .join(".cargo/pgo/llvm-77.profdata")
            .canonicalize()
            .expect("the profile's path")
            .display()
    );
    let release = ["--crate-name", "x", "-C", "opt-level=3", "src/lib.rs"];
    assert_eq!(run(&wrapper, &rustc, &release).last(), Some(&profile));
    let size = ["--crate-name", "x", "-Copt-level=s", "src/lib.rs"];
    assert_eq!(run(&wrapper, &rustc, &size).last(), Some(&profile));

    // Debug builds, build scripts and tests (no opt-level, or 0), cargo's own queries, and a
    // build that records or names a profile of its own: run exactly as asked.
    for args in [
        &["--crate-name", "x", "src/lib.rs"][..],
        &["--crate-name", "x", "-C", "opt-level=0", "src/lib.rs"],
        &["-vV"],
        &["-", "--print=cfg", "--crate-type", "lib"],
        &[
            "--crate-name",
            "x",
            "-C",
            "opt-level=3",
            "-Cprofile-generate=/tmp/raw",
            "a.rs",
        ],
        &[
            "--crate-name",
            "x",
            "-C",
            "opt-level=3",
            "-C",
            "profile-use=/p.profdata",
            "a.rs",
        ],
    ] {
        let seen = run(&wrapper, &rustc, args);
        let asked: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        if args == ["-vV"] {
            assert_eq!(seen, ["rustc 1.0.0", "LLVM version: 77.1.0"]);
        } else {
            assert_eq!(seen, asked, "{args:?}");
        }
    }

    // No profile for this rustc's LLVM (another toolchain): unchanged.
    std::fs::rename(
        dir.path().join(".cargo/pgo/llvm-77.profdata"),
        dir.path().join(".cargo/pgo/llvm-76.profdata"),
    )
    .expect("rename");
    let seen = run(&wrapper, &rustc, &release);
    assert_eq!(seen, release.map(str::to_string));
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
    let profile = repo().join(format!(".cargo/pgo/llvm-{llvm}.profdata"));
    let dir = tempfile::tempdir().expect("temp dir");
    let lib = dir.path().join("lib.rs");
    std::fs::write(&lib, "pub fn f(x: u32) -> u32 { x.wrapping_mul(3) }\n").expect("lib.rs");
    let wrapper = repo().join(".cargo/rustc-pgo");
    let out = Command::new(&wrapper)
        .args([
            "rustc",
            "--crate-type",
            "lib",
            "-C",
            "opt-level=3",
            "--out-dir",
        ])
        .arg(dir.path())
        .arg(&lib)
        .output()
        .expect("rustc through the wrapper");
    // With a profile for this LLVM, rustc is given it and reads it without a word (one it
    // cannot read is only warned of, and the build goes on without it); without one, the
    // build goes on without.
    assert!(out.status.success(), "{profile:?}: {out:?}");
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!said.contains("warning"), "{profile:?}: {said}");
    if profile.exists() {
        let size = std::fs::metadata(&profile).expect("the profile").len();
        assert!(size > 0, "{profile:?} is empty");
        // What that silence is worth: rustc does speak of a profile it cannot read.
        let garbage = dir.path().join("garbage.profdata");
        std::fs::write(&garbage, b"not a profile").expect("garbage");
        let refused = Command::new("rustc")
            .args(["--crate-type", "lib", "-C", "opt-level=3", "--out-dir"])
            .arg(dir.path())
            .arg(format!("-Cprofile-use={}", garbage.display()))
            .arg(&lib)
            .output()
            .expect("rustc");
        let said = String::from_utf8_lossy(&refused.stderr).to_string();
        assert!(said.contains("invalid instrumentation profile"), "{said}");
    }
}
