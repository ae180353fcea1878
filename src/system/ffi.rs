//! The calls into libc that have no safe wrapper in std or nix here, in one place (the style
//! notes' point 9: `unsafe` confined and commented). Each function is safe to call: its
//! `unsafe` block says why the call is sound. The rest of the product calls these: the crate roots
//! deny `unsafe_code` everywhere but here, and `clippy::undocumented_unsafe_blocks` holds the
//! `SAFETY:` comments.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::sync::{Mutex, OnceLock};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// The process's effective uid.
pub fn euid() -> u32 {
    // SAFETY: geteuid takes nothing, always succeeds and touches no memory of ours.
    unsafe { libc::geteuid() }
}

/// `CLOCK_MONOTONIC` as (seconds, nanoseconds).
pub fn monotonic() -> (u64, u64) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec passed; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64, ts.tv_nsec as u64)
}

/// A constant of the system (`_SC_CLK_TCK`, ...), when it is known and positive.
pub fn sysconf(name: libc::c_int) -> Option<u64> {
    // SAFETY: sysconf reads a constant of the system; it has no preconditions.
    let v = unsafe { libc::sysconf(name) };
    u64::try_from(v).ok().filter(|&v| v > 0)
}

/// The soft `RLIMIT_NOFILE`.
pub fn open_files_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit into `lim`, which lives for the call.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    (rc == 0).then_some(lim.rlim_cur)
}

/// Makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`).
pub fn set_child_subreaper() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only; it changes this process's attributes.
    let r = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };
    if r == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Bytes written to the socket `fd` and not yet taken by its peer (`TIOCOUTQ`); 0 if unknown.
/// `fd` must be open (a closed one gives 0; a reused one, another socket's figure).
pub fn unsent_bytes(fd: RawFd) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ writes one int into `n`, which lives for the call; a bad `fd` is an
    // error return, not undefined behaviour.
    let r = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n) };
    if r == 0 {
        usize::try_from(n).unwrap_or(0)
    } else {
        0
    }
}

/// Ends the process at once with `status`: no destructors, no atexit handlers.
pub fn exit_now(status: i32) -> ! {
    // SAFETY: `_exit` ends the process at once; the callers depend on no destructor or
    // atexit handler running, which is the point (one may be what is stuck).
    unsafe { libc::_exit(status) }
}

/// A pidfd for process `pid` (`pidfd_open(2)`): readable once it has exited.
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: a plain syscall with integer arguments; on success it returns a new fd that
    // nothing else owns.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(|_| io::Error::other("pidfd out of range"))?;
    // SAFETY: a fresh fd from pidfd_open, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether child `pid` has exited, without reaping it (`waitid` with `WNOWAIT | WNOHANG`):
