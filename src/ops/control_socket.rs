//! The control socket: a Unix socket in the data directory (`server.cluster.controlSocket`,
//! `fhircluster.sock`; `off`: none), mode 0660, owned by the launcher's user and
//! `server.cluster.controlGroup` (else its own group), so only they reach it, as HAProxy's
//! `stats socket ... mode 660 level admin`. Every action goes here (`fhircluster upgrade`),
//! never to the HTTP admin listener, which is read-only; the protocol is `control_proto.rs`.
//!
//! Its life: made at start under a temporary name, its owner and mode set, then renamed into
//! place, so no client ever finds it with other permissions. A socket file already there is
//! connected to first: a live launcher answering on it is never displaced (the start is refused,
//! naming it); one nobody answers on (a launcher killed) is replaced. Kept across an in-place
//! upgrade (the same file, the listening fd inherited through the `execve`); removed at a clean
//! stop, if it is still the file this launcher made.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener as StdListener, UnixStream as StdStream};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use tokio::net::UnixListener;
use tracing::{debug, info, warn};

use crate::settings::Settings;

/// The socket's mode: the owner and the group read and write (connect), nobody else.
pub(crate) const MODE: u32 = 0o660;

/// The longest path a Unix socket takes (`sun_path` holds 108 bytes with its NUL), less the
/// temporary name's `.new`.
const MAX_PATH: usize = 107 - 4;

/// The control socket this launcher made (or took over): removed when dropped at a clean stop,
/// if the file is still the one it made. An upgrade's `execve` drops nothing, so it stays.
pub(crate) struct ControlSocket {
    path: PathBuf,
    /// The file's device and inode when made.
    file: (u64, u64),
    /// A second fd for the listening socket, for the upgrade's handover.
    fd: OwnedFd,
}

impl ControlSocket {
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The listening socket's fd, for the upgrade's handover.
    pub(crate) fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The file's device and inode, for the upgrade's handover.
    pub(crate) fn file(&self) -> (u64, u64) {
        self.file
    }
}

/// The control socket handed over by the program before: its listening socket and the file it
/// made (`None`: a program that did not say).
pub(crate) struct Inherited {
    pub(crate) listener: StdListener,
    pub(crate) file: Option<(u64, u64)>,
}

/// What is at the control socket's path, against the file the launcher made.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// The very socket (same device and inode; a socket at all when the inode is not known).
    Made,
    /// Nothing: removed (a tmp cleaner, an operator).
    Gone,
    /// Something else: a link, another file, another socket.
    Other,
}

/// Pure: what `lstat` of the path said (`None`: nothing there; else whether it is a socket, and
/// its device and inode) against the file made (`None`: not known).
pub(crate) fn found(at: Option<(bool, (u64, u64))>, made: Option<(u64, u64)>) -> Found {
    match at {
        None => Found::Gone,
        Some((true, id)) if made.is_none_or(|m| m == id) => Found::Made,
        Some(_) => Found::Other,
    }
}

fn look(path: &Path) -> Option<(bool, (u64, u64))> {
    let m = std::fs::symlink_metadata(path).ok()?;
    Some((m.file_type().is_socket(), (m.dev(), m.ino())))
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        if look(&self.path).is_some_and(|(_, id)| id == self.file) {
            match std::fs::remove_file(&self.path) {
                Ok(()) => debug!("removed the control socket {}", self.path.display()),
                Err(e) => warn!("removing the control socket {}: {e}", self.path.display()),
            }
        }
    }
}

/// The group `controlGroup` names: `None` for the launcher's own.
pub(crate) fn group_id(name: &str) -> Result<Option<u32>> {
    if name.is_empty() {
        return Ok(None);
    }
    if let Ok(gid) = name.parse::<u32>() {
        return Ok(Some(gid));
    }
    if name.contains('\0') {
        bail!("server.cluster.controlGroup {name:?}: a NUL in the group's name");
    }
    match nix::unistd::Group::from_name(name) {
        Ok(Some(group)) => Ok(Some(group.gid.as_raw())),
        Ok(None) => bail!(
            "server.cluster.controlGroup {name:?}: no such group (give a group's name or number, or \"\")"
        ),
        Err(e) => bail!("server.cluster.controlGroup {name:?}: looking the group up: {e}"),
    }
}

/// Whether this process may give a file to group `gid` (root, or one of its groups).
fn may_give_to(gid: u32) -> bool {
    use nix::unistd::{getegid, geteuid, getgroups, Gid};
    let gid = Gid::from_raw(gid);
    geteuid().is_root() || getegid() == gid || getgroups().is_ok_and(|groups| groups.contains(&gid))
}

