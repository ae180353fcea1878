//! The one way out for every line the launcher writes while it runs, its own log lines and its
//! children's: a bounded queue (in lines and in bytes) drained by one writer thread, the only
//! thread that writes to stdout and stderr. Everyone else only `try_send`s, so when the output is
//! stuck (a stalled journald, a full pipe, a paused terminal) the writer thread alone waits in its
//! write; a proxy thread, the signal handling or a child never does. Lines that find the queue
//! full, or that the output fails to take (a full disk), are dropped and counted by source (the
//! launcher's own, the children's), none written torn (`line_file`); the count is
//! logged once a line gets through again (`DropReport` says when) and shown in `/metrics`
//! (`fhircluster_log_lines_dropped_total`). The writer writes that report line itself, between
//! two queued lines, so the report can't be dropped in its turn by the queue it reports on.
//!
//! The writer writes through its own duplicates of descriptors 1 and 2, so while it waits it holds
//! none of std's `Stdout`/`Stderr` locks (a panic message, written through those, is not queued
//! behind it).

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::line_file::LineFile;
use crate::log_throttle::LogThrottle;

/// Lines waiting for the writer before further lines are dropped.
pub const QUEUE_LINES: usize = 10_000;
/// Bytes waiting for the writer before further lines are dropped: children's lines may be up to
/// 64 KiB each, and the queue must not hold hundreds of MB of them.
pub const QUEUE_BYTES: usize = 4 << 20;
/// While lines keep being dropped (output slower than the lines come), at most one report this
/// often; a report is also made as soon as the queue is empty again.
const REPORT_EVERY: Duration = Duration::from_secs(10);

/// Which of the launcher's descriptors a line goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Stdout,
    Stderr,
}

/// Whose line it is, for the drop counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The launcher's own log lines.
    Launcher,
    /// The children's stdout and stderr lines.
    Children,
}

impl Source {
    pub const ALL: [Source; 2] = [Source::Launcher, Source::Children];

    /// The `source` label in `/metrics`.
    pub fn label(self) -> &'static str {
        match self {
            Source::Launcher => "launcher",
            Source::Children => "children",
        }
    }
}

struct Entry {
    target: Target,
    source: Source,
    line: Vec<u8>,
}

/// What the queue and its writer thread share.
#[derive(Default)]
struct Counters {
    /// Lines and bytes queued or being written.
    pending: AtomicUsize,
    bytes: AtomicUsize,
    /// Lines written (or failed to write) so far: the writer's progress.
    done: AtomicU64,
    dropped: [AtomicU64; 2],
}

impl Counters {
    fn dropped(&self) -> [u64; 2] {
        [
            self.dropped[0].load(Ordering::Relaxed),
            self.dropped[1].load(Ordering::Relaxed),
        ]
    }
}

/// The bounded queue in front of the writer thread. Cheap to share (`&'static` for the launcher's
/// one, see [`queue`]).
pub struct LogQueue {
    tx: SyncSender<Entry>,
    counters: Arc<Counters>,
}

/// Writes one line to its target; may block.
pub type Out = Box<dyn FnMut(Target, &[u8]) -> std::io::Result<()> + Send>;
/// Given how many lines of each source (`[launcher, children]`) were dropped since the last
/// report, the line that says so (empty: none is written).
pub type Report = Box<dyn Fn([u64; 2]) -> Vec<u8> + Send>;

