//! The launcher's own log lines: which are written (`logLevel` / `--log-level` / `RUST_LOG`,
//! changeable on reload), in what shape (text, or one JSON object per line with `message` at the
//! top level), and where: every line goes into the one bounded log queue (`log_queue.rs`), so
//! writing a log line never waits on a stuck stderr. Under the journal (`journald.rs`) each line
//! starts with its syslog priority and carries no timestamp of its own.
//!
//! In text, a warning's level is written `WARNING`, not tracing's `WARN`: the spec says the
//! launcher "logs a `WARNING`" (MEM-10, MEM-11, MEM-13, RECYCLE-12), and `grep WARNING` is what
//! its readers will try. JSON keeps `"level": "WARN"`, the name log shippers map.

use std::cell::RefCell;
use std::io::Write;
use std::sync::OnceLock;
use std::time::Duration;

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Layer, Registry};

use super::journald::{lines_with_priority, priority, Journal};
use super::log_queue::{queue, started, Source, Target};
use crate::settings::{LogFormat, LogLevel};

/// The installed filter, for a reload to change (`set_level`).
static FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// Installs the launcher's log subscriber. A second call (tests) changes nothing.
pub(crate) fn init(format: LogFormat, level: &LogLevel, journal: Journal) {
    let (filter, handle) = reload::Layer::new(env_filter(level));
    let writer = QueueWriter {
        journal: journal.stderr,
        warning_word: format == LogFormat::Text,
    };
    let lines = tracing_subscriber::fmt::layer()
        .with_target(false)
        .with_ansi(!journal.stderr && std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(writer);
    let lines = match (format, journal.stderr) {
        (LogFormat::Json, true) => lines.json().flatten_event(true).without_time().boxed(),
        (LogFormat::Json, false) => lines.json().flatten_event(true).boxed(),
        (LogFormat::Text, true) => lines.without_time().boxed(),
        (LogFormat::Text, false) => lines.boxed(),
    };
    if tracing_subscriber::registry()
        .with(filter)
        .with(lines)
        .try_init()
        .is_ok()
    {
        let _ = FILTER.set(handle);
    }
}

/// Which lines are written from now on (`logLevel` changed on reload).
pub(crate) fn set_level(level: &LogLevel) -> Result<(), String> {
    let handle = FILTER
        .get()
        .ok_or("no log subscriber of the launcher's is installed")?;
    handle.reload(env_filter(level)).map_err(|e| e.to_string())
}

fn env_filter(level: &LogLevel) -> EnvFilter {
    // The loader has already refused a filter that doesn't parse.
    EnvFilter::try_new(level.filter()).unwrap_or_else(|_| EnvFilter::new("info"))
}

/// The last line of a launcher that could not start or run (`fhircluster: ...`), then the queue
/// flushed: written like every other line, so a stuck stderr can't hold the exit up.
pub fn fatal(line: &str) {
    fatal_within(line, Duration::from_secs(5));
}

/// [`fatal`], waiting at most `most` for the queue to be written (a panic's line: `fatal.rs`).
pub(crate) fn fatal_within(line: &str, most: Duration) {
    let prefix = Journal::detect().stderr.then_some(priority(&Level::ERROR));
    queue().push(
        Target::Stderr,
        Source::Launcher,
        lines_with_priority(prefix, line.as_bytes().to_vec()),
    );
    if let Some(q) = started() {
        q.flush(Duration::from_secs(1).min(most), most);
    }
}

/// Gives the lines still queued their chance before the launcher exits: up to 5 s while they
/// move, 1 s once nothing moves (the output stuck).
pub(crate) fn flush() {
    if let Some(q) = started() {
        q.flush(Duration::from_secs(1), Duration::from_secs(5));
    }
}

thread_local! {
    /// Set while `capture` runs: the events formatted go here instead of into the queue.
    static CAPTURED: RefCell<Option<Vec<u8>>> = const { RefCell::new(None) };
}

/// The lines `log` logs, formatted as every log line is, returned instead of queued (for the
/// writer thread's own report of dropped lines). Empty when the level filter leaves them out.
pub(crate) fn capture(log: impl FnOnce()) -> Vec<u8> {
    CAPTURED.with(|c| *c.borrow_mut() = Some(Vec::new()));
    log();
    CAPTURED.with(|c| c.borrow_mut().take()).unwrap_or_default()
}

/// tracing's writer: each event is formatted into a buffer of its own and queued whole when the
/// formatter is done with it, never waiting.
struct QueueWriter {
    journal: bool,
    /// Text: a warning's level is written `WARNING` (the module notes say why).
    warning_word: bool,
}

impl<'a> MakeWriter<'a> for QueueWriter {
    type Writer = EventLine;

    fn make_writer(&'a self) -> EventLine {
        self.for_level(&Level::INFO)
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> EventLine {
        self.for_level(meta.level())
    }
}

impl QueueWriter {
    fn for_level(&self, level: &Level) -> EventLine {
        EventLine {
            priority: self.journal.then(|| priority(level)),
            warning: self.warning_word && *level == Level::WARN,
            buf: Vec::with_capacity(256),
        }
    }
}

/// One event's text, queued when dropped.
pub(crate) struct EventLine {
    priority: Option<u8>,
    /// A warning in text: its level is written `WARNING`.
    warning: bool,
    buf: Vec<u8>,
}

/// A text line of tracing's at WARN level with the level written `WARNING`. The level is the
/// first `WARN` in the line: only the timestamp (digits and punctuation) or, on a terminal, a
/// colour code comes before it.
fn warning_word(mut line: Vec<u8>) -> Vec<u8> {
    if let Some(at) = line.windows(4).position(|w| w == b"WARN") {
        line.splice(at + 4..at + 4, *b"ING");
    }
    line
}

impl Write for EventLine {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for EventLine {
    fn drop(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let mut buf = std::mem::take(&mut self.buf);
        if self.warning {
            buf = warning_word(buf);
        }
        let line = lines_with_priority(self.priority, buf);
        let line = CAPTURED.with(|c| match c.borrow_mut().as_mut() {
            Some(captured) => {
                captured.extend_from_slice(&line);
                None
            }
            None => Some(line),
        });
        if let Some(line) = line {
            queue().push(Target::Stderr, Source::Launcher, line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_warning_says_warning_where_tracing_says_warn() {
        // spec: MEM-10, MEM-11, MEM-13, RECYCLE-12 (the spec's word, for `grep WARNING`)
        let line = b"2026-12-01T10:00:00.000000Z  WARN not even one worker fits in memory\n";
        assert_eq!(
            warning_word(line.to_vec()),
            b"2026-12-01T10:00:00.000000Z  WARNING not even one worker fits in memory\n"
        );
        // on a terminal: inside the colour code; under the journal: no timestamp
        assert_eq!(
            warning_word(b"\x1b[33m WARN\x1b[0m x WARN y".to_vec()),
            b"\x1b[33m WARNING\x1b[0m x WARN y"
        );
        assert_eq!(warning_word(b" WARN x".to_vec()), b" WARNING x");
        assert_eq!(warning_word(b"no level".to_vec()), b"no level");
        let w = QueueWriter {
            journal: false,
            warning_word: true,
        };
        assert!(w.for_level(&Level::WARN).warning);
        assert!(!w.for_level(&Level::INFO).warning);
        assert!(!w.for_level(&Level::ERROR).warning);
        let json = QueueWriter {
            journal: false,
            warning_word: false,
        };
        assert!(!json.for_level(&Level::WARN).warning, "JSON keeps \"WARN\"");
    }
}
