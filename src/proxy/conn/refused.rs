//! The access-log line of a request the launcher answers before any request exists to hang it
//! on (a head hyper would refuse, a head over `headerMaxKB`): written from the head's bytes as
//! they came, so that every refusal is logged as the launcher's other answers are.

use std::fmt::Write as _;

use tokio::time::Instant;

use crate::logs::access_log::{InForce, Record};
use crate::proxy::answer::Answer;
use crate::proxy::forward::Peer;

/// Bytes of a method or target written at most.
const AT_MOST: usize = 2048;

/// Writes the line of `answer`, given to the head at the start of `head` from `peer`, whose
/// reading began at `started`; nothing while the access log (`in_force`) is off.
pub fn log(in_force: &InForce, head: &[u8], peer: &Peer, answer: &Answer, started: Instant) {
    let Some(log) = in_force.get() else {
        return;
    };
    let line = head
        .iter()
        .position(|&b| b == b'\n')
        .map_or(head, |n| &head[..n]);
    let line = line.trim_ascii_start();
    let mut words = line.splitn(2, |&b| b == b' ');
    let method = printable(words.next().unwrap_or_default());
    let rest = words.next().unwrap_or_default();
    // The target ends at the last space (before the version), or at the line's end.
    let target = rest
        .iter()
        .rposition(|&b| b == b' ')
        .map_or(rest, |n| &rest[..n]);
    let target = if log.query {
        target
    } else {
        target
            .iter()
            .position(|&b| b == b'?')
            .map_or(target, |n| &target[..n])
    };
    let target = printable(target);
    log.write(&Record {
        client: &peer.addr.ip().to_canonical().to_string(),
        method: if method.is_empty() { "-" } else { &method },
        target: &target,
        status: answer.status().as_u16(),
        bytes: answer.outcome().to_bytes().len() as u64,
        process: None,
        queued: None,
        first_byte: None,
        total: started.elapsed(),
        refusal: Some(answer.reason()),
    });
}

/// `raw` as the log may show it: what is not printable ASCII (a control byte, a space, a
/// non-ASCII byte, `%` itself is kept) percent-encoded, so a line can't be split or forged; at
/// most `AT_MOST` bytes.
fn printable(raw: &[u8]) -> String {
    let mut s = String::with_capacity(raw.len().min(AT_MOST));
    for &b in raw.iter().take(AT_MOST) {
        if b.is_ascii_graphic() {
            s.push(b as char);
        } else {
            let _ = write!(s, "%{b:02X}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_not_printable_is_percent_encoded() {
        assert_eq!(
            printable(b"/a?q=\"x\"\t\x7f\xc3\xa4"),
            "/a?q=\"x\"%09%7F%C3%A4"
        );
        assert_eq!(printable(&[b'a'; 5000]).len(), AT_MOST);
    }
}
