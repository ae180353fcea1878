//! The access log (`server.cluster.accessLog`: `off`, `text` or `json`): one line per request,
//! written when its answer has been sent (or the client went away): the time, the client's
//! address, method, path (the query only with `accessLogQuery`: cache-ids and codes can be
//! sensitive), status, body bytes sent, the process that served it, the time it waited in the
//! launcher, the time to the process's first byte, the total, and the launcher's own reason
//! when it answered itself.
//!
//! Where: on stderr with the launcher's other lines, through the one log queue (so journald's
//! priorities apply), or to `accessLogPath`, written by a thread of its own that `SIGUSR1`
//! makes reopen the file (logrotate's convention). Never waiting: a line that finds the queue
//! full is dropped and counted (`fhircluster_access_log_lines_dropped_total`).

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TryRecvError};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use serde_json::json;

use super::journald::{lines_with_priority, priority, Journal};
use super::log_queue::{queue, Source, Target};
use crate::settings::Settings;

/// Lines waiting for the file's writer before further lines are dropped.
pub const QUEUE_LINES: usize = 10_000;

/// How the lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// One request, as its line says it.
#[derive(Clone, Debug, PartialEq)]
pub struct Record<'a> {
    pub client: &'a str,
    pub method: &'a str,
    /// The path, with its query when `accessLogQuery` is on.
    pub target: &'a str,
    pub status: u16,
    /// Body bytes sent to the client.
    pub bytes: u64,
    /// The process that served it, or that the launcher's own answer names.
    pub process: Option<&'a str>,
    /// How long it waited in the launcher for a process (tx requests).
    pub queued: Option<Duration>,
    /// From sending it to the process to the process's response head.
    pub first_byte: Option<Duration>,
    /// From its head's arrival to the end of its answer.
    pub total: Duration,
    /// The launcher's own answer's reason (`queue_wait`, `cache_id_lost`, ...).
    pub refusal: Option<&'static str>,
}

/// A line's text without its time: `key=value` pairs, the path quoted.
pub fn render_text(r: &Record<'_>) -> String {
    let secs =
        |d: Option<Duration>| d.map_or("-".to_string(), |d| format!("{:.6}", d.as_secs_f64()));
    let mut s = String::with_capacity(200);
    let _ = write!(
        s,
        "client={} method={} path=\"{}\" status={} bytes={} process={} queued={} first_byte={} \
         total={:.6} refusal={}",
        r.client,
        r.method,
        r.target.replace('\\', "\\\\").replace('"', "\\\""),
        r.status,
        r.bytes,
        r.process.unwrap_or("-"),
        secs(r.queued),
        secs(r.first_byte),
        r.total.as_secs_f64(),
        r.refusal.unwrap_or("-"),
    );
    s
}

/// A line as a JSON object (no time or level: the sink adds what it needs).
pub fn render_json(r: &Record<'_>) -> serde_json::Value {
    let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
    json!({
        "client": r.client,
        "method": r.method,
        "path": r.target,
        "status": r.status,
        "bytes": r.bytes,
        "process": r.process,
        "queuedSeconds": secs(r.queued),
        "firstByteSeconds": secs(r.first_byte),
        "totalSeconds": r.total.as_secs_f64(),
        "refusal": r.refusal,
    })
}

enum Sink {
    /// With the launcher's lines; `journal`: stderr is the journal.
    Stderr { journal: bool },
    File {
        tx: SyncSender<Vec<u8>>,
        reopen: Arc<AtomicBool>,
        path: PathBuf,
    },
}

pub struct AccessLog {
    format: Format,
    /// `accessLogQuery`: the query string is logged with the path.
    pub query: bool,
    sink: Sink,
    dropped: AtomicU64,
}

static LOG: OnceLock<AccessLog> = OnceLock::new();

/// The access log, when it is on.
pub fn get() -> Option<&'static AccessLog> {
    LOG.get()
}

/// Lines dropped so far (0 when off).
pub fn dropped() -> u64 {
    get().map_or(0, |l| l.dropped.load(Ordering::Relaxed))
}

/// Turns the access log on as the settings say, before anything is served: a file that can't
/// be opened stops the start, naming the setting.
pub fn init(settings: &Settings, journal: Journal) -> anyhow::Result<()> {
    let c = &settings.cluster;
    let format = match c.access_log.as_str() {
        "text" => Format::Text,
        "json" => Format::Json,
        _ => return Ok(()),
    };
    let path = (!c.access_log_path.is_empty()).then(|| settings.data_dir.join(&c.access_log_path));
    let log = AccessLog::start(format, c.access_log_query, path, journal.stderr)
        .with_context(|| format!("server.cluster.accessLogPath {:?}", c.access_log_path))?;
    let _ = LOG.set(log);
    Ok(())
}

/// `SIGUSR1`: the file is reopened (after logrotate renamed it); the path, or None when the
/// access log has no file.
pub fn reopen() -> Option<&'static Path> {
    match &get()?.sink {
        Sink::File { tx, reopen, path } => {
            reopen.store(true, Ordering::Release);
            // Wakes the writer (an empty line is no line); if the queue is full it is awake.
            let _ = tx.try_send(Vec::new());
            Some(path)
        }
        Sink::Stderr { .. } => None,
    }
}