/// Makes the control socket (or takes the inherited one over): `None` when it is off. At start
/// (`inherited` is `None` and `upgraded` false) anything wrong stops the start; after an
/// in-place upgrade (`upgraded`) nothing does: each is a `WARNING` and the launcher serves on,
/// with the socket kept as it was, made anew, or none.
pub(crate) fn open(
    settings: &Settings,
    inherited: Option<Inherited>,
    upgraded: bool,
) -> Result<Option<(ControlSocket, UnixListener)>> {
    let Some(path) = settings.control_socket_path() else {
        if let Some(old) = inherited {
            retire(&old);
        }
        return Ok(None);
    };
    let gid = match (allowed_group(&settings.cluster.control_group), upgraded) {
        (Ok(gid), _) => gid,
        (Err(e), false) => return Err(e),
        (Err(e), true) => {
            warn!("{e:#}: the control socket keeps the launcher's own group");
            None
        }
    };
    let kept = inherited.and_then(|old| keep(old, &path, gid));
    let (listener, file) = match kept {
        Some(kept) => kept,
        None => {
            // What is there refuses the start; after an upgrade the launcher serves on without.
            let made = match check_place(&path) {
                Err(e) if !upgraded => return Err(e),
                placed => placed.and_then(|()| bind(&path, gid)),
            };
            match made {
                Ok(made) => made,
                // The directory can't take it (read-only, not the launcher's): the launcher
                // serves on without, as it does when it can't write its databases there.
                Err(e) => {
                    warn!(
                        "{e:#}: running without a control socket (fhircluster upgrade and status \
                         can't reach this launcher; SIGUSR2 still upgrades and --admin-address \
                         still shows the status): set server.cluster.controlSocket to a path the \
                         launcher may write"
                    );
                    return Ok(None);
                }
            }
        }
    };
    let fd = listener.as_fd().try_clone_to_owned()?;
    listener.set_nonblocking(true)?;
    let listener = UnixListener::from_std(listener)?;
    Ok(Some((ControlSocket { path, file, fd }, listener)))
}

/// The group `controlGroup` names, once the launcher's user may give the socket to it.
pub(crate) fn allowed_group(name: &str) -> Result<Option<u32>> {
    let gid = group_id(name)?;
    if let Some(gid) = gid.filter(|&g| !may_give_to(g)) {
        bail!(
            "server.cluster.controlGroup {name:?} (gid {gid}): the launcher's user is not in it, so \
             it can't give the control socket to it: add the service user to the group \
             (usermod -aG), or name one it is in"
        );
    }
    Ok(gid)
}

/// The inherited socket, kept when its file is still the one made at `path` (its group and
/// mode set again, on that file only); `None`, the listener closed, when it is to be made anew.
fn keep(old: Inherited, path: &Path, gid: Option<u32>) -> Option<(StdListener, (u64, u64))> {
    if placed(&old.listener).is_none_or(|p| p != path) {
        info!("upgrade: server.cluster.controlSocket changed");
        retire(&old);
        return None;
    }
    let fault = crate::test_hooks::failing("setup-control-file");
    match fault.map(|()| found(look(path), old.file)) {
        Ok(Found::Made) => {}
        seen => {
            let what = match seen {
                Ok(Found::Gone) => "is gone".to_string(),
                Ok(_) => "is no longer the socket this launcher made".to_string(),
                Err(why) => why,
            };
            warn!(
                "the control socket {} {what}: making a new one (the file there is not touched)",
                path.display()
            );
            return None;
        }
    }
    // The group may have changed with config.json: set again, on the same file.
    let set = crate::test_hooks::failing("setup-control-permit")
        .map_err(anyhow::Error::msg)
        .and_then(|()| permit(path, gid, old.file));
    match set {
        Ok(file) => Some((old.listener, file)),
        Err(e) => {
            warn!("{e:#}: the control socket is kept with its group and mode as they were");
            let file = old.file.or_else(|| look(path).map(|(_, id)| id))?;
            Some((old.listener, file))
        }
    }
}

/// Where a listening socket made by [`bind`] is: the name it was bound to, less the `.new`
/// it was renamed from.
fn placed(l: &StdListener) -> Option<PathBuf> {
    let bound = l.local_addr().ok()?.as_pathname()?.to_path_buf();
    let text = bound.as_os_str().as_encoded_bytes();
    let placed = text.strip_suffix(b".new").map_or(bound.clone(), |p| {
        PathBuf::from(std::ffi::OsStr::from_bytes(p))
    });
    Some(placed)
}

/// An inherited socket no longer wanted: its file goes, if it is still the one the old program
/// made.
fn retire(old: &Inherited) {
    if let Some(p) = placed(&old.listener) {
        if found(look(&p), old.file) == Found::Made {
            let _ = std::fs::remove_file(&p);
        }
        info!("closed the control socket {}", p.display());
    }
}

