//! The access log's file (`accessLogPath`): its writer thread, and [`LineFile`], the rule that
//! keeps every line whole in it when writing fails (a full disk, a quota, an I/O error).
//!
//! Theory: lines are written in batches, each one `write` of whole lines. A write that fails
//! part-way (a short write, then `ENOSPC`) leaves the file ending inside a line. That line is
//! not given up: the rest of it is kept and written first, before any other line, the next time
//! anything is written (a batch, or the writer's tick once a second), so the file never holds
//! a line torn by the lines after it. Every line after it in the failed batch, and every line
//! while writing keeps failing, is dropped and counted (`fhircluster_access_log_lines_dropped_
//! total`), at most one attempt per batch: the writer stays as bounded and lossy as its queue.
//! A reader sees whole lines and, while the disk is full, at most the beginning of one line at
//! the end, which is completed once there is room. The file is never truncated while written
//! (a truncation makes `tail -F` and log shippers read it again from the start); only when it
//! is replaced (`SIGUSR1`, after logrotate renamed it) with a line still begun is that line cut
//! off the old file, and counted dropped.
//!
//! The first failure of an outage is one WARNING with the error and the path; the first
//! success after it is one WARNING with how many lines were dropped meanwhile ([`Change`]).

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::Duration;

use tracing::warn;

/// A batch holds at most about this many bytes (one line more): one `write` each.
const BATCH_BYTES: usize = 64 * 1024;

/// A change in whether the file can be written, said once each.
#[derive(Debug)]
pub(crate) enum Change {
    /// Writing has begun to fail (the first failure since it last worked).
    Failed(io::Error),
    /// Writing works again; `dropped` lines were lost since it began to fail.
    Recovered { dropped: u64 },
}

/// What one [`LineFile::write`] did.
#[derive(Debug, Default)]
pub(crate) struct Wrote {
    /// Lines dropped (never written, not even in part).
    pub dropped: u64,
    pub change: Option<Change>,
}

/// Whole lines to `out`; see the module's notes.
pub(crate) struct LineFile<W> {
    out: W,
    /// The rest of the line the file ends inside, written before anything else.
    rest: Vec<u8>,
    /// How many bytes of that line the file holds.
    begun: usize,
    /// While writing fails: the lines dropped since it began to.
    failing: Option<u64>,
    buf: Vec<u8>,
}

impl<W: Write> LineFile<W> {
    pub(crate) fn new(out: W) -> LineFile<W> {
        LineFile {
            out,
            rest: Vec::new(),
            begun: 0,
            failing: None,
            buf: Vec::new(),
        }
    }

