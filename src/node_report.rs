//! `server.cluster.nodeReport`: the Node preload (`node_report.js`, embedded) that speaks the IPC
//! protocol for a Node server that doesn't — `hello` and `ready` as its HTTP server listens,
//! `status` and `sample` on the launcher's periods — so `fhircluster status`, `/status` and the
//! graphs have its heap and requests.
//!
//! The file is where only the service user can write it (node runs whatever it names): a 0700
//! directory of the launcher's own, `$XDG_RUNTIME_DIR/fhircluster-<pid>/` (else the temporary
//! directory's `fhircluster-<uid>-<pid>/`), holding a 0600 `node-report.js`. Its name is a function
//! of the launcher's pid, so the plan (pure, also `--check`'s) names it before it is written, and an
//! in-place upgrade (same pid) writes it again at the same place, over the old one, for the
//! processes it starts from then on. A directory found there that isn't ours (another owner, a
//! symlink, open to others) stops the start. Removed at the launcher's end.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The preload's source, as the repository holds it.
pub const SOURCE: &str = include_str!("node_report.js");

const FILE_NAME: &str = "node-report.js";

/// Where the preload goes for the launcher with `pid` and `uid`, given `$XDG_RUNTIME_DIR` and the
/// temporary directory. A directory is taken only when absolute and free of whitespace and quotes,
/// so the path passes whole through `FHIRCLUSTER_NODE_FLAGS` (space-separated) and `NODE_OPTIONS`.
pub fn path_for(runtime_dir: Option<&str>, temp_dir: &Path, pid: u32, uid: u32) -> PathBuf {
    let usable = |p: &str| {
        p.starts_with('/')
            && !p
                .chars()
                .any(|c| c.is_whitespace() || c == '"' || c == '\\')
    };
    let dir = match runtime_dir.filter(|d| usable(d)) {
        Some(d) => Path::new(d).join(format!("fhircluster-{pid}")),
        None => {
            let temp = temp_dir.to_str().filter(|d| usable(d)).unwrap_or("/tmp");
            Path::new(temp).join(format!("fhircluster-{uid}-{pid}"))
        }
    };
    dir.join(FILE_NAME)
}

/// The launcher's effective uid: whose directory the preload's is.
fn euid() -> u32 {
    crate::system::ffi::euid()
}

/// This launcher's preload path (fixed for its life).
pub fn path() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let runtime = std::env::var("XDG_RUNTIME_DIR").ok();
        path_for(
            runtime.as_deref(),
            &std::env::temp_dir(),
            std::process::id(),
            euid(),
        )
    })
}

/// Whether a directory found with `mode` and owner `uid` may hold the preload of the user `own`:
/// a real directory (not a symlink to one), ours, open to no one else.
pub fn dir_is_ours(is_dir: bool, is_symlink: bool, mode: u32, uid: u32, own: u32) -> bool {
    is_dir && !is_symlink && uid == own && mode & 0o077 == 0
}

/// Writes the preload to `path` (its directory made 0700 if missing), whole: a 0600 file beside
/// it, then renamed over it.
pub fn install(path: &Path) -> anyhow::Result<()> {
    let fail = |what: String| anyhow::anyhow!("server.cluster.nodeReport: {what}");
    let dir = path
        .parent()
        .ok_or_else(|| fail(format!("{} has no directory", path.display())))?;
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(fail(format!("making {}: {e}", dir.display()))),
    }
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| fail(format!("reading {}: {e}", dir.display())))?;
    let own = euid();
    if !dir_is_ours(
        meta.is_dir(),
        meta.file_type().is_symlink(),
        meta.permissions().mode(),
        meta.uid(),
        own,
    ) {
        return Err(fail(format!(
            "{} exists and is not a directory only this user (uid {own}) can use; remove it",
            dir.display()
        )));
    }
    let temp = dir.join(format!(".{FILE_NAME}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)
        .and_then(|mut f| {
            f.write_all(SOURCE.as_bytes())?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&temp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(fail(format!("writing {}: {e}", path.display())));
    }
    Ok(())
}

/// At the launcher's end: the file and its directory go (the directory only if empty).
pub fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
    if let Some(dir) = path.parent() {
        let _ = std::fs::remove_dir(dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_is_the_runtime_dirs_else_the_temporary_ones_and_always_one_word() {
        let tmp = Path::new("/var/tmp");
        assert_eq!(
            path_for(Some("/run/user/1000"), tmp, 42, 1000),
            PathBuf::from("/run/user/1000/fhircluster-42/node-report.js")
        );
        assert_eq!(
            path_for(None, tmp, 42, 1000),
            PathBuf::from("/var/tmp/fhircluster-1000-42/node-report.js")
        );
        // Relative, or with a space (it would split in FHIRCLUSTER_NODE_FLAGS): not taken.
        for bad in ["run/user", "/run/my user", "/run/\"q\""] {
            assert_eq!(
                path_for(Some(bad), tmp, 7, 5),
                PathBuf::from("/var/tmp/fhircluster-5-7/node-report.js"),
                "{bad}"
            );
        }
        assert_eq!(
            path_for(None, Path::new("/my tmp"), 7, 5),
            PathBuf::from("/tmp/fhircluster-5-7/node-report.js")
        );
    }

    #[test]
    fn only_a_private_directory_of_ours_holds_it() {
        assert!(dir_is_ours(true, false, 0o40700, 5, 5));
        assert!(!dir_is_ours(true, false, 0o40755, 5, 5), "open to others");
        assert!(
            !dir_is_ours(true, false, 0o40770, 5, 5),
            "open to the group"
        );
        assert!(!dir_is_ours(true, false, 0o40700, 6, 5), "another user's");
        assert!(!dir_is_ours(false, true, 0o120777, 5, 5), "a symlink");
        assert!(!dir_is_ours(false, false, 0o100600, 5, 5), "a file");
    }

    #[test]
    fn installed_private_and_whole_then_removed() {
        let base = std::env::temp_dir().join(format!("nr-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap_or_default();
        let path = base.join("fhircluster-1").join(FILE_NAME);
        assert!(install(&path).is_ok());
        // Again (an in-place upgrade): over the old one.
        assert!(install(&path).is_ok());
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(text, SOURCE);
        let mode = |p: &Path| {
            std::fs::metadata(p)
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0)
        };
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap_or(&base)), 0o700);
        // A directory open to others is refused, not used.
        let open = base.join("open");
        std::fs::create_dir_all(&open).unwrap_or_default();
        let _ = std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777));
        let e = install(&open.join(FILE_NAME)).err().map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("not a directory only this user")),
            "{e:?}"
        );
        remove(&path);
        assert!(!path.exists() && !path.parent().is_some_and(Path::exists));
        let _ = std::fs::remove_dir_all(&base);
    }
}