/// `Ok(false)` while it runs, an error when it is no child of this process (any more).
pub fn child_has_exited(pid: u32) -> io::Result<bool> {
    let raw: libc::id_t = pid;
    // SAFETY: a zeroed siginfo_t for the kernel to fill; waitid with WNOHANG does not block.
    let mut info = unsafe { std::mem::zeroed::<libc::siginfo_t>() };
    let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: as above; `info` outlives the call.
    let r = unsafe { libc::waitid(libc::P_PID, raw, &mut info, flags) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: filled by a successful waitid; 0 when nothing has exited (WNOHANG).
    Ok(unsafe { info.si_pid() } != 0)
}

/// `fd` registered with tokio's reactor for readiness to read.
pub fn watch_readable(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: the AsyncFd owns the OwnedFd, which stays open (and the same fd) until the
    // AsyncFd is dropped.
    unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.map_err(|e| e.into_parts().1)
}

/// Hands the allocator's free heap pages back to the system (glibc's `malloc_trim`; nothing
/// elsewhere).
pub fn malloc_trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and releases the allocator's own free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Hands the launcher's free heap pages back to the system: jemalloc's (the launcher's
/// allocator, `main.rs`), whose freed pages are otherwise returned only as its decay sees
/// allocations go on (seconds after a crowd parked, or never while the launcher is quiet), and
/// glibc's, which the C parts (SQLite) use.
pub fn allocator_purge() {
    // jemalloc's `MALLCTL_ARENAS_ALL`: every arena.
    const PURGE_ALL: &std::ffi::CStr = c"arena.4096.purge";
    // SAFETY: a purge reads and writes no value: null old and new pointers, length 0; the name
    // is a NUL-terminated string that outlives the call. An error (no such arena) is harmless.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            PURGE_ALL.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
    malloc_trim();
}

/// `IPV6_V6ONLY` set to `on` on the IPv6 socket `fd`.
pub fn set_ipv6_only(fd: RawFd, on: bool) -> io::Result<()> {
    let value: libc::c_int = on.into();
    // SAFETY: the option value is a c_int that outlives the call, and its size is passed; a
    // bad fd is an error return.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_IPV6,
            libc::IPV6_V6ONLY,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A new anonymous memory file (`memfd_create`, close-on-exec), owned by the caller.
pub fn memfd_create(name: &std::ffi::CStr) -> io::Result<OwnedFd> {
    // SAFETY: a plain syscall with a valid C string; on success a new fd nothing else owns.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the fresh fd from memfd_create.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The fds [`adopt_inherited`] has taken: each is taken once, so no two owners close it.
static ADOPTED: Mutex<Vec<RawFd>> = Mutex::new(Vec::new());

/// The fds above stderr open when the program began ([`note_inherited_fds`]): the only ones it
/// can have inherited. `None` inside when `/proc/self/fd` could not be read.
static AT_ENTRY: OnceLock<Option<Vec<RawFd>>> = OnceLock::new();

/// Notes the fds this program was started with. Called first in `main`, before the runtime or
/// anything else opens a file: a number named in the environment or the handed-over state that
/// was not open then (the handing program closed it, or named it wrongly) is refused by
/// [`adopt_inherited`] even when a file this program opened since got that number, instead of
/// that file (the reactor's epoll, the events database) being taken over and closed.
pub fn note_inherited_fds() {
    AT_ENTRY.get_or_init(open_fds);
}

/// The fds above stderr open now, from `/proc/self/fd`.
fn open_fds() -> Option<Vec<RawFd>> {
    let listed: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    // The listing's own fd was among them, and is closed now.
    let open = |fd: &RawFd| nix::fcntl::fcntl(*fd, nix::fcntl::FcntlArg::F_GETFD).is_ok();
    Some(listed.into_iter().filter(open).collect())
}

/// Takes ownership of `fd`, one this program inherited across its `execve` (named in the
/// environment or the handed-over state), for this program alone to close. An fd that is not
/// open, one not open when the program began (once [`note_inherited_fds`] ran), or one taken
/// already, is refused: two `OwnedFd`s for one fd would close it twice, the second time perhaps
/// another file that got its number.
pub fn adopt_inherited(fd: RawFd) -> io::Result<OwnedFd> {
    adopt_checked(fd, AT_ENTRY.get().and_then(Option::as_deref))
}

/// [`adopt_inherited`] against the fds open at entry, `None` when they are not known.
pub(crate) fn adopt_checked(fd: RawFd, at_entry: Option<&[RawFd]>) -> io::Result<OwnedFd> {
    let mut adopted = ADOPTED.lock().unwrap_or_else(|p| p.into_inner());
    if adopted.contains(&fd) {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("fd {fd} was taken over already"),
        ));
    }
    if at_entry.is_some_and(|fds| !fds.contains(&fd)) {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("fd {fd} was not open when this program began, so it was not inherited"),
        ));
    }
    nix::fcntl::fcntl(fd, nix::fcntl::FcntlArg::F_GETFD).map_err(io::Error::from)?;
    adopted.push(fd);
    // SAFETY: the fd is open (F_GETFD succeeded), it came to this program by its execve for
    // this use (open at entry where that is known; otherwise the caller's contract: nothing
    // else in the program opened it), and the list above makes this its one owner.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sets `sig` to be ignored (`SIG_IGN`) by this process.
pub fn ignore_signal(sig: nix::sys::signal::Signal) -> io::Result<()> {
    use nix::sys::signal::{signal, SigHandler};
    // SAFETY: `signal` is unsafe for the handler code it installs; `SIG_IGN` installs none.
    unsafe { signal(sig, SigHandler::SigIgn) }
        .map(drop)
        .map_err(io::Error::from)
}

/// Sets up `cmd` so that, in the forked child before its exec, `fd` becomes `as_fd` (without
/// close-on-exec, so the program gets it) and the child gets `death_signal` when the thread
/// that forked it ends (`PR_SET_PDEATHSIG`); the child fails to start (`ESRCH`) when this
/// process died between the fork and the `prctl`, since then no signal would come. `fd` moves
/// into `cmd`, open in this process until `cmd` is dropped.
pub fn child_gets_fd_and_death_signal(
    cmd: &mut std::process::Command,
    fd: OwnedFd,
    as_fd: RawFd,
    death_signal: libc::c_int,
) {
    let parent = std::process::id() as libc::pid_t;
    let death_signal = death_signal as libc::c_ulong;
    // SAFETY: the closure runs in the forked child before exec and calls only async-signal-safe
    // functions (dup2, fcntl, prctl, getppid) on plain integers; it allocates nothing and takes
    // no lock. `fd` is kept alive by the closure, so it is open at fork.
    unsafe {
        cmd.pre_exec(move || {
            let raw = fd.as_raw_fd();
            if raw == as_fd {
                // dup2 onto itself would leave close-on-exec set: clear it instead.
                if libc::fcntl(raw, libc::F_SETFD, 0) == -1 {
                    return Err(io::Error::last_os_error());
                }
            } else if libc::dup2(raw, as_fd) == -1 {
                return Err(io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, death_signal, 0, 0, 0) == -1 {
                return Err(io::Error::last_os_error());
            }
            // (An OS error code, not a message: nothing may allocate between fork and exec.)
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}
