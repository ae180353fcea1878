//! The in-place upgrade's effects: the program's path (recorded at start: once the file is
//! replaced, `/proc/self/exe` reads "… (deleted)"), the state written to a memfd, the fds to
//! keep made inheritable, and `execve` — run on the spawner thread (`supervisor::spawner`), the
//! thread every child's `PR_SET_PDEATHSIG` is tied to, so no child hears of it. The new program
//! finds the state through [`STATE_VAR`] ([`inherited`]); no child inherits the variable.

use std::ffi::{CString, OsString};
use std::io::{self, Read, Seek, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::OnceLock;

use nix::sys::signal::{pthread_sigmask, SigSet, SigmaskHow, Signal};

use super::state::{self, Handover};

/// Names the inherited fd holding the handed-over state.
pub(crate) const STATE_VAR: &str = "FHIRCLUSTER_UPGRADE_STATE";

static PROGRAM: OnceLock<Option<PathBuf>> = OnceLock::new();
static STARTED_MS: OnceLock<u64> = OnceLock::new();

/// Records the program's path (and when this program started); call first thing (before the
/// file can have been replaced).
pub fn record_path() {
    PROGRAM.get_or_init(|| std::env::current_exe().ok());
    STARTED_MS.get_or_init(crate::clock::unix_ms);
}

/// When this program (not the process: an upgrade starts a new program) started, ms since the
/// Unix epoch.
pub(crate) fn program_started_ms() -> u64 {
    *STARTED_MS.get_or_init(crate::clock::unix_ms)
}

/// The path the launcher was started from (what an upgrade executes).
pub(crate) fn program_path() -> Option<PathBuf> {
    PROGRAM.get_or_init(|| std::env::current_exe().ok()).clone()
}

/// Sets or clears `FD_CLOEXEC` on `fd`.
fn set_cloexec(fd: RawFd, on: bool) -> io::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    let flags = FdFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFD)?);
    let flags = if on {
        flags | FdFlag::FD_CLOEXEC
    } else {
        flags - FdFlag::FD_CLOEXEC
    };
    fcntl(fd, FcntlArg::F_SETFD(flags))?;
    Ok(())
}

fn memfd(bytes: &[u8]) -> io::Result<OwnedFd> {
    let fd = crate::system::ffi::memfd_create(c"fhircluster-upgrade")?;
    let mut f = std::fs::File::from(fd);
    f.write_all(bytes)?;
    f.rewind()?;
    Ok(OwnedFd::from(f))
}

fn cstring(b: &[u8]) -> io::Result<CString> {
    CString::new(b).map_err(|_| io::Error::other("a NUL byte in an argument"))
}

/// Replaces this program with `program`, handing it `h` and the fds in `keep` (every fd `h`
/// names). Returns only on failure, with every fd as it was (close-on-exec again).
pub(crate) fn exec(program: PathBuf, h: &Handover, keep: &[RawFd]) -> io::Error {
    if let Err(why) = crate::test_hooks::failing("memfd") {
        return io::Error::other(why);
    }
    let encoded = state::encode(h);
    crate::test_hooks::record_state(&encoded);
    let state = match memfd(&encoded) {
        Ok(fd) => fd,
        Err(e) => return e,
    };
    let all: Vec<RawFd> = keep.iter().copied().chain([state.as_raw_fd()]).collect();
    for &fd in &all {
        if let Err(e) = set_cloexec(fd, false) {
            restore(&all);
            return e;
        }
    }
    let prepared = (|| -> io::Result<(CString, Vec<CString>, Vec<CString>)> {
        let path = cstring(program.as_os_str().as_bytes())?;
        let argv = std::env::args_os()
            .map(|a| cstring(a.as_bytes()))
            .collect::<io::Result<Vec<_>>>()?;
        let mut envp = Vec::new();
        for (k, v) in std::env::vars_os() {
            if k == STATE_VAR {
                continue;
            }
            let mut kv = OsString::from(&k);
            kv.push("=");
            kv.push(&v);
            envp.push(cstring(kv.as_bytes())?);
        }
        envp.push(cstring(
            format!("{STATE_VAR}={}", state.as_raw_fd()).as_bytes(),
        )?);
        Ok((path, argv, envp))
    })();
    let (path, argv, envp) = match prepared {
        Ok(p) => p,
        Err(e) => {
            restore(&all);
            return e;
        }
    };
    // On the spawner thread: the one thread execve leaves, the one the children are tied to.
    // The signals the launcher catches are held back across the execve (the mask is kept,
    // the handlers are not): one sent meanwhile waits for the new program's handlers instead
    // of ending the launcher by its default action.
    let test_fail = crate::test_hooks::exec_refusal();
    let failed = crate::supervisor::spawner::on_spawner(move || {
        mask(SigmaskHow::SIG_BLOCK);
        if let Some(refusal) = test_fail {
            mask(SigmaskHow::SIG_UNBLOCK);
            return refusal;
        }
        // Returns only on failure, and then nothing was changed.
        let e = match nix::unistd::execve(&path, &argv, &envp) {
            Err(errno) => io::Error::from(errno),
            Ok(never) => match never {},
        };
        mask(SigmaskHow::SIG_UNBLOCK);
        e
    });
    restore(&all);
    drop(state);
    match failed {
        Ok(e) | Err(e) => e,
    }
}

/// Blocks or unblocks, on the calling thread, every signal the launcher catches.
fn mask(how: SigmaskHow) {
    let mut set = SigSet::empty();
    for s in crate::signals::Sig::ALL {
        if let Ok(sig) = Signal::try_from(s.number()) {
            set.add(sig);
        }
    }
    let _ = pthread_sigmask(how, Some(&set), None);
}

/// After an upgrade the signals arrive held back (`exec`): once the launcher catches them,
/// this thread takes them again (its other threads keep them held; one thread suffices).
/// A no-op after an ordinary start.
pub(crate) fn unblock_signals() {
    mask(SigmaskHow::SIG_UNBLOCK);
}

fn restore(fds: &[RawFd]) {
    for &fd in fds {
        let _ = set_cloexec(fd, true);
    }
}

/// The state handed over by the program before, when this program was started by an upgrade:
/// `None` for an ordinary start.
pub(crate) fn inherited() -> Option<Result<Handover, String>> {
    let value = std::env::var(STATE_VAR).ok()?;
    Some(read_state(&value))
}

fn read_state(value: &str) -> Result<Handover, String> {
    let fd: RawFd = value
        .trim()
        .parse()
        .map_err(|_| format!("{STATE_VAR} is not an fd number"))?;
    // Passed for this alone; read once.
    let fd =
        crate::system::ffi::adopt_inherited(fd).map_err(|e| format!("{STATE_VAR} {fd}: {e}"))?;
    let mut f = std::fs::File::from(fd);
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    state::decode(&bytes).map_err(|e| e.to_string())
}

/// Takes ownership of an fd named in the handed-over state, close-on-exec again.
pub(crate) fn adopt_fd(fd: RawFd) -> io::Result<OwnedFd> {
    set_cloexec(fd, true)?;
    // Inherited for this; the state names each fd once.
    crate::system::ffi::adopt_inherited(fd)
}
