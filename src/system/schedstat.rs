//! How long a process's main thread has wanted the CPU: `/proc/<pid>/task/<pid>/schedstat`
//! gives the nanoseconds it ran and the nanoseconds it was runnable but waited for a core. For
//! a Node process the main thread is the event loop (`proxy::saturation` says why it matters).
//! A wrapper that doesn't `exec` shows its own idle thread: never saturated, which is the
//! spec's behaviour.

use std::path::Path;

use super::unreadable::{read_text, Unreadable};

/// Parses `schedstat`: `<run ns> <wait ns> <timeslices>`; returns run + wait.
pub fn parse_schedstat(text: &str) -> Result<u64, String> {
    let mut fields = text.split_whitespace();
    let mut next = |name: &str| -> Result<u64, String> {
        let f = fields.next().ok_or_else(|| format!("no {name}"))?;
        f.parse()
            .map_err(|_| format!("{name} {f:?} is not a number"))
    };
    let run = next("run time")?;
    let wait = next("wait time")?;
    Ok(run.saturating_add(wait))
}

/// Reads `<root>/proc/<pid>/task/<pid>/schedstat`: the main thread's run + wait nanoseconds.
pub fn read_main_thread_busy_ns(root: &Path, pid: u32) -> Result<u64, Unreadable> {
    let path = root.join(format!("proc/{pid}/task/{pid}/schedstat"));
    parse_schedstat(&read_text(&path)?).map_err(|why| Unreadable::parse(&path, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_and_wait_are_added() {
        assert_eq!(parse_schedstat("158604671 14973304 600\n"), Ok(173_577_975));
        assert!(parse_schedstat("").is_err());
        assert!(parse_schedstat("12 x 3").is_err());
        assert_eq!(parse_schedstat("18446744073709551615 5 1"), Ok(u64::MAX));
    }

    #[test]
    fn a_busy_process_wants_the_cpu_all_the_time_and_an_idle_one_does_not() {
        use std::process::{Command, Stdio};
        use std::time::{Duration, Instant};
        let spawn = |prog: &str, arg: &str| {
            Command::new(prog)
                .arg(arg)
                .stdout(Stdio::null())
                .spawn()
                .expect("spawn a child")
        };
        let mut busy = spawn("yes", "y");
        let mut idle = spawn("sleep", "5");
        let root = Path::new("/");
        let share = |pid: u32| {
            let t0 = Instant::now();
            let a = read_main_thread_busy_ns(root, pid).expect("schedstat");
            std::thread::sleep(Duration::from_millis(300));
            let b = read_main_thread_busy_ns(root, pid).expect("schedstat");
            (b - a) as f64 / t0.elapsed().as_nanos() as f64
        };
        let (b, i) = (share(busy.id()), share(idle.id()));
        let _ = busy.kill();
        let _ = idle.kill();
        let _ = busy.wait();
        let _ = idle.wait();
        // Running or waiting for a core, a busy loop accounts for nearly all of the wall time.
        assert!(b > 0.8, "busy share {b}");
        assert!(i < 0.05, "idle share {i}");
        assert!(read_main_thread_busy_ns(Path::new("/nonexistent-root"), 1).is_err());
    }
}
