//! A panic anywhere stops the launcher at once, with its message: no half-dead launcher.
//!
//! Without this, a panic in a tokio task is caught by tokio and only that task ends, and a panic
//! in another thread ends only that thread: the launcher may go on holding the public port with
//! its front door or its supervisor gone, answering nothing, never exiting, so the service
//! manager never restarts it. The hook writes one line to stderr and ends the process with exit
//! status 101 (Rust's for a panic) without unwinding or running destructors, so nothing can hang
//! on the way out. The children then get `SIGTERM` from `PR_SET_PDEATHSIG` and see their IPC
//! channel close, as when the launcher is killed, and stop.
//!
//! The line goes through the log queue once it runs (`logs::logging`), otherwise it is written
//! from a thread of its own; either way it is waited for at most `WRITE_WAIT`: a stderr that is
//! stuck (a full pipe, a stalled journal) must not keep the process alive.
//!
//! A test makes a running launcher panic through `test_hooks::panic_when_file`.

use std::io::Write;
use std::panic::PanicHookInfo;
use std::sync::mpsc;
use std::time::Duration;

/// The exit status of a launcher that panicked (as an unwound Rust main gives).
pub(crate) const PANIC_STATUS: i32 = 101;

/// How long the panic's line may take to be written before the process ends anyway.
pub(crate) const WRITE_WAIT: Duration = Duration::from_secs(2);

/// Makes every panic, in any thread or task, end the process promptly with its message.
pub fn install() {
    std::panic::set_hook(Box::new(|info| {
        let line = panic_line(info);
        // Through the log queue once it runs, so the line takes its place after the lines
        // before it (and its journald priority); the queue waits at most `WRITE_WAIT` too.
        if crate::logs::log_queue::started().is_some() {
            crate::logs::logging::fatal_within(line.trim_end(), WRITE_WAIT);
        } else {
            write_within(&line, WRITE_WAIT);
        }
        // At once: nothing here depends on destructors or atexit handlers running, which is
        // the point (one may be what is stuck).
        crate::system::ffi::exit_now(PANIC_STATUS)
    }));
}

/// `fhircluster: panic at src/x.rs:12:5: the message; the launcher exits (status 101)`, one line.
pub(crate) fn panic_line(info: &PanicHookInfo<'_>) -> String {
    let payload = info.payload();
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)");
    let place = info
        .location()
        .map(|l| format!(" at {}:{}:{}", l.file(), l.line(), l.column()))
        .unwrap_or_default();
    let message = message.replace('\n', " ");
    format!("fhircluster: panic{place}: {message}; the launcher exits (status {PANIC_STATUS})\n")
}

/// Writes `line` to stderr, waiting at most `wait` for the write to finish.
fn write_within(line: &str, wait: Duration) {
    let (done, finished) = mpsc::channel();
    let text = line.to_string();
    let writer = std::thread::Builder::new().spawn(move || {
        let _ = std::io::stderr().write_all(text.as_bytes());
        let _ = done.send(());
    });
    match writer {
        Ok(_) => {
            let _ = finished.recv_timeout(wait);
        }
        // No thread to be had (the very panic may be a failed thread spawn): write from here.
        Err(_) => {
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    //! The hook ends a whole process, so each case runs this test binary again as a child (this
    //! same test, which with `FATAL_CHILD` set plays the child's part) and checks how that child
    //! ended.

    use super::*;
    use std::process::Command;
    use std::time::Instant;

    const CASE_ENV: &str = "FATAL_CHILD";

    const THIS_TEST: &str =
        "fatal::tests::a_panicking_task_or_thread_ends_the_whole_process_promptly_with_its_message";

    /// Runs this test binary again, as the child of the test below, with `case`; its exit
    /// status, stderr and how long it took.
    fn run_child(case: &str) -> (Option<i32>, String, Duration) {
        let exe = std::env::current_exe().expect("the test binary");
        let started = Instant::now();
        let out = Command::new(exe)
            .args(["--exact", THIS_TEST, "--nocapture", "--test-threads", "1"])
            .env(CASE_ENV, case)
            .output()
            .expect("run the test binary");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            started.elapsed(),
        )
    }

    /// The child's part: install the hook and panic as `case` says. Returning means the hook did
    /// not end the process, and the parent then sees status 0.
    fn panic_as_told(case: &str) {
        install();
        match case {
            "current-thread-task" | "multi-thread-task" => {
                let rt = if case == "current-thread-task" {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                } else {
                    tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(2)
                        .enable_all()
                        .build()
                }
                .expect("runtime");
                rt.block_on(async {
                    // tokio catches the task's panic and hands it to the join handle: only the
                    // hook can stop the process now.
                    let task = tokio::spawn(async { panic!("a task\nfails") });
                    let _ = task.await;
                    // The launcher would go on serving here, with a part of itself gone.
                    tokio::time::sleep(Duration::from_secs(15)).await;
                });
            }
            "thread" => {
                let _ = std::thread::spawn(|| panic!("a thread fails")).join();
                std::thread::sleep(Duration::from_secs(15));
            }
            other => panic!("unknown case {other}"),
        }
    }

    #[test]
    fn a_panicking_task_or_thread_ends_the_whole_process_promptly_with_its_message() {
        // Run again as its own child (below), this test is that child.
        if let Ok(case) = std::env::var(CASE_ENV) {
            panic_as_told(&case);
            return;
        }
        for (case, message) in [
            ("current-thread-task", "a task fails"),
            ("multi-thread-task", "a task fails"),
            ("thread", "a thread fails"),
        ] {
            let (code, stderr, took) = run_child(case);
            assert_eq!(code, Some(PANIC_STATUS), "{case}: {stderr}");
            let line = stderr
                .lines()
                .find(|l| l.starts_with("fhircluster: panic at "))
                .unwrap_or_else(|| panic!("{case}: no panic line in {stderr:?}"));
            assert!(line.contains(message), "{case}: {line}");
            assert!(line.contains("src/fatal.rs:"), "{case}: {line}");
            assert!(
                line.ends_with("the launcher exits (status 101)"),
                "{case}: {line}"
            );
            // The child would otherwise sleep 15 s after the panic.
            assert!(took < Duration::from_secs(10), "{case}: took {took:?}");
        }
    }
}