    /// Writes the rest of a begun line, then `lines` (each a whole line, `\n` included; empty
    /// ones are skipped), in one `write` and as many more as short writes need.
    pub(crate) fn write(&mut self, lines: &[Vec<u8>]) -> Wrote {
        self.buf.clear();
        self.buf.extend_from_slice(&self.rest);
        let rest_len = self.rest.len();
        // Where each new line ends in `buf`.
        let mut ends = Vec::with_capacity(lines.len());
        for l in lines.iter().filter(|l| !l.is_empty()) {
            self.buf.extend_from_slice(l);
            ends.push(self.buf.len());
        }
        if self.buf.is_empty() {
            return Wrote::default();
        }
        let mut done = 0;
        let error = loop {
            if done == self.buf.len() {
                break None;
            }
            match self.out.write(&self.buf[done..]) {
                Ok(0) => break Some(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Some(e),
            }
        };
        let Some(error) = error else {
            self.rest.clear();
            self.begun = 0;
            return Wrote {
                dropped: 0,
                change: self
                    .failing
                    .take()
                    .map(|dropped| Change::Recovered { dropped }),
            };
        };
        let dropped = if done < rest_len {
            // Still inside the line begun before: it stays begun, every new line is dropped.
            self.begun += done;
            self.rest.drain(..done);
            ends.len()
        } else {
            self.rest.clear();
            self.begun = 0;
            // The first line not wholly written (there is one: the write stopped short).
            let first = ends.partition_point(|&end| end <= done);
            match ends.get(first) {
                Some(&end) => {
                    let start = first.checked_sub(1).map_or(rest_len, |i| ends[i]);
                    if done > start {
                        // Begun: its rest goes first next time.
                        self.rest.extend_from_slice(&self.buf[done..end]);
                        self.begun = done - start;
                        ends.len() - first - 1
                    } else {
                        ends.len() - first
                    }
                }
                None => 0,
            }
        } as u64;
        let change = match &mut self.failing {
            Some(n) => {
                *n += dropped;
                None
            }
            None => {
                self.failing = Some(dropped);
                Some(Change::Failed(error))
            }
        };
        Wrote { dropped, change }
    }

    /// Puts `out` in place of the writer (the file reopened); gives the old one back and how
    /// many bytes of a begun line it ends with (to be cut off it: that line is dropped, and
    /// counted with the outage's).
    pub(crate) fn replace(&mut self, out: W) -> (W, usize) {
        let torn = std::mem::take(&mut self.begun);
        if torn > 0 {
            self.rest.clear();
            self.failing = Some(self.failing.unwrap_or(0) + 1);
        }
        (std::mem::replace(&mut self.out, out), torn)
    }
}

/// The file's writer thread: batches as they come; reopened when asked (`SIGUSR1`); lines it
/// drops added to `dropped`.
pub(super) fn write_file(
    file: File,
    path: &Path,
    rx: &Receiver<Vec<u8>>,
    reopen: &AtomicBool,
    dropped: &AtomicU64,
) {
    let mut out = LineFile::new(file);
    let mut batch: Vec<Vec<u8>> = Vec::new();
    loop {
        let mut ended = false;
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(line) => {
                let mut bytes = line.len();
                batch.push(line);
                while bytes < BATCH_BYTES {
                    match rx.try_recv() {
                        Ok(line) => {
                            bytes += line.len();
                            batch.push(line);
                        }
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => {
                            ended = true;
                            break;
                        }
                    }
                }
            }
            // A tick with nothing new still finishes a begun line once there is room.
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => ended = true,
        }
        let wrote = out.write(&batch);
        batch.clear();
        said(wrote, path, dropped);
        if reopen.swap(false, Ordering::AcqRel) {
            match super::access_log::open(path) {
                Ok(f) => {
                    let (old, torn) = out.replace(f);
                    if torn > 0 {
                        dropped.fetch_add(1, Ordering::Relaxed);
                        cut_off(&old, torn, path);
                    }
                }
                Err(e) => warn!(
                    "SIGUSR1: the access log {} could not be reopened ({e}); still writing to \
                     the file it had open",
                    path.display()
                ),
            }
        }
        if ended {
            return;
        }
    }
}

/// Counts what was dropped and says a change once.
fn said(wrote: Wrote, path: &Path, dropped: &AtomicU64) {
    if wrote.dropped > 0 {
        dropped.fetch_add(wrote.dropped, Ordering::Relaxed);
    }
    match wrote.change {
        None => {}
        Some(Change::Failed(e)) => warn!(
            "the access log {} cannot be written ({e}): its lines are dropped and counted \
             (fhircluster_access_log_lines_dropped_total) until it can be again",
            path.display()
        ),
        Some(Change::Recovered { dropped }) => warn!(
            "the access log {} is written again; {dropped} lines were dropped meanwhile",
            path.display()
        ),
    }
}

/// The old file (renamed away) ends with `torn` bytes of a line: cut them off, so it holds
/// whole lines only.
fn cut_off(old: &File, torn: usize, path: &Path) {
    let cut = old
        .metadata()
        .and_then(|m| old.set_len(m.len().saturating_sub(torn as u64)));
    if let Err(e) = cut {
        warn!(
            "SIGUSR1: the access log's file before {} ends with a line begun before the disk \
             filled, which could not be cut off ({e})",
            path.display()
        );
    }
}

#[cfg(test)]
#[path = "access_log_file_tests.rs"]
mod tests;
