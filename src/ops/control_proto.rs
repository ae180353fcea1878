//! The control socket's protocol (`control_socket.rs` serves it, `control_client.rs` asks it),
//! pure: one request line, `<command> [arguments]`, and one answer line, a JSON object (an
//! error is `{"error": "..."}`), then the connection closes, as HAProxy's stats socket does in
//! its non-interactive mode (`echo status | socat - UNIX-CONNECT:fhircluster.sock`).
//!
//! Each command has a level, as HAProxy's socket levels: `read` commands only look, `action`
//! commands change the running launcher. The socket takes both (only the service user and its
//! group reach it); the HTTP admin listener is the read level only (`/livez`, `/readyz`,
//! `/status`, `/metrics`) and refuses an action's path (`admin.rs`). A new action (`scale N`)
//! is a variant here, its line in [`COMMANDS`], an arm of [`parse`] and one of the server's
//! dispatch.

use serde_json::{json, Value};

/// The longest request line read (a command and a few arguments); a longer one is refused.
pub(crate) const MAX_LINE: usize = 1024;

/// What a command may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    /// Looks only: also on the HTTP admin listener.
    Read,
    /// Changes the running launcher: the control socket only.
    Action,
}

impl Level {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Level::Read => "read",
            Level::Action => "action",
        }
    }
}

/// A request, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Command {
    /// The commands, their levels and what each does.
    Help,
    /// The cluster snapshot, as the admin listener's `/status`.
    Status,
    /// Which program serves and how the last upgrade not done ended (`upgrade_desk.rs`).
    UpgradeState,
    /// Upgrade in place, as `SIGUSR2` does.
    Upgrade,
    /// The worker count from now on (`scale 3`, `scale +1`, `scale -1`), as `SIGTTIN` and
    /// `SIGTTOU` do.
    Scale(crate::supervisor::scale::Ask),
    /// Every process in turn, the master last (new server code, the same settings).
    Restart,
}

/// Every command: its name, level and what it does (`help` answers with these).
pub(crate) const COMMANDS: &[(&str, Level, &str)] = &[
    (
        "help",
        Level::Read,
        "the commands, their levels and what each does",
    ),
    (
        "status",
        Level::Read,
        "the processes, slots, memory and refusals (the admin listener's /status)",
    ),
    (
        "upgrade-state",
        Level::Read,
        "which program serves (pid, programStartedMs) and how the last upgrade not done ended",
    ),
    (
        "upgrade",
        Level::Action,
        "upgrade in place, as SIGUSR2 does (fhircluster upgrade waits for the outcome)",
    ),
    (
        "scale",
        Level::Action,
        "scale N, +1 or -1: the tx-worker count from now on, as SIGTTIN and SIGTTOU do (fhircluster scale waits until it holds)",
    ),
    (
        "restart",
        Level::Action,
        "restart every process in turn, the master last; answered once it is over",
    ),
];

impl Command {
    /// Its name, as sent.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Command::Help => "help",
            Command::Status => "status",
            Command::UpgradeState => "upgrade-state",
            Command::Upgrade => "upgrade",
            Command::Scale(_) => "scale",
            Command::Restart => "restart",
        }
    }

    pub(crate) fn level(&self) -> Level {
        match self {
            Command::Help | Command::Status | Command::UpgradeState => Level::Read,
            Command::Upgrade | Command::Scale(_) | Command::Restart => Level::Action,
        }
    }
}

/// The level of the command called `name`, if there is one.
pub(crate) fn level_of(name: &str) -> Option<Level> {
    COMMANDS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, level, _)| *level)
}

