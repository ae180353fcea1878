//! The guardian process (see `guardian.rs`): `fhircluster-guardian <launcher pid> <killSeconds in
//! ms> <run>`, with the launcher's pipe as stdin. It reads the process groups it is told until
//! the pipe ends, then ends every process of the run still there: the groups, and what carries
//! the run's mark (`SIGTERM`, `SIGKILL` after `killSeconds`). After an orderly stop there is
//! nothing left and it exits without a word.
//!
//! It ignores the signals that stop a launcher (`TERM`, `INT`, `HUP`, `QUIT`): a stop sent to
//! every process by name must not take the guardian first. Its lines go to the launcher's stderr
//! from a thread of their own, after the signals are sent, so a stuck log pipe can't keep it
//! from its work.

use std::collections::BTreeSet;
use std::io::BufRead;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

use nix::sys::signal::Signal;

use super::guardian::NAME;
use super::members::{self, Mark, Wanted};
use super::sweep;

/// Runs the guardian when this process was started as one (its `argv[0]` is `guardian::NAME`).
pub fn run_if_asked() -> Option<ExitCode> {
    let mut args = std::env::args_os();
    let arg0 = args.next()?;
    if std::path::Path::new(&arg0).file_name()? != NAME {
        return None;
    }
    let args: Vec<String> = args.filter_map(|a| a.into_string().ok()).collect();
    Some(match parse_args(&args) {
        Some((launcher, kill_after, run)) => guard(launcher, kill_after, &run),
        None => {
            eprintln!("{NAME}: started by the launcher only (arguments: <pid> <ms> <run>)");
            ExitCode::from(2)
        }
    })
}

/// `<launcher pid> <killSeconds in ms> <run>`.
fn parse_args(args: &[String]) -> Option<(u32, Duration, String)> {
    match args {
        [pid, ms, run] if !run.is_empty() => Some((
            pid.parse().ok()?,
            Duration::from_millis(ms.parse().ok()?),
            run.clone(),
        )),
        _ => None,
    }
}

/// One line from the launcher: `+<pgid>` (watch it) or `-<pgid>` (it has ended).
pub(crate) fn apply(line: &str, groups: &mut BTreeSet<u32>) {
    let line = line.trim();
    let (add, pgid) = match line.split_at_checked(1) {
        Some(("+", n)) => (true, n),
        Some(("-", n)) => (false, n),
        _ => return,
    };
    // 0 and 1 are never a child's group (kill(-1) would be every process).
    match pgid.parse::<u32>() {
        Ok(p) if p > 1 && add => {
            groups.insert(p);
        }
        Ok(p) => {
            groups.remove(&p);
        }
        Err(_) => {}
    }
}

fn guard(launcher: u32, kill_after: Duration, run: &str) -> ExitCode {
    for sig in [
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGQUIT,
    ] {
        let _ = crate::system::ffi::ignore_signal(sig);
    }
    let mut groups = BTreeSet::new();
    let mut lines = std::io::stdin().lock();
    let mut line = String::new();
    // EOF (or a read error): the launcher has gone.
    while matches!(lines.read_line(&mut line), Ok(n) if n > 0) {
        apply(&line, &mut groups);
        line.clear();
    }
    let wanted = Wanted {
        groups,
        mark: Mark::Run(run.to_string()),
        except: vec![std::process::id()],
    };
    let (say, said) = writer();
    let swept = sweep::end(&wanted, kill_after, false, |pids| {
        let _ = say.send(format!(
            "{NAME}: the launcher (pid {launcher}) has gone without stopping its processes; \
             stopping {} (SIGTERM, SIGKILL after {} s)",
            members::describe(std::path::Path::new("/"), pids, 8),
            kill_after.as_secs_f64()
        ));
    });
    if !swept.found.is_empty() {
        let _ = say.send(if swept.left.is_empty() {
            format!("{NAME}: every process of the launcher (pid {launcher}) has stopped")
        } else {
            format!(
                "{NAME}: still running after SIGKILL, given up: {}",
                members::describe(std::path::Path::new("/"), &swept.left, 8)
            )
        });
    }
    drop(say);
    // A stuck stderr keeps the lines, not the guardian.
    let _ = said.recv_timeout(Duration::from_secs(2));
    ExitCode::SUCCESS
}

/// Lines written to stderr by a thread of their own; the receiver hears when all are written.
fn writer() -> (mpsc::Sender<String>, mpsc::Receiver<()>) {
    let (tx, rx) = mpsc::channel::<String>();
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in rx {
            eprintln!("{line}");
        }
        let _ = done_tx.send(());
    });
    (tx, done_rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launchers_lines_add_and_remove_groups_and_nothing_else() {
        let mut g = BTreeSet::new();
        for l in [
            "+100\n",
            "+200",
            "+0",
            "+1",
            "-100",
            "x12",
            "+",
            "+-5",
            "+3000000000",
        ] {
            apply(l, &mut g);
        }
        assert_eq!(g, BTreeSet::from([200, 3_000_000_000]));
    }

    #[test]
    fn arguments_are_the_launchers_pid_kill_seconds_and_run() {
        let a = |v: &[&str]| parse_args(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            a(&["12", "5000", "12.34"]),
            Some((12, Duration::from_secs(5), "12.34".to_string()))
        );
        assert_eq!(a(&["12", "5000", ""]), None);
        assert_eq!(a(&["12", "x", "r"]), None);
        assert_eq!(a(&["12", "5000"]), None);
    }
}