impl LogQueue {
    /// Starts the writer thread over `out`; `report` is called from it when dropped lines are to
    /// be reported. If the thread cannot be started every line counts as dropped.
    pub fn start(mut out: Out, report: Report) -> LogQueue {
        let (tx, rx) = sync_channel::<Entry>(QUEUE_LINES);
        let counters = Arc::new(Counters::default());
        let c = counters.clone();
        let _ = std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || {
                let mut reports = DropReport::default();
                for e in rx {
                    // A failed write (a closed descriptor, a full disk) loses the line; nothing
                    // else can be done with it, and nothing waits for it: it is counted as a
                    // dropped one, and reported with them once a line gets through again.
                    let wrote = out(e.target, &e.line).is_ok();
                    if !wrote {
                        c.dropped[e.source as usize].fetch_add(1, Ordering::Relaxed);
                    }
                    c.bytes.fetch_sub(e.line.len(), Ordering::Relaxed);
                    let left = c.pending.fetch_sub(1, Ordering::Relaxed) - 1;
                    c.done.fetch_add(1, Ordering::Relaxed);
                    if wrote {
                        if let Some(n) = reports.after_write(c.dropped(), left == 0, Instant::now())
                        {
                            let line = report(n);
                            if !line.is_empty() {
                                let _ = out(Target::Stderr, &line);
                            }
                        }
                    }
                }
            });
        LogQueue { tx, counters }
    }

    /// Queues `line` (ending in a newline) for `target`, never waiting: false when it was dropped
    /// (the queue full, in lines or bytes) and counted for `source`.
    pub fn push(&self, target: Target, source: Source, line: Vec<u8>) -> bool {
        let c = &self.counters;
        let len = line.len();
        let room = c.bytes.fetch_add(len, Ordering::Relaxed) + len <= QUEUE_BYTES;
        if room {
            c.pending.fetch_add(1, Ordering::Relaxed);
            if self
                .tx
                .try_send(Entry {
                    target,
                    source,
                    line,
                })
                .is_ok()
            {
                return true;
            }
            c.pending.fetch_sub(1, Ordering::Relaxed);
        }
        c.bytes.fetch_sub(len, Ordering::Relaxed);
        c.dropped[source as usize].fetch_add(1, Ordering::Relaxed);
        false
    }

    /// Lines of `source` dropped so far.
    pub fn dropped(&self, source: Source) -> u64 {
        self.counters.dropped[source as usize].load(Ordering::Relaxed)
    }

    /// Waits until every queued line is written, for at most `most`, and gives up sooner when no
    /// line has been written for `idle` (the output stuck): at the exit, the last lines get their
    /// chance without a stuck output holding the launcher up. True when all were written.
    pub fn flush(&self, idle: Duration, most: Duration) -> bool {
        let c = &self.counters;
        let began = Instant::now();
        let (mut done, mut moved) = (c.done.load(Ordering::Relaxed), began);
        loop {
            if c.pending.load(Ordering::Relaxed) == 0 {
                return true;
            }
            let now = Instant::now();
            let d = c.done.load(Ordering::Relaxed);
            if d != done {
                (done, moved) = (d, now);
            }
            if now.duration_since(moved) >= idle || now.duration_since(began) >= most {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

static QUEUE: OnceLock<LogQueue> = OnceLock::new();

/// The launcher's queue if anything has been written through it yet.
pub fn started() -> Option<&'static LogQueue> {
    QUEUE.get()
}

/// The launcher's one queue, over its stdout and stderr, started on first use. Dropped lines are
/// reported by a WARNING, formatted as every log line is.
pub fn queue() -> &'static LogQueue {
    QUEUE.get_or_init(|| {
        LogQueue::start(
            stdio_out(),
            Box::new(|n| super::logging::capture(|| log_report(n))),
        )
    })
}

/// Writes to duplicates of descriptors 1 and 2 (see the module notes); a descriptor that can't be
/// duplicated (closed) loses its lines. Each line whole or not at all (`LineFile`): stderr to a
/// file on a full disk holds no torn line, and a line not written is an `Err` (counted).
fn stdio_out() -> Out {
    let dup = |fd: std::os::fd::BorrowedFd<'_>| {
        fd.try_clone_to_owned()
            .map(|fd| LineFile::new(std::fs::File::from(fd)))
    };
    let mut stdout = dup(std::io::stdout().as_fd());
    let mut stderr = dup(std::io::stderr().as_fd());
    Box::new(move |target, line| {
        let file = match target {
            Target::Stdout => stdout.as_mut(),
            Target::Stderr => stderr.as_mut(),
        };
        match file {
            Ok(f) => match f.write(&[line]).dropped {
                0 => Ok(()),
                _ => Err(std::io::Error::other("not written")),
            },
            Err(e) => Err(std::io::Error::new(e.kind(), "no such output")),
        }
    })
}

