//! The calls into libc that have no safe wrapper in std or nix here, in one place (the style
//! notes' point 9: `unsafe` confined and commented). Each function is safe to call: its
//! `unsafe` block says why the call is sound. The rest of the product calls these, and
//! `tests/unsafe_home.rs` fails when `unsafe` appears outside the files it allows.

use std::io;
use std::os::fd::RawFd;

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
