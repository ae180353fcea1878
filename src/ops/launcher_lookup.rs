//! Finding a running launcher from its pid file (`--pid-file`, `server.cluster.pidFile`), for
//! `fhircluster status`, `upgrade`, `scale` and every other client of the control socket: the
//! pid is read, checked to be a launcher's (`/proc/<pid>/comm`), and its control socket found
//! among the sockets it holds: each `socket:[inode]` of `/proc/<pid>/fd` matched to a
//! listening Unix stream socket with a path in `/proc/net/unix` (the kernel's name for it is
//! the one it was bound to, `fhircluster.sock.new`, before the rename that put it in place).
//! So a client finds the launcher however its control socket was configured. A pid file that
//! names no running process, or one that is not a launcher, is stale: the answer says so (the
//! callers exit 2, no launcher).
//!
//! The parsing is pure (`listening`, `socket_of`); `find` reads `/proc`.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};

/// The command name a launcher runs under (as `pid_file.rs` judges it).
const LAUNCHER_COMM: &str = "fhircluster";

/// `/proc/net/unix`'s listening stream sockets that have a path (as bound: relative to the
/// binder's directory then; abstract ones, `@...`, have none): (inode, path).
pub(crate) fn listening(table: &str) -> Vec<(u64, String)> {
    const ACCEPTING: u32 = 0x0001_0000; // __SO_ACCEPTCON: listen() was called
    const STREAM: u32 = 1;
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let _slot = f.next()?;
            let _refs = f.next()?;
            let _proto = f.next()?;
            let flags = u32::from_str_radix(f.next()?, 16).ok()?;
            let kind = u32::from_str_radix(f.next()?, 16).ok()?;
            let _state = f.next()?;
            let inode: u64 = f.next()?.parse().ok()?;
            let path: Vec<&str> = f.collect();
            let path = path.join(" ");
            (flags & ACCEPTING != 0 && kind == STREAM && !path.is_empty() && !path.starts_with('@'))
                .then_some((inode, path))
        })
        .collect()
}

/// The control socket among the socket inodes a process holds: the listening one with a path,
/// as placed (the `.new` it was bound under taken off).
pub(crate) fn socket_of(held: &[u64], table: &[(u64, String)]) -> Option<PathBuf> {
    table
        .iter()
        .find(|(inode, _)| held.contains(inode))
        .map(|(_, path)| PathBuf::from(path.strip_suffix(".new").unwrap_or(path)))
}

/// The inode of a `/proc/<pid>/fd/N` link's target `socket:[12345]`.
fn socket_inode(target: &Path) -> Option<u64> {
    target
        .to_str()?
        .strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The running launcher the pid file names: its control socket's path. `Err`: no launcher
/// there (no file, a stale pid, no control socket), said for an operator.
pub(crate) fn find(pid_file: &Path) -> Result<PathBuf> {
    let at = pid_file.display();
    let text = std::fs::read_to_string(pid_file).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => anyhow!(
            "no launcher: no pid file at {at} (is the launcher running with this pid file and \
             data directory?)"
        ),
        _ => anyhow!("the pid file {at}: {e}"),
    })?;
    let pid: u32 = match text.trim().parse() {
        Ok(p) if p > 0 => p,
        _ => bail!(
            "no launcher: the pid file {at} holds no pid ({:?})",
            text.trim()
        ),
    };
    let comm = match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        Ok(c) => c.trim_end().to_string(),
        Err(_) => bail!(
            "no launcher: the pid file {at} names pid {pid}, which is not running (a stale pid \
             file: the launcher was killed)"
        ),
    };
    if comm != LAUNCHER_COMM {
        bail!(
            "no launcher: the pid file {at} names pid {pid}, which is {comm:?}, not a launcher \
             (a stale pid file, its pid used again)"
        );
    }
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_err(|e| {
        anyhow!(
            "the launcher's sockets can't be read (pid {pid}, /proc/{pid}/fd: {e}): run as its \
             user, or give --control-socket"
        )
    })?;
    let held: Vec<u64> = fds
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|target| socket_inode(&target))
        .collect();
    let table = std::fs::read_to_string("/proc/net/unix")
        .map_err(|e| anyhow!("reading /proc/net/unix: {e}"))?;
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_default();
    socket_of(&held, &listening(&table))
        // A socket bound by a relative path is named so: it is in the launcher's directory.
        .map(|p| cwd.join(p))
        .ok_or_else(|| {
            anyhow!(
                "the launcher (pid {pid}, from {at}) has no control socket (server.cluster.\
             controlSocket \"off\"?): give --admin-address for status, or send it signals"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
Num       RefCount Protocol Flags    Type St Inode Path
0000000000000000: 00000002 00000000 00010000 0001 01 4242 /srv/data/fhircluster.sock.new
0000000000000000: 00000003 00000000 00000000 0001 03 4243
0000000000000000: 00000002 00000000 00010000 0001 01 4244 @/tmp/.X11-unix/X0
0000000000000000: 00000002 00000000 00000000 0002 01 4245 /run/systemd/notify
0000000000000000: 00000002 00000000 00010000 0001 01 4246 /srv/other dir/x.sock
0000000000000000: 00000002 00000000 00010000 0001 01 4247 ./fhircluster.sock.new
";

    #[test]
    fn listening_stream_sockets_with_a_path_only() {
        let l = listening(TABLE);
        assert_eq!(
            l,
            vec![
                (4242, "/srv/data/fhircluster.sock.new".to_string()),
                (4246, "/srv/other dir/x.sock".to_string()),
                (4247, "./fhircluster.sock.new".to_string()),
            ]
        );
    }

    #[test]
    fn the_socket_the_process_holds_as_placed() {
        let l = listening(TABLE);
        assert_eq!(
            socket_of(&[7, 4243, 4242], &l),
            Some(PathBuf::from("/srv/data/fhircluster.sock"))
        );
        assert_eq!(socket_of(&[4243, 4245], &l), None, "none it holds listens");
        assert_eq!(socket_inode(Path::new("socket:[4242]")), Some(4242));
        assert_eq!(socket_inode(Path::new("pipe:[4242]")), None);
    }

    #[test]
    fn a_missing_file_and_a_dead_pid_are_no_launcher() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("fhircluster.pid");
        let e = find(&p).unwrap_err().to_string();
        assert!(
            e.starts_with("no launcher") && e.contains("no pid file"),
            "{e}"
        );
        // A pid beyond pid_max is never running.
        std::fs::write(&p, "4194305\n").expect("write");
        let e = find(&p).unwrap_err().to_string();
        assert!(e.contains("not running") && e.contains("4194305"), "{e}");
        std::fs::write(&p, format!("{}\n", std::process::id())).expect("write");
        let e = find(&p).unwrap_err().to_string();
        assert!(e.contains("not a launcher"), "this test binary: {e}");
    }
}
