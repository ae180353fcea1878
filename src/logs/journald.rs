//! Whether the launcher's stdout and stderr are the journal, and the syslog priority prefix
//! journald reads from each line it is given (`<3>` error, `<4>` warning, `<6>` info, `<7>`
//! debug; sd-daemon(3)).
//!
//! systemd sets `JOURNAL_STREAM=<device>:<inode>` for a service whose stdout or stderr is
//! connected to the journal. The variable is inherited by anything the service starts, whatever
//! it does with its own descriptors, so a descriptor is taken as the journal only when its own
//! device and inode are both those named (systemd.exec(5)). Under the journal a line carries its
//! priority and no timestamp of its own: journald stamps each line itself.

use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;

use tracing::Level;

/// Which of the launcher's descriptors are the journal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Journal {
    pub stdout: bool,
    pub stderr: bool,
}

impl Journal {
    /// From this process's `JOURNAL_STREAM` and its descriptors 1 and 2.
    pub fn detect() -> Journal {
        let stream = std::env::var("JOURNAL_STREAM").ok();
        Journal::from_parts(
            stream.as_deref(),
            dev_ino(std::io::stdout().as_fd()),
            dev_ino(std::io::stderr().as_fd()),
        )
    }

    /// From `JOURNAL_STREAM`'s value and the (device, inode) of stdout and stderr.
    pub fn from_parts(
        stream: Option<&str>,
        stdout: Option<(u64, u64)>,
        stderr: Option<(u64, u64)>,
    ) -> Journal {
        let named = stream.and_then(parse_stream);
        let is = |fd: Option<(u64, u64)>| named.is_some() && fd == named;
        Journal {
            stdout: is(stdout),
            stderr: is(stderr),
        }
    }
}

/// `<device>:<inode>`, both decimal.
fn parse_stream(v: &str) -> Option<(u64, u64)> {
    let (dev, ino) = v.trim().split_once(':')?;
    Some((dev.parse().ok()?, ino.parse().ok()?))
}

fn dev_ino(fd: std::os::fd::BorrowedFd<'_>) -> Option<(u64, u64)> {
    // fstat on a duplicate: std has no fstat on a borrowed descriptor. A closed descriptor is no
    // journal.
    let m = std::fs::File::from(fd.try_clone_to_owned().ok()?)
        .metadata()
        .ok()?;
    Some((m.dev(), m.ino()))
}

/// The syslog priority of a log level.
pub fn priority(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

/// `text` ended by a newline and, with a priority, each of its lines prefixed by it (journald
/// reads the prefix per line, so a message of several lines keeps it on each).
pub fn lines_with_priority(priority: Option<u8>, mut text: Vec<u8>) -> Vec<u8> {
    let Some(p) = priority else {
        if text.last() != Some(&b'\n') {
            text.push(b'\n');
        }
        return text;
    };
    let body = text.strip_suffix(b"\n").unwrap_or(&text);
    let prefix = format!("<{p}>");
    let mut out = Vec::with_capacity(body.len() + 8);
    for line in body.split(|&b| b == b'\n') {
        out.extend_from_slice(prefix.as_bytes());
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptor_is_the_journal_only_when_device_and_inode_both_match() {
        let j = |v: &str, out, err| Journal::from_parts(Some(v), out, err);
        assert_eq!(
            j("8:1234", Some((8, 1234)), Some((8, 1234))),
            Journal {
                stdout: true,
                stderr: true
            }
        );
        assert_eq!(
            j("8:1234", Some((9, 1)), Some((8, 1234))),
            Journal {
                stdout: false,
                stderr: true
            }
        );
        // The same inode on another device, the same device with another inode.
        assert_eq!(j("8:1234", None, Some((9, 1234))), Journal::default());
        assert_eq!(j("8:1234", None, Some((8, 1235))), Journal::default());
        for bad in ["", "8", "8:", ":1234", "x:1", "8:1234:5"] {
            assert_eq!(j(bad, Some((8, 1234)), Some((8, 1234))), Journal::default());
        }
        assert_eq!(
            Journal::from_parts(None, Some((8, 1234)), Some((8, 1234))),
            Journal::default()
        );
    }

    #[test]
    fn every_line_of_a_message_carries_the_priority() {
        assert_eq!(priority(&Level::ERROR), 3);
        assert_eq!(priority(&Level::WARN), 4);
        assert_eq!(priority(&Level::INFO), 6);
        assert_eq!(priority(&Level::DEBUG), 7);
        let p = |priority, text: &[u8]| lines_with_priority(priority, text.to_vec());
        assert_eq!(p(Some(4), b"a\nb\n"), b"<4>a\n<4>b\n");
        assert_eq!(p(Some(6), b"one"), b"<6>one\n");
        assert_eq!(p(None, b"a\nb\n"), b"a\nb\n");
        assert_eq!(p(None, b"x"), b"x\n");
    }
}
