//! Build facts for `fhircluster --version` (as `nginx -V` gives them): the git commit this was
//! built from (`unknown` outside a git checkout, e.g. a tarball) and the compiler's version.
//! Both reach the code as environment variables at compile time (`build_info`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    output(Command::new("git").arg("-C").arg(dir).args(args))
}

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into()));
    let commit =
        git(&dir, &["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = output(Command::new(rustc).arg("--version")).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=FHIRCLUSTER_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=FHIRCLUSTER_RUSTC={version}");
    println!("cargo:rerun-if-changed=build.rs");
    // Built again when HEAD moves: HEAD itself, the branch it names, and packed refs (in a
    // worktree, HEAD is in its own git dir and the refs in the common one). Only files that
    // exist are named, as a missing one would make every build run this again.
    let git_dir = git(&dir, &["rev-parse", "--absolute-git-dir"]).map(PathBuf::from);
    let common = git(&dir, &["rev-parse", "--git-common-dir"]).map(|c| {
        let p = PathBuf::from(c);
        if p.is_absolute() {
            p
        } else {
            dir.join(p)
        }
    });
    let branch = git(&dir, &["symbolic-ref", "-q", "HEAD"]);
    let mut watched = Vec::new();
    if let Some(g) = &git_dir {
        watched.push(g.join("HEAD"));
    }
    if let Some(c) = &common {
        watched.push(c.join("packed-refs"));
        if let Some(b) = &branch {
            watched.push(c.join(b));
        }
    }
    for path in watched.iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
