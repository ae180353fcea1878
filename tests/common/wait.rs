//! Waiting on a condition with a deadline: every wait in the tests polls what it waits for and
//! fails naming it, so a test never hangs and never guesses how long a state takes to come.

use super::*;

/// Looks at `check` every `every` until it gives `Some`, or panics naming `what` after `timeout`.
pub fn poll_every<T>(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(every);
    }
}

/// Polls `check` every 100 ms until it gives `Some`, or panics naming `what` after `timeout`
/// (100 ms: a check that is itself a request to a process stays a small part of its load).
pub fn poll<T>(what: &str, timeout: Duration, check: impl FnMut() -> Option<T>) -> T {
    poll_every(what, timeout, Duration::from_millis(100), check)
}

/// Polls `check` every 20 ms until it is true, or panics naming `what` after `timeout`.
pub fn wait_until(what: &str, timeout: Duration, mut check: impl FnMut() -> bool) {
    poll_every(what, timeout, Duration::from_millis(20), || {
        check().then_some(())
    });
}

/// Polls `f` every 20 ms until it returns true; false when `timeout` passes first (for a test
/// that asserts the outcome itself, with its own message).
pub fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts `check` stays true for the whole of `span`, looking every 20 ms: for a state that
/// must last (nothing answered yet, nothing more logged), where the waiting is the check.
pub fn holds_for(what: &str, span: Duration, mut check: impl FnMut() -> bool) {
    holds_for_or(what, span, || {
        if check() {
            Ok(())
        } else {
            Err(String::new())
        }
    });
}

/// As `holds_for`, with `check` saying what it saw when the state is gone.
pub fn holds_for_or(what: &str, span: Duration, mut check: impl FnMut() -> Result<(), String>) {
    let end = Instant::now() + span;
    loop {
        if let Err(seen) = check() {
            panic!("{what} stopped holding within {span:?}: {seen}");
        }
        if Instant::now() >= end {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
