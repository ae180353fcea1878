//! How the children's output lines are written by the launcher: tagged `[tx1] ...` in text mode,
//! and in JSON mode (`logFormat: json`) one JSON object per line, in the same shape as the
//! launcher's own lines (`timestamp`, `level`, `fields.message`) with the instance code and the
//! stream in `fields`, so a log shipper never meets a line that isn't JSON. Under journald
//! (`JOURNAL_STREAM` set) there is no timestamp: journald stamps each line itself.

use serde_json::json;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};

use crate::settings::LogFormat;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ChildLines {
    /// `[tx1] the line`
    #[default]
    Tagged,
    /// `{"timestamp":...,"level":"INFO","fields":{"message":...,"process":"tx1","stream":"stdout"}}`
    Json { timestamps: bool },
}

impl ChildLines {
    /// For the launcher's log format, with timestamps unless journald takes the lines.
    pub fn for_format(format: LogFormat, journald: bool) -> ChildLines {
        match format {
            LogFormat::Text => ChildLines::Tagged,
            LogFormat::Json => ChildLines::Json {
                timestamps: !journald,
            },
        }
    }

    /// One line of `code`'s `stream` ("stdout" or "stderr"), ready to write.
    pub fn render(self, code: &str, stream: &str, line: &str) -> String {
        match self {
            ChildLines::Tagged => format!("[{code}] {line}"),
            ChildLines::Json { timestamps } => {
                let fields = json!({"message": line, "process": code, "stream": stream});
                if timestamps {
                    json!({"timestamp": now(), "level": "INFO", "fields": fields}).to_string()
                } else {
                    json!({"level": "INFO", "fields": fields}).to_string()
                }
            }
        }
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

    #[test]
    fn text_is_tagged_and_json_is_one_object_carrying_the_code() {
        assert_eq!(
            ChildLines::Tagged.render("tx1", "stdout", "listening"),
            "[tx1] listening"
        );
        let line = ChildLines::Json { timestamps: true }.render("atx1", "stderr", "a \"q\"\n");
        assert!(!line.contains('\n'), "{line}");
        let v: Value = serde_json::from_str(&line).expect("json");
        assert_eq!(v["fields"]["process"], "atx1");
        assert_eq!(v["fields"]["stream"], "stderr");
        assert_eq!(v["fields"]["message"], "a \"q\"\n");
        assert!(
            v["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{v}"
        );
        let v: Value = serde_json::from_str(
            &ChildLines::Json { timestamps: false }.render("m0", "stdout", "x"),
        )
        .expect("json");
        assert!(v.get("timestamp").is_none(), "{v}");
        assert_eq!(
            ChildLines::for_format(LogFormat::Json, true),
            ChildLines::Json { timestamps: false }
        );
    }
}
