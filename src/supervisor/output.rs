//! Children's stdout and stderr, passed on line by line with each line tagged by its instance
//! code, without ever blocking a child: lines go through a bounded queue to one writer thread,
//! and when the launcher's own output is stuck (a full pipe, a paused terminal) lines are dropped
//! and counted rather than letting a child's write block its event loop.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use crate::ops::child_log::ChildLines;

/// Lines waiting for the writer thread before further lines are dropped.
const QUEUE_LINES: usize = 10_000;
/// A longer line is cut: a child printing a huge line must not make the launcher hold it.
const MAX_LINE: usize = 64 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Where children's lines go. Cheap to clone.
#[derive(Clone)]
pub struct OutputSink {
    tx: SyncSender<(Stream, String)>,
    dropped: Arc<AtomicU64>,
    lines: ChildLines,
}

impl OutputSink {
    /// Starts the writer thread that owns the launcher's stdout and stderr for child lines.
    pub fn start() -> std::io::Result<OutputSink> {
        OutputSink::start_with(ChildLines::Tagged)
    }

    /// Like `start`, writing each line as `lines` says (tagged, or JSON objects).
    pub fn start_with(lines: ChildLines) -> std::io::Result<OutputSink> {
        let (tx, rx) = sync_channel::<(Stream, String)>(QUEUE_LINES);
        std::thread::Builder::new()
            .name("child-output".into())
            .spawn(move || {
                let stdout = std::io::stdout();
                let stderr = std::io::stderr();
                for (stream, line) in rx {
                    // A failed write (closed stdout) loses the line; nothing else can be done.
                    let _ = match stream {
                        Stream::Stdout => writeln!(stdout.lock(), "{line}"),
                        Stream::Stderr => writeln!(stderr.lock(), "{line}"),
                    };
                }
            })?;
        Ok(OutputSink {
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
            lines,
        })
    }

    /// Lines dropped so far because the launcher's output was stuck.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn push(&self, stream: Stream, line: String) {
        match self.tx.try_send((stream, line)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Reads `pipe` to its end, passing each line on tagged `[code] `.
    pub async fn forward<R: AsyncRead + Unpin>(self, code: Arc<str>, stream: Stream, pipe: R) {
        let mut reader = BufReader::with_capacity(16 * 1024, pipe);
        let mut buf = Vec::with_capacity(256);
        loop {
            buf.clear();
            match read_line_capped(&mut reader, &mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    let text = String::from_utf8_lossy(trim_newline(&buf));
                    let name = match stream {
                        Stream::Stdout => "stdout",
                        Stream::Stderr => "stderr",
                    };
                    self.push(stream, self.lines.render(&code, name, &text));
                }
            }
        }
    }
}

/// `[tx1] the line`
pub fn tag(code: &str, line: &str) -> String {
    format!("[{code}] {line}")
}

fn trim_newline(b: &[u8]) -> &[u8] {
    let b = b.strip_suffix(b"\n").unwrap_or(b);
    b.strip_suffix(b"\r").unwrap_or(b)
}

/// Reads one line into `buf`, keeping at most `MAX_LINE` bytes of it (the rest is consumed and
/// discarded). Returns the bytes consumed, 0 at the end of the pipe.
async fn read_line_capped<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    buf: &mut Vec<u8>,
) -> std::io::Result<usize> {
    let mut consumed = 0;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(consumed);
        }
        let (take, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        let room = MAX_LINE.saturating_sub(buf.len());
        buf.extend_from_slice(&available[..take.min(room)]);
        reader.consume(take);
        consumed += take;
        if done {
            return Ok(consumed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_cut_at_the_cap_and_the_rest_of_the_line_skipped() {
        let mut long = vec![b'x'; MAX_LINE + 10];
        long.extend_from_slice(b"\nnext\n");
        let mut r = BufReader::new(&long[..]);
        let mut buf = Vec::new();
        read_line_capped(&mut r, &mut buf).await.unwrap();
        assert_eq!(buf.len(), MAX_LINE);
        buf.clear();
        read_line_capped(&mut r, &mut buf).await.unwrap();
        assert_eq!(buf, b"next\n");
    }

    #[test]
    fn lines_are_tagged_with_the_instance_code() {
        assert_eq!(tag("tx1", "listening"), "[tx1] listening");
        assert_eq!(trim_newline(b"a\r\n"), b"a");
    }

    #[test]
    fn a_stuck_writer_drops_lines_instead_of_blocking() {
        let (tx, _rx) = sync_channel(1);
        let sink = OutputSink {
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
            lines: ChildLines::Tagged,
        };
        for i in 0..5 {
            sink.push(Stream::Stdout, i.to_string());
        }
        assert_eq!(sink.dropped(), 4);
    }
}
