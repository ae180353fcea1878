//! The access log's file (`accessLogPath`): its writer thread. Lines are written in batches of
//! whole lines through [`LineFile`], so a full disk (or any failing write) tears no line: a line
//! begun as the disk filled is finished first, once there is room (a batch, or the writer's
//! tick once a second), and every line not written is dropped and counted
//! (`fhircluster_access_log_lines_dropped_total`), at most one attempt per batch: the writer
//! stays as bounded and lossy as its queue. The file is never truncated while written; only
//! when it is replaced (`SIGUSR1`, after logrotate renamed it) with a line still begun is that
//! line cut off the old file, and counted dropped.
//!
//! The first failure of an outage is one WARNING with the error and the path; the first
//! success after it is one WARNING with how many lines were dropped meanwhile.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::Duration;

use tracing::warn;

use super::line_file::{Change, LineFile, Wrote};

/// A batch holds at most about this many bytes (one line more): one `write` each.
const BATCH_BYTES: usize = 64 * 1024;

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