fn open(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// The file's writer: lines as they come, flushed whenever none is waiting; reopened when asked.
fn write_file(file: File, path: &Path, rx: &Receiver<Vec<u8>>, reopen: &AtomicBool) {
    let mut out = BufWriter::new(file);
    loop {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(line) => {
                let _ = out.write_all(&line);
                loop {
                    match rx.try_recv() {
                        Ok(line) => {
                            let _ = out.write_all(&line);
                        }
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => {
                            let _ = out.flush();
                            return;
                        }
                    }
                }
                let _ = out.flush();
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                let _ = out.flush();
                return;
            }
        }
        if reopen.swap(false, Ordering::AcqRel) {
            let _ = out.flush();
            match open(path) {
                Ok(f) => out = BufWriter::new(f),
                Err(e) => tracing::warn!(
                    "SIGUSR1: the access log {} could not be reopened ({e}); still writing to \
                     the file it had open",
                    path.display()
                ),
            }
        }
    }
}

impl AccessLog {
    /// An access log to `path` (its writer thread started), or to stderr with the launcher's
    /// lines (`journal`: stderr is the journal).
    fn start(
        format: Format,
        query: bool,
        path: Option<PathBuf>,
        journal: bool,
    ) -> anyhow::Result<AccessLog> {
        let sink = match path {
            None => Sink::Stderr { journal },
            Some(path) => {
                let file = open(&path)
                    .with_context(|| format!("can't open {} for appending", path.display()))?;
                let (tx, rx) = sync_channel(QUEUE_LINES);
                let reopen = Arc::new(AtomicBool::new(false));
                let (p, r) = (path.clone(), reopen.clone());
                std::thread::Builder::new()
                    .name("access-log".into())
                    .spawn(move || write_file(file, &p, &rx, &r))
                    .context("starting the access log's writer thread")?;
                Sink::File { tx, reopen, path }
            }
        };
        Ok(AccessLog {
            format,
            query,
            sink,
            dropped: AtomicU64::new(0),
        })
    }

    /// Writes one request's line, never waiting: dropped and counted if the queue is full.
    pub fn write(&self, r: &Record<'_>) {
        let time = super::child_log::now();
        let line = match &self.sink {
            Sink::Stderr { journal } => {
                let text = match self.format {
                    Format::Text if *journal => format!("INFO access: {}", render_text(r)),
                    Format::Text => format!("{time}  INFO access: {}", render_text(r)),
                    Format::Json => {
                        let mut v = render_json(r);
                        v["level"] = json!("INFO");
                        v["message"] = json!("access");
                        if !journal {
                            v["timestamp"] = json!(time);
                        }
                        v.to_string()
                    }
                };
                let level = tracing::Level::INFO;
                let line = lines_with_priority(journal.then(|| priority(&level)), text.into());
                if !queue().push(Target::Stderr, Source::Launcher, line) {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                }
                return;
            }
            Sink::File { .. } => match self.format {
                Format::Text => format!("{time} {}\n", render_text(r)),
                Format::Json => {
                    let mut v = render_json(r);
                    v["timestamp"] = json!(time);
                    format!("{v}\n")
                }
            },
        };
        if let Sink::File { tx, .. } = &self.sink {
            if tx.try_send(line.into_bytes()).is_err() {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> Record<'static> {
        Record {
            client: "203.0.113.7",
            method: "GET",
            target: "/r4/CodeSystem/$lookup",
            status: 404,
            bytes: 321,
            process: Some("tx1"),
            queued: Some(Duration::from_micros(1500)),
            first_byte: None,
            total: Duration::from_millis(2),
            refusal: Some("cache_id_lost"),
        }
    }

    #[test]
    fn a_text_line_says_every_field_and_a_json_line_is_one_object() {
        assert_eq!(
            render_text(&record()),
            "client=203.0.113.7 method=GET path=\"/r4/CodeSystem/$lookup\" status=404 bytes=321 \
             process=tx1 queued=0.001500 first_byte=- total=0.002000 refusal=cache_id_lost"
        );
        let v = render_json(&record());
        assert_eq!(v["process"], "tx1");
        assert_eq!(v["firstByteSeconds"], serde_json::Value::Null);
        assert_eq!(v["queuedSeconds"], 0.0015);
        assert_eq!(v["refusal"], "cache_id_lost");
        let quoted = Record {
            target: "/a\"b",
            ..record()
        };
        assert!(render_text(&quoted).contains("path=\"/a\\\"b\""));
    }

    #[test]
    fn a_stuck_file_drops_and_counts_lines_and_writing_never_waits() {
        // A FIFO whose reader never reads: the writer thread blocks once the pipe is full, then
        // the queue fills; every line after that is dropped, at once.
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("stuck");
        let c = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).expect("path");
        // SAFETY: mkfifo reads the NUL-terminated path, which lives for the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let _reader = {
            use std::os::unix::fs::OpenOptionsExt;
            OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifo)
                .expect("the FIFO's reader")
        };
        let log = AccessLog::start(Format::Text, false, Some(fifo), false).expect("start");
        let lines = QUEUE_LINES * 2;
        let began = std::time::Instant::now();
        for _ in 0..lines {
            log.write(&record());
        }
        let took = began.elapsed();
        let dropped = log.dropped.load(Ordering::Relaxed) as usize;
        // The pipe holds 64 KiB (a few hundred lines); the rest of the first QUEUE_LINES wait.
        assert!(
            dropped >= lines - QUEUE_LINES - 1024 && dropped < lines - QUEUE_LINES,
            "{dropped} of {lines} dropped"
        );
        assert!(took < Duration::from_secs(5), "{lines} lines took {took:?}");
    }
}