/// The owner's group and mode, set on the socket at `path` and nothing else: the path is opened
/// without following a link (`O_PATH | O_NOFOLLOW`), the file found must be a socket (and the
/// one made, `made`), and the changes go to that open file (`/proc/self/fd/N` names exactly it),
/// so a link or a file put there meanwhile is never changed. Returns the file's device and inode.
fn permit(path: &Path, gid: Option<u32>, made: Option<(u64, u64)>) -> Result<(u64, u64)> {
    let shown = path.display();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .with_context(|| format!("the control socket {shown}"))?;
    let meta = file
        .metadata()
        .with_context(|| format!("the control socket {shown}"))?;
    let id = (meta.dev(), meta.ino());
    if !meta.file_type().is_socket() || made.is_some_and(|m| m != id) {
        bail!("the control socket {shown}: not the socket this launcher made (left untouched)");
    }
    let this = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    if let Some(gid) = gid {
        std::os::unix::fs::chown(&this, None, Some(gid))
            .with_context(|| format!("giving {shown} to group {gid} (controlGroup)"))?;
    }
    std::fs::set_permissions(&this, std::fs::Permissions::from_mode(MODE))
        .with_context(|| format!("chmod {MODE:o} {shown}"))?;
    Ok(id)
}

/// What is at `path` before the start: nothing, or a socket nobody answers on (replaced); a
/// live launcher's socket, another file or a path too long refuses the start.
fn check_place(path: &Path) -> Result<()> {
    let len = path.as_os_str().len();
    if len > MAX_PATH {
        bail!(
            "server.cluster.controlSocket {}: {len} bytes, longer than a Unix socket's path may \
             be ({MAX_PATH}): set a shorter controlSocket (an absolute path), or \"off\"",
            path.display()
        );
    }
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => bail!("the control socket {}: {e}", path.display()),
        Ok(m) => m,
    };
    if !meta.file_type().is_socket() {
        bail!(
            "server.cluster.controlSocket {} exists and is not a socket: move it, or set \
             controlSocket to another path (or \"off\")",
            path.display()
        );
    }
    match StdStream::connect(path) {
        Ok(_) => bail!(
            "another launcher answers on the control socket {}: it runs with this data \
             directory; stop it first (or give this one another data directory or \
             server.cluster.controlSocket)",
            path.display()
        ),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            info!(
                "replacing the control socket {} (left by a launcher that is gone)",
                path.display()
            );
            Ok(())
        }
        Err(e) => bail!(
            "the control socket {}: an existing socket there can't be tried ({e})",
            path.display()
        ),
    }
}

/// Binds under a temporary name, sets the group and mode, renames into place: the listener and
/// the file's device and inode.
fn bind(path: &Path, gid: Option<u32>) -> Result<(StdListener, (u64, u64))> {
    let mut temp = path.as_os_str().to_owned();
    temp.push(".new");
    let temp = PathBuf::from(temp);
    let _ = std::fs::remove_file(&temp);
    let made = (|| -> Result<(StdListener, (u64, u64))> {
        let l = StdListener::bind(&temp).with_context(|| {
            format!(
                "server.cluster.controlSocket {}: cannot listen",
                path.display()
            )
        })?;
        let file = permit(&temp, gid, None)?;
        std::fs::rename(&temp, path)
            .with_context(|| format!("putting the control socket at {}", path.display()))?;
        Ok((l, file))
    })();
    if made.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    made
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_very_socket_made_is_taken_as_it() {
        // spec: DEC-71 — a link (its own inode, not a socket), another file, another socket.
        let made = Some((1, 42));
        assert_eq!(found(Some((true, (1, 42))), made), Found::Made);
        assert_eq!(found(None, made), Found::Gone);
        assert_eq!(found(Some((false, (1, 43))), made), Found::Other);
        assert_eq!(found(Some((true, (1, 43))), made), Found::Other);
        assert_eq!(found(Some((true, (2, 42))), made), Found::Other);
        // A program that did not say which file it made: a socket at all, never a link.
        assert_eq!(found(Some((true, (1, 43))), None), Found::Made);
        assert_eq!(found(Some((false, (1, 43))), None), Found::Other);
    }

    #[test]
    fn the_mode_is_never_set_through_a_link() {
        // spec: DEC-71
        let dir = tempfile::tempdir().expect("dir");
        let target = dir.path().join("secret");
        std::fs::write(&target, b"x").expect("write");
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let link = dir.path().join("fhircluster.sock");
        std::os::unix::fs::symlink(&target, &link).expect("link");
        let err = permit(&link, None, None).expect_err("a link is refused");
        assert!(format!("{err:#}").contains("not the socket"), "{err:#}");
        let mode = std::fs::metadata(&target)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // The socket itself: its mode set, its inode returned.
        let sock = dir.path().join("s.sock");
        let _l = StdListener::bind(&sock).expect("bind");
        let id = permit(&sock, None, None).expect("the socket");
        let meta = std::fs::symlink_metadata(&sock).expect("meta");
        assert_eq!((meta.dev(), meta.ino()), id);
        assert_eq!(meta.permissions().mode() & 0o777, MODE);
        // The same path, now another socket than the one made: left as it is.
        assert!(permit(&sock, None, Some((id.0, id.1 + 1))).is_err());
    }
}