fn log_report([launcher, children]: [u64; 2]) {
    tracing::warn!(
        "{} log lines dropped while the output (stdout/stderr) was stuck, failing or slower \
         than the lines came: {children} of the processes' output, {launcher} of the launcher's own \
         (fhircluster_log_lines_dropped_total)",
        launcher + children
    );
}

/// When dropped lines are reported: after a line got through, once the queue is empty again (the
/// output caught up), or at most every `REPORT_EVERY` while lines keep being dropped.
#[derive(Debug)]
pub struct DropReport {
    reported: [u64; 2],
    throttle: LogThrottle,
}

impl Default for DropReport {
    fn default() -> DropReport {
        DropReport {
            reported: [0, 0],
            throttle: LogThrottle::new(REPORT_EVERY),
        }
    }
}

impl DropReport {
    /// After a line was written, with the drop totals by source: the drops to report now, if any.
    pub fn after_write(
        &mut self,
        dropped: [u64; 2],
        queue_empty: bool,
        now: Instant,
    ) -> Option<[u64; 2]> {
        let total = dropped[0].saturating_add(dropped[1]);
        if queue_empty {
            self.throttle.total_now(total, now)?;
        } else {
            self.throttle.total(total, now)?;
        }
        let new = [
            dropped[0].saturating_sub(self.reported[0]),
            dropped[1].saturating_sub(self.reported[1]),
        ];
        self.reported = dropped;
        Some(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::{channel, Receiver};
    use std::sync::Mutex;

    /// The queue, the gate that lets its writer write one line, the lines written, the reports.
    type Gated = (
        LogQueue,
        SyncSender<()>,
        Receiver<Vec<u8>>,
        Receiver<[u64; 2]>,
    );

    /// A queue whose writer blocks until the test lets it go, and tells each line it wrote.
    fn gated() -> Gated {
        let (gate_tx, gate_rx) = sync_channel::<()>(0);
        let (lines_tx, lines_rx) = channel();
        let (rep_tx, rep_rx) = channel();
        let rep_tx = Mutex::new(rep_tx);
        let q = LogQueue::start(
            Box::new(move |_, line| {
                let _ = gate_rx.recv();
                let _ = lines_tx.send(line.to_vec());
                Ok(())
            }),
            Box::new(move |n| {
                let _ = rep_tx.lock().map(|t| t.send(n));
                b"report\n".to_vec()
            }),
        );
        (q, gate_tx, lines_rx, rep_rx)
    }

    #[test]
    fn a_stuck_writer_never_blocks_a_push_and_the_drops_are_counted_by_source() {
        let (q, gate, lines, reports) = gated();
        // The writer takes the first line and waits in its "write"; the queue fills behind it.
        let mut kept = 0;
        for i in 0..QUEUE_LINES + 500 {
            kept += usize::from(q.push(Target::Stderr, Source::Children, vec![b'x'; i % 7 + 1]));
        }
        assert!(!q.push(Target::Stderr, Source::Launcher, b"mine\n".to_vec()));
        assert!((QUEUE_LINES..=QUEUE_LINES + 1).contains(&kept), "{kept}");
        assert_eq!(
            q.dropped(Source::Children),
            (QUEUE_LINES + 500 - kept) as u64
        );
        assert_eq!(q.dropped(Source::Launcher), 1);
        // Unstuck: the first line through brings the report, written by the writer itself while
        // the queue is still full, then every kept line.
        let mut written = Vec::new();
        for _ in 0..=kept {
            gate.send(()).expect("writer");
            written.push(lines.recv_timeout(Duration::from_secs(5)).expect("a line"));
        }
        assert_eq!(written[1], b"report\n");
        assert_eq!(written.iter().filter(|l| *l == b"report\n").count(), 1);
        let n = reports
            .recv_timeout(Duration::from_secs(5))
            .expect("a report");
        assert_eq!(n, [1, (QUEUE_LINES + 500 - kept) as u64]);
        assert!(q.flush(Duration::from_secs(1), Duration::from_secs(5)));
    }

    #[test]
    fn a_line_the_output_fails_to_take_is_counted_by_source_and_reported_once_it_works() {
        // #25 item 5: a full disk under stderr lost lines uncounted.
        let (lines_tx, lines) = channel();
        let (rep_tx, reports) = channel();
        let rep_tx = Mutex::new(rep_tx);
        let mut failing = 3;
        let q = LogQueue::start(
            Box::new(move |_, line| {
                if failing > 0 {
                    failing -= 1;
                    return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
                }
                let _ = lines_tx.send(line.to_vec());
                Ok(())
            }),
            Box::new(move |n| {
                let _ = rep_tx.lock().map(|t| t.send(n));
                b"report\n".to_vec()
            }),
        );
        for (source, line) in [
            (Source::Launcher, "a\n"),
            (Source::Children, "b\n"),
            (Source::Launcher, "c\n"),
            (Source::Children, "d\n"),
        ] {
            assert!(q.push(Target::Stderr, source, line.as_bytes().to_vec()));
        }
        assert!(q.flush(Duration::from_secs(1), Duration::from_secs(5)));
        assert_eq!(q.dropped(Source::Launcher), 2);
        assert_eq!(q.dropped(Source::Children), 1);
        let n = reports
            .recv_timeout(Duration::from_secs(5))
            .expect("a report");
        assert_eq!(n, [2, 1]);
        let written: Vec<Vec<u8>> = lines.try_iter().collect();
        assert_eq!(written, [b"d\n".to_vec(), b"report\n".to_vec()]);
    }

    #[test]
    fn the_queue_is_bounded_in_bytes_too() {
        let (q, _gate, _lines, _reports) = gated();
        let big = 64 * 1024;
        let kept = (0..200)
            .filter(|_| q.push(Target::Stdout, Source::Children, vec![b'y'; big]))
            .count();
        assert_eq!(kept, QUEUE_BYTES / big);
        assert_eq!(q.dropped(Source::Children), (200 - kept) as u64);
    }

    #[test]
    fn flush_gives_up_on_a_stuck_output_and_waits_for_a_moving_one() {
        let (q, gate, _lines, _reports) = gated();
        q.push(Target::Stderr, Source::Launcher, b"a\n".to_vec());
        let began = Instant::now();
        assert!(!q.flush(Duration::from_millis(100), Duration::from_secs(10)));
        assert!(began.elapsed() < Duration::from_secs(5));
        let slow = std::thread::spawn(move || {
            for _ in 0..3 {
                std::thread::sleep(Duration::from_millis(30));
                let _ = gate.send(());
            }
        });
        q.push(Target::Stderr, Source::Launcher, b"b\n".to_vec());
        q.push(Target::Stderr, Source::Launcher, b"c\n".to_vec());
        assert!(q.flush(Duration::from_secs(2), Duration::from_secs(10)));
        let _ = slow.join();
    }

    #[test]
    fn drops_are_reported_when_the_queue_empties_or_at_most_every_ten_seconds() {
        let t0 = Instant::now();
        let mut r = DropReport::default();
        assert_eq!(r.after_write([0, 0], true, t0), None, "nothing dropped");
        // The first line through after drops: reported at once.
        assert_eq!(r.after_write([1, 500], false, t0), Some([1, 500]));
        // Still dropping while the queue drains: not again within 10 s ...
        assert_eq!(
            r.after_write([1, 900], false, t0 + Duration::from_secs(5)),
            None
        );
        // ... unless the queue is empty (the output caught up).
        assert_eq!(
            r.after_write([2, 900], true, t0 + Duration::from_secs(6)),
            Some([1, 400])
        );
        assert_eq!(
            r.after_write([2, 900], true, t0 + Duration::from_secs(7)),
            None
        );
        assert_eq!(
            r.after_write([2, 1000], false, t0 + Duration::from_secs(16)),
            Some([0, 100])
        );
    }
}
