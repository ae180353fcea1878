//! Processes as /proc shows them: signals, children, liveness.

use super::*;

/// Sends a signal to a process this test started (by pid).
pub fn unsafe_kill(pid: i32, sig: i32) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status();
}

/// Direct children of `pid`, read from /proc.
pub fn children_of(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) {
            // The ppid is the second field after the ")" that ends the command name.
            if let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) {
                let f: Vec<&str> = rest.split_whitespace().collect();
                if f.get(1).and_then(|s| s.parse::<i32>().ok()) == Some(pid) {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// Whether `pid` is a launcher's guardian (its `argv[0]` is `fhircluster-guardian`).
pub fn is_guardian(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.split(|&b| b == 0).next() == Some(b"fhircluster-guardian".as_slice()))
}

pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // A zombie has exited.
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Raises this process's open-file limit to its hard limit, for tests that hold many
/// connections open.
pub fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// `pid`'s resident set in bytes once it has settled: two readings 200 ms apart within 256 KB of
/// each other (a process just started still maps and touches memory for a moment).
pub fn steady_rss(pid: i32) -> u64 {
    let read = || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<u64>()
            .ok()
            .map(|kb| kb * 1024)
    };
    let mut last = read();
    let what = format!("pid {pid}'s RSS to settle");
    poll_every(
        &what,
        Duration::from_secs(10),
        Duration::from_millis(200),
        || {
            let now = read();
            let steady = matches!((last, now), (Some(a), Some(b)) if a.abs_diff(b) < 256 * 1024);
            last = now;
            steady.then_some(now).flatten()
        },
    )
}
