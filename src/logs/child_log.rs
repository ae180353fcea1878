//! How the children's output lines are written by the launcher: tagged `[tx1] ...` in text mode,
//! and in JSON mode (`logFormat: json`) one JSON object per line, in the same shape as the
//! launcher's own lines (`timestamp`, `level`, `message` at the top level) with the instance code
//! and the stream beside them (`process`, `stream`), so a log shipper never meets a line that
//! isn't JSON. A server's lines carry what its clients sent: in text, their control characters
//! are written as escapes (`terminal_safe.rs`), so a carriage return or an escape sequence can't
//! forge or hide a line on a terminal; JSON escapes them itself.
//!
//! A line from a child's stdout is `INFO`, one from its stderr `WARN`: Node's `console.error` and
//! `console.warn`, uncaught exceptions and crash traces go to stderr, and `journalctl -p warning`
//! should show them. Under the journal (`journald.rs`) a line carries that priority (`<6>`, `<4>`)
//! and no timestamp of its own.

use serde_json::json;
use tracing::Level;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};

use super::journald::{lines_with_priority, priority, Journal};
use super::log_queue::Target;
use super::terminal_safe::escape_controls;
use crate::settings::LogFormat;

/// Which of a child's pipes a line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }

    /// The level its lines are logged at (see the module notes).
    pub fn level(self) -> Level {
        match self {
            Stream::Stdout => Level::INFO,
            Stream::Stderr => Level::WARN,
        }
    }

    /// The launcher's descriptor its lines go to: a child's stdout to the launcher's stdout, its
    /// stderr to the launcher's stderr.
    pub fn target(self) -> Target {
        match self {
            Stream::Stdout => Target::Stdout,
            Stream::Stderr => Target::Stderr,
        }
    }
}

/// The shape of children's lines: the launcher's log format, and which of its descriptors are the
/// journal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ChildLines {
    pub format: LogFormat,
    pub journal: Journal,
}

impl ChildLines {
    /// One line of `code`'s `stream`, ready to write (newline included).
    pub fn render(self, code: &str, stream: Stream, line: &str) -> Vec<u8> {
        let journal = match stream.target() {
            Target::Stdout => self.journal.stdout,
            Target::Stderr => self.journal.stderr,
        };
        let text = match self.format {
            LogFormat::Text => format!("[{code}] {}", escape_controls(line)),
            LogFormat::Json => {
                let mut v = json!({
                    "level": stream.level().as_str(),
                    "message": line,
                    "process": code,
                    "stream": stream.name(),
                });
                if !journal {
                    v["timestamp"] = json!(now());
                }
                v.to_string()
            }
        };
        lines_with_priority(
            journal.then(|| priority(&stream.level())),
            text.into_bytes(),
        )
    }
}

/// The time as the launcher's own JSON lines show it (RFC 3339, UTC).
fn now() -> String {
    let mut s = String::new();
    let _ = SystemTime.format_time(&mut Writer::new(&mut s));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn text(b: Vec<u8>) -> String {
        String::from_utf8(b).expect("utf-8")
    }

    #[test]
    fn text_is_tagged_and_json_is_one_object_carrying_the_code_at_the_top_level() {
        assert_eq!(
            text(ChildLines::default().render("tx1", Stream::Stdout, "listening")),
            "[tx1] listening\n"
        );
        assert_eq!(
            text(ChildLines::default().render("tx1", Stream::Stderr, "ok\rFORGED\x1b[2K")),
            "[tx1] ok\\x0dFORGED\\x1b[2K\n"
        );
        let json = ChildLines {
            format: LogFormat::Json,
            journal: Journal::default(),
        };
        let line = text(json.render("atx1", Stream::Stderr, "a \"q\"\n"));
        assert_eq!(line.matches('\n').count(), 1, "{line}");
        let v: Value = serde_json::from_str(&line).expect("json");
        assert_eq!(v["process"], "atx1");
        assert_eq!(v["stream"], "stderr");
        assert_eq!(v["level"], "WARN");
        assert_eq!(v["message"], "a \"q\"\n");
        assert!(v.get("fields").is_none(), "{v}");
        assert!(
            v["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{v}"
        );
        let v: Value =
            serde_json::from_slice(&json.render("m0", Stream::Stdout, "x")).expect("json");
        assert_eq!(v["level"], "INFO");
    }

    #[test]
    fn under_the_journal_a_line_has_its_priority_and_no_timestamp() {
        let only_stderr = Journal {
            stdout: false,
            stderr: true,
        };
        let tagged = ChildLines {
            format: LogFormat::Text,
            journal: only_stderr,
        };
        assert_eq!(
            text(tagged.render("m0", Stream::Stderr, "boom")),
            "<4>[m0] boom\n"
        );
        // The launcher's stdout is not the journal here: no prefix on a stdout line.
        assert_eq!(text(tagged.render("m0", Stream::Stdout, "hi")), "[m0] hi\n");
        let json = ChildLines {
            format: LogFormat::Json,
            journal: Journal {
                stdout: true,
                stderr: true,
            },
        };
        let line = text(json.render("m0", Stream::Stdout, "hi"));
        let body = line.strip_prefix("<6>").expect("priority");
        let v: Value = serde_json::from_str(body).expect("json");
        assert!(v.get("timestamp").is_none(), "{v}");
    }
}
