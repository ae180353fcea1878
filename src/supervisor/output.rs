//! Children's stdout and stderr, passed on line by line with each line tagged by its instance
//! code, without ever blocking a child: each line goes into the launcher's one bounded log queue
//! (`logs/log_queue.rs`), and when the launcher's own output is stuck (a full pipe, a paused
//! terminal) lines are dropped and counted there rather than letting a child's write block its
//! event loop. The last lines of each process's stderr are kept (`stderr_tail.rs`) for the error
//! that gives the master up.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::watch;

use super::stderr_tail::StderrTail;
use crate::logs::child_log::ChildLines;
pub use crate::logs::child_log::Stream;
use crate::logs::log_queue::{queue, Source};

/// A longer line is cut: a child printing a huge line must not make the launcher hold it.
const MAX_LINE: usize = 64 * 1024;

/// One run's stderr tail, and whether its pipe has ended.
#[derive(Default)]
struct Tail {
    lines: Mutex<StderrTail>,
    ended: AtomicBool,
}

/// Where children's lines go. Cheap to clone.
#[derive(Clone, Default)]
pub struct OutputSink {
    lines: ChildLines,
    /// The stderr tail of each process's latest run, by instance code.
    tails: Arc<Mutex<HashMap<Arc<str>, Arc<Tail>>>>,
}

impl OutputSink {
    /// Writes each line as `lines` says (tagged, or JSON objects; with journal priorities).
    pub fn new(lines: ChildLines) -> OutputSink {
        OutputSink {
            lines,
            tails: Arc::default(),
        }
    }

    /// Reads `pipe` to its end, passing each line on tagged `[code] `: `carried` (a line begun
    /// under the program before an in-place upgrade) first. When `stop` turns true, gives the
    /// pipe back with the line begun and not yet ended (`None`: the pipe ended first).
    pub async fn forward_until<R: AsyncRead + Unpin>(
        self,
        code: Arc<str>,
        stream: Stream,
        pipe: R,
        carried: Vec<u8>,
        mut stop: watch::Receiver<bool>,
    ) -> Option<(R, Vec<u8>)> {
        // A new run's stderr starts a new tail; a previous run's reader keeps its own.
        let tail = (stream == Stream::Stderr).then(|| {
            let tail = Arc::new(Tail::default());
            if let Ok(mut tails) = self.tails.lock() {
                tails.insert(code.clone(), tail.clone());
            }
            tail
        });
        let mut reader = BufReader::with_capacity(16 * 1024, pipe);
        let mut buf = carried;
        loop {
            let read = tokio::select! {
                r = read_line_capped(&mut reader, &mut buf) => r,
                // Cancelled between reads: what the line had is in `buf`, the reader holds
                // nothing unconsumed (each read consumes what it takes into `buf`).
                () = until_set(&mut stop) => return Some((reader.into_inner(), buf)),
            };
            match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let text = String::from_utf8_lossy(trim_newline(&buf));
                    if let Some(t) = &tail {
                        if let Ok(mut lines) = t.lines.lock() {
                            lines.push(&text);
                        }
                    }
                    let line = self.lines.render(&code, stream, &text);
                    queue().push(stream.target(), Source::Children, line);
                    buf.clear();
                }
            }
        }
        if let Some(t) = tail {
            t.ended.store(true, Ordering::Release);
        }
        None
    }

    /// The last lines `code`'s latest run wrote on its stderr, once its stderr has ended (its
    /// last lines read) or `wait` has passed.
    pub async fn stderr_tail(&self, code: &str, wait: Duration) -> StderrTail {
        let tail = self.tails.lock().ok().and_then(|t| t.get(code).cloned());
        let Some(tail) = tail else {
            return StderrTail::default();
        };
        let deadline = tokio::time::Instant::now() + wait;
        while !tail.ended.load(Ordering::Acquire) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tail.lines.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

/// Until `flag` turns true; forever should its sender go first (the holder dropped: no
/// handover will be asked for).
pub(crate) async fn until_set(flag: &mut watch::Receiver<bool>) {
    if flag.wait_for(|s| *s).await.is_err() {
        std::future::pending::<()>().await;
    }
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
    fn a_line_ends_without_its_newline() {
        assert_eq!(trim_newline(b"a\r\n"), b"a");
        assert_eq!(trim_newline(b"a"), b"a");
    }

    /// Forwards `pipe` to its end.
    async fn forward(sink: OutputSink, code: Arc<str>, stream: Stream, pipe: &[u8]) {
        let (_never, stop) = watch::channel(false);
        let _ = sink
            .forward_until(code, stream, pipe, Vec::new(), stop)
            .await;
    }

    #[tokio::test]
    async fn a_line_begun_is_given_back_on_a_handover_and_carried_to_the_next_reader() {
        let sink = OutputSink::default();
        let code: Arc<str> = Arc::from("tx1");
        let (mut w, r) = tokio::io::duplex(64);
        let (stop_tx, stop) = watch::channel(false);
        let task = tokio::spawn(sink.clone().forward_until(
            code.clone(),
            Stream::Stderr,
            r,
            Vec::new(),
            stop,
        ));
        tokio::io::AsyncWriteExt::write_all(&mut w, b"whole\nhalf a li")
            .await
            .expect("write");
        // Until the whole line has been read, the handover must wait for it to be taken.
        let tail = async {
            loop {
                let t = sink.stderr_tail("tx1", Duration::ZERO).await;
                if t.lines().count() == 1 {
                    return;
                }
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), tail)
            .await
            .expect("the whole line was not read");
        tokio::task::yield_now().await;
        stop_tx.send_replace(true);
        let (r, partial) = task.await.expect("task").expect("handed back, not ended");
        assert_eq!(partial, b"half a li");
        tokio::io::AsyncWriteExt::write_all(&mut w, b"ne\n")
            .await
            .expect("write");
        drop(w);
        let (_never, stop) = watch::channel(false);
        let _ = sink
            .clone()
            .forward_until(code, Stream::Stderr, r, partial, stop)
            .await;
        let tail = sink.stderr_tail("tx1", Duration::from_secs(1)).await;
        assert_eq!(tail.lines().collect::<Vec<_>>(), ["half a line"]);
    }

    #[tokio::test]
    async fn the_stderr_tail_is_the_latest_runs_once_its_pipe_has_ended() {
        let sink = OutputSink::default();
        let code: Arc<str> = Arc::from("m0");
        forward(sink.clone(), code.clone(), Stream::Stderr, b"old run\n").await;
        forward(sink.clone(), code.clone(), Stream::Stdout, b"not stderr\n").await;
        let tail = sink.stderr_tail("m0", Duration::from_secs(1)).await;
        assert_eq!(tail.lines().collect::<Vec<_>>(), ["old run"]);
        forward(
            sink.clone(),
            code,
            Stream::Stderr,
            b"Error: cannot find module\r\nat x\n",
        )
        .await;
        let tail = sink.stderr_tail("m0", Duration::from_secs(1)).await;
        assert_eq!(
            tail.lines().collect::<Vec<_>>(),
            ["Error: cannot find module", "at x"]
        );
        assert!(sink.stderr_tail("tx1", Duration::ZERO).await.is_empty());
    }
}
