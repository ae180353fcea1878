//! Whole lines to a file or descriptor that may fail part-way (a full disk, a quota, an I/O
//! error, a non-blocking pipe): [`LineFile`], used by the access log's file (`access_log_file`)
//! and the launcher's own stdout and stderr (`log_queue`), so that neither ever holds a torn line.
//!
//! Theory: lines are written in batches, each one `write` of whole lines. A write that fails
//! part-way (a short write, then `ENOSPC`) leaves the output ending inside a line. That line is
//! not given up: the rest of it is kept and written first, before any other line, the next time
//! anything is written, so the output never holds a line torn by the lines after it. Every line
//! after it in the failed batch, and every line while writing keeps failing, is dropped and
//! counted (the caller's counter), at most one attempt per batch. A reader sees whole lines and,
//! while the disk is full, at most the beginning of one line at the end, completed once there is
//! room. Nothing is ever truncated while written (a truncation makes `tail -F` and log shippers
//! read the file again from the start); a caller replacing the file ([`LineFile::replace`]) is
//! told how many bytes of a begun line to cut off the old one.
//!
//! The first failure of an outage and the first success after it are each one [`Change`], for
//! the caller to say once.

use std::io::{self, Write};

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
    pub(crate) fn write<L: AsRef<[u8]>>(&mut self, lines: &[L]) -> Wrote {
        self.buf.clear();
        self.buf.extend_from_slice(&self.rest);
        let rest_len = self.rest.len();
        // Where each new line ends in `buf`.
        let mut ends = Vec::with_capacity(lines.len());
        for l in lines.iter().map(AsRef::as_ref).filter(|l| !l.is_empty()) {
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

#[cfg(test)]
#[path = "line_file_tests.rs"]
mod tests;
