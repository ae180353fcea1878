//! How long a process's main thread has wanted the CPU: `/proc/<pid>/task/<pid>/schedstat`
//! gives the nanoseconds it ran and the nanoseconds it was runnable but waited for a core. For
//! a Node process the main thread is the event loop (`proxy::saturation` says why it matters).
//! A wrapper that doesn't `exec` shows its own idle thread: never saturated, which is the
//! spec's behaviour. And whether that thread is asleep now (`/proc/<pid>/task/<pid>/stat`):
//! only then are both figures whole, since the kernel adds a wait for a core when it ends and
//! run time at a tick or a switch.

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

/// Parses a thread's `stat` (`<tid> (<comm>) <state> ...`; the name may hold spaces and
/// parentheses): whether it is asleep, waiting for something other than a core (`S`, `D`,
/// `I`). Running or runnable (`R`), stopped or gone is not asleep.
pub fn parse_asleep(text: &str) -> Result<bool, String> {
    let after = text.rfind(')').map(|i| &text[i + 1..]).ok_or("no (name)")?;
    let state = after.split_whitespace().next().ok_or("no state")?;
    Ok(matches!(state, "S" | "D" | "I"))
}

/// The main thread's run + wait nanoseconds, and whether it was asleep when read.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    pub busy_ns: u64,
    pub asleep: bool,
}

/// Reads `<root>/proc/<pid>/task/<pid>/stat` and then `schedstat` (`Reading`).
pub fn read_main_thread(root: &Path, pid: u32) -> Result<Reading, Unreadable> {
    let path = root.join(format!("proc/{pid}/task/{pid}/stat"));
    let asleep = parse_asleep(&read_text(&path)?).map_err(|why| Unreadable::parse(&path, why))?;
    Ok(Reading {
        busy_ns: read_main_thread_busy_ns(root, pid)?,
        asleep,
    })
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
    fn asleep_is_the_state_after_the_name() {
        assert_eq!(parse_asleep("42 (node) S 1 42 42 0 -1"), Ok(true));
        assert_eq!(parse_asleep("42 (node) R 1 42 42 0 -1"), Ok(false));
        assert_eq!(parse_asleep("42 (a) R (b)) D 1 2"), Ok(true));
        assert_eq!(parse_asleep("7 (kworker) I 2"), Ok(true));
        assert_eq!(parse_asleep("7 (x) Z 1"), Ok(false));
        assert!(parse_asleep("42 node S").is_err());
        assert!(parse_asleep("42 (node)").is_err());
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
        let asleep = |pid| read_main_thread(root, pid).expect("stat").asleep;
        assert!(asleep(idle.id()), "sleep(1) is asleep");
        assert!(!asleep(busy.id()), "yes(1) runs or waits for a core");
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
