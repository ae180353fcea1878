//! The master given up (RESTART-7): the one ERROR that says so, naming the rule, how its last
//! run ended and the last lines it wrote on its stderr.

use std::time::Duration;

use tracing::error;

use crate::supervisor::output::OutputSink;

/// The master was given up (RESTART-7): one ERROR naming the rule, how its last run ended and
/// the last lines it wrote on its stderr (read to their end first, for up to a second).
pub(super) async fn log(
    output: OutputSink,
    code: String,
    failures: u32,
    max: u32,
    end: Option<String>,
) {
    let tail = output.stderr_tail(&code, Duration::from_secs(1)).await;
    let line = give_up_line(&code, failures, max, end.as_deref(), tail.lines());
    error!("{line}");
}

/// `m0: the master exited 6 times in a row without getting ready (server.cluster.maxStartFailures
/// 6); giving up. Its last run ended with exit code 3; its last lines on stderr: a | b`. One line,
/// whatever the process wrote (DEC-12).
fn give_up_line<'a>(
    code: &str,
    failures: u32,
    max: u32,
    end: Option<&str>,
    stderr: impl Iterator<Item = &'a str>,
) -> String {
    let times = if failures == 1 { "time" } else { "times" };
    let mut line = format!(
        "{code}: the master exited {failures} {times} in a row without getting ready \
         (server.cluster.maxStartFailures {max}); giving up"
    );
    if let Some(end) = end {
        line.push_str(&format!(". Its last run ended with {end}"));
    }
    line.push_str(&said_on_stderr(stderr));
    line
}

/// `; its last lines on stderr: a | b`, or `; it wrote nothing on stderr`: one line, whatever
/// the process wrote (DEC-12).
pub(super) fn said_on_stderr<'a>(stderr: impl Iterator<Item = &'a str>) -> String {
    let said: Vec<String> = stderr
        .map(|l| crate::logs::terminal_safe::escape_controls(l.trim()).into_owned())
        .filter(|l| !l.is_empty())
        .collect();
    if said.is_empty() {
        "; it wrote nothing on stderr".to_string()
    } else {
        format!("; its last lines on stderr: {}", said.join(" | "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_give_up_line_names_the_rule_the_last_exit_and_the_last_stderr_lines() {
        let line = give_up_line(
            "m0",
            6,
            6,
            Some("exit code 3"),
            [
                "Error: Cannot find module 'x'",
                "",
                "    at load (node:internal)",
            ]
            .into_iter(),
        );
        assert_eq!(
            line,
            "m0: the master exited 6 times in a row without getting ready \
             (server.cluster.maxStartFailures 6); giving up. Its last run ended with exit code 3; \
             its last lines on stderr: Error: Cannot find module 'x' | at load (node:internal)"
        );
        let line = give_up_line("m0", 1, 1, Some("signal SIGSEGV"), std::iter::empty());
        assert!(line.contains("exited 1 time in a row"), "{line}");
        assert!(
            line.ends_with("ended with signal SIGSEGV; it wrote nothing on stderr"),
            "{line}"
        );
        assert!(!line.contains('\n'));
    }
}