/// One request line (without its line end) as a command; `Err`: why not, for the answer.
pub(crate) fn parse(line: &str) -> Result<Command, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let Some((&name, args)) = words.split_first() else {
        return Err(
            "an empty request: send a command, e.g. \"status\" (\"help\" lists them)".into(),
        );
    };
    let command = match name {
        "help" => Command::Help,
        "status" => Command::Status,
        "upgrade-state" => Command::UpgradeState,
        "upgrade" => Command::Upgrade,
        "scale" => {
            return match args {
                [n] => crate::supervisor::scale::Ask::parse(n).map(Command::Scale),
                _ => Err("scale takes one argument: a worker count (3) or a step (+1, -1)".into()),
            }
        }
        "restart" => Command::Restart,
        other => {
            return Err(format!(
                "unknown command {other:?} (\"help\" lists them: {})",
                names()
            ))
        }
    };
    if !args.is_empty() {
        return Err(format!("{name} takes no arguments"));
    }
    Ok(command)
}

fn names() -> String {
    COMMANDS
        .iter()
        .map(|(n, _, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `help`'s answer.
pub(crate) fn help() -> Value {
    let commands: Vec<Value> = COMMANDS
        .iter()
        .map(|(name, level, does)| json!({"command": name, "level": level.label(), "does": does}))
        .collect();
    json!({ "commands": commands })
}

/// An error's answer.
pub(crate) fn error(why: &str) -> Value {
    json!({ "error": why })
}

/// A request's bytes as read (up to [`MAX_LINE`] and its line end): the line, or why it can't
/// be taken.
pub(crate) fn request_line(bytes: &[u8]) -> Result<&str, String> {
    let line = match bytes.iter().position(|&b| b == b'\n') {
        Some(end) => &bytes[..end],
        None if bytes.len() >= MAX_LINE => {
            return Err(format!("a request line longer than {MAX_LINE} bytes"))
        }
        None => bytes,
    };
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    std::str::from_utf8(line).map_err(|_| "a request line that is not UTF-8".to_string())
}

/// The answer as sent: the JSON on one line, and its line end.
pub(crate) fn answer_line(v: &Value) -> String {
    format!("{v}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_command_parses_with_its_level() {
        assert_eq!(parse("status"), Ok(Command::Status));
        assert_eq!(parse("  upgrade \r"), Ok(Command::Upgrade));
        assert_eq!(parse("upgrade-state"), Ok(Command::UpgradeState));
        assert_eq!(parse("help"), Ok(Command::Help));
        use crate::supervisor::scale::Ask;
        assert_eq!(parse("scale 3"), Ok(Command::Scale(Ask::To(3))));
        assert_eq!(parse("scale -1"), Ok(Command::Scale(Ask::By(-1))));
        assert!(parse("scale").unwrap_err().contains("one argument"));
        assert!(parse("scale lots").unwrap_err().contains("worker count"));
        for (name, level, _) in COMMANDS.iter().filter(|(n, _, _)| *n != "scale") {
            let c = parse(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(c.level(), *level, "{name}");
            assert_eq!(c.name(), *name);
            assert_eq!(level_of(name), Some(*level));
        }
        assert_eq!(level_of("upgrade"), Some(Level::Action));
        assert_eq!(level_of("metrics"), None);
    }

    #[test]
    fn bad_requests_are_refused_with_a_reason() {
        assert!(parse("").unwrap_err().contains("empty"));
        let e = parse("reboot").unwrap_err();
        assert!(
            e.contains("\"reboot\"") && e.contains("status, upgrade-state, upgrade"),
            "{e}"
        );
        assert!(parse("status now").unwrap_err().contains("no arguments"));
    }

    #[test]
    fn the_request_line_is_bounded_and_its_line_end_taken_off() {
        assert_eq!(request_line(b"status\r\nrest"), Ok("status"));
        assert_eq!(request_line(b"status"), Ok("status"));
        assert!(request_line(&[b'a'; MAX_LINE]).is_err());
        assert!(request_line(b"\xff\n").is_err());
    }

    #[test]
    fn help_lists_every_command_with_its_level() {
        let h = help();
        let listed = h["commands"].as_array().map_or(0, Vec::len);
        assert_eq!(listed, COMMANDS.len());
        assert_eq!(h["commands"][3]["level"], "action");
        assert_eq!(answer_line(&error("x")), "{\"error\":\"x\"}\n");
    }
}
