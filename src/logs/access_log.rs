//! The access log (`server.cluster.accessLog`: `off`, `text` or `json`): one line per request,
//! written when its answer has been sent (or the client went away): the time, the client's
//! address, method, path (the query only with `accessLogQuery`: cache-ids and codes can be
//! sensitive), status, body bytes sent, the process that served it, the time it waited in the
//! launcher, the time to the process's first byte, the total, and the launcher's own reason
//! when it answered itself.
//!
//! Where: on stderr with the launcher's other lines, through the one log queue (so journald's
//! priorities apply), or to `accessLogPath`, written by a thread of its own that `SIGUSR1`
//! makes reopen the file (logrotate's convention; `access_log_file`). Never waiting: a line
//! that finds the queue full is dropped and counted (`fhircluster_access_log_lines_dropped_total`),
//! and so is one the file can't take (a full disk), none of them torn.
//!
//! The one in force is held by the front door (`InForce`). A reload replaces it (`set`: its format, file and query setting): the requests answered from
//! then on take the new one; the old file's writer writes what it was given, then ends.

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, LazyLock, RwLock};
use std::time::Duration;

use anyhow::Context;

use super::journald::{lines_with_priority, priority, Journal};
use super::log_queue::{queue, Source, Target};
use crate::settings::{LogFormat, Settings};

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

/// Seconds with six decimals, written as integers (cheaper than a float's formatting).
fn secs(s: &mut String, d: Option<Duration>) {
    match d {
        Some(d) => {
            let _ = write!(s, "{}.{:06}", d.as_secs(), d.subsec_micros());
        }
        None => s.push('-'),
    }
}

/// A line's text without its time, appended to `s`: `key=value` pairs, the path quoted.
pub fn render_text(s: &mut String, r: &Record<'_>) {
    let _ = write!(s, "client={} method={} path=\"", r.client, r.method);
    if r.target.contains(['"', '\\']) {
        s.push_str(&r.target.replace('\\', "\\\\").replace('"', "\\\""));
    } else {
        s.push_str(r.target);
    }
    let _ = write!(
        s,
        "\" status={} bytes={} process={} queued=",
        r.status,
        r.bytes,
        r.process.unwrap_or("-")
    );
    secs(s, r.queued);
    s.push_str(" first_byte=");
    secs(s, r.first_byte);
    s.push_str(" total=");
    secs(s, Some(r.total));
    s.push_str(" refusal=");
    s.push_str(r.refusal.unwrap_or("-"));
}

/// `since_epoch` as RFC 3339 in UTC with microseconds (`2026-01-02T03:04:05.678901Z`), as the
/// launcher's own lines write it, without a date library's cost per line.
pub fn timestamp(s: &mut String, since_epoch: Duration) {
    let secs = since_epoch.as_secs();
    let days = (secs / 86_400) as i64;
    let rest = secs % 86_400;
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let _ = write!(
        s,
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60,
        since_epoch.subsec_micros()
    );
}

/// A line's buffer, starting with the time now.
fn now_text() -> String {
    let mut s = String::with_capacity(256);
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    timestamp(&mut s, since);
    s
}

/// A JSON string, escaped as RFC 8259 requires.
fn json_str(s: &mut String, v: &str) {
    s.push('"');
    for c in v.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(s, "\\u{:04x}", u32::from(c));
            }
            c => s.push(c),
        }
    }
    s.push('"');
}

fn json_opt_str(s: &mut String, v: Option<&str>) {
    match v {
        Some(v) => json_str(s, v),
        None => s.push_str("null"),
    }
}

/// A line as one JSON object, appended to `s`; `head`: the members that go first (the time,
/// the level), already written with their commas.
pub fn render_json(s: &mut String, head: &str, r: &Record<'_>) {
    s.push('{');
    s.push_str(head);
    s.push_str("\"client\":");
    json_str(s, r.client);
    s.push_str(",\"method\":");
    json_str(s, r.method);
    s.push_str(",\"path\":");
    json_str(s, r.target);
    let _ = write!(
        s,
        ",\"status\":{},\"bytes\":{},\"process\":",
        r.status, r.bytes
    );
    json_opt_str(s, r.process);
    s.push_str(",\"queuedSeconds\":");
    json_secs(s, r.queued);
    s.push_str(",\"firstByteSeconds\":");
    json_secs(s, r.first_byte);
    s.push_str(",\"totalSeconds\":");
    json_secs(s, Some(r.total));
    s.push_str(",\"refusal\":");
    json_opt_str(s, r.refusal);
    s.push('}');
}

fn json_secs(s: &mut String, d: Option<Duration>) {
    match d {
        Some(_) => secs(s, d),
        None => s.push_str("null"),
    }
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
    /// `trustedProxies` (DEC-85): the peers whose `X-Forwarded-For` names the client.
    pub trusted_proxies: Vec<IpAddr>,
    sink: Sink,
    /// Lines dropped: by a full queue here, by a file that can't take them in its writer.
    dropped: Arc<AtomicU64>,
}

/// Lines dropped since the start, by every access log this launcher has had.
static DROPPED: LazyLock<Arc<AtomicU64>> = LazyLock::new(|| Arc::new(AtomicU64::new(0)));

/// The access log in force (`None`: off), and whether there is one, read first by every request
/// so an access log that is off costs one load. Held by the front door (`Front`) and handed to
/// what writes lines, not a process-wide static; a reload puts a new one in (`put`), which the
/// requests answered from then on take, on every connection, kept-alive ones too.
#[derive(Default)]
pub struct InForce {
    on: AtomicBool,
    log: RwLock<Option<Arc<AccessLog>>>,
}

impl InForce {
    /// The access log, when it is on.
    pub fn get(&self) -> Option<Arc<AccessLog>> {
        if !self.on.load(Ordering::Acquire) {
            return None;
        }
        self.log.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether it is on.
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    /// Puts `log` in force (`None`: off). The old one goes when the last request holding it is
    /// done with it: its writer then writes what it was given and ends.
    pub fn put(&self, log: Option<Arc<AccessLog>>) {
        let on = log.is_some();
        let old = std::mem::replace(
            &mut *self.log.write().unwrap_or_else(|e| e.into_inner()),
            log,
        );
        self.on.store(on, Ordering::Release);
        drop(old);
    }

    /// Puts `wanted` in force (a reload). A file that can't be opened is an error and the
    /// access log in force is kept.
    pub fn set(&self, wanted: &Wanted, journal: Journal) -> anyhow::Result<()> {
        self.put(start(wanted, journal)?);
        Ok(())
    }

    /// `SIGUSR1`: the file is reopened (after logrotate renamed it); the path, or None when
    /// the access log has no file.
    pub fn reopen(&self) -> Option<PathBuf> {
        match &self.get()?.sink {
            Sink::File { tx, reopen, path } => {
                reopen.store(true, Ordering::Release);
                // Wakes the writer (an empty line is no line); if the queue is full it is awake.
                let _ = tx.try_send(Vec::new());
                Some(path.clone())
            }
            Sink::Stderr { .. } => None,
        }
    }
}

/// Lines dropped so far (0 when off).
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// What the settings ask of the access log: its format (`None`: off), its file (`None`:
/// stderr), whether the query is logged, and whose `X-Forwarded-For` is believed.
#[derive(Clone, Debug, PartialEq)]
pub struct Wanted {
    pub format: Option<Format>,
    pub path: Option<PathBuf>,
    pub query: bool,
    pub trusted_proxies: Vec<IpAddr>,
}

impl From<&Settings> for Wanted {
    fn from(settings: &Settings) -> Self {
        let c = &settings.cluster;
        Wanted {
            format: c.access_log.0.map(|f| match f {
                LogFormat::Text => Format::Text,
                LogFormat::Json => Format::Json,
            }),
            path: (!c.access_log_path.is_empty())
                .then(|| settings.data_dir.join(&c.access_log_path)),
            query: c.access_log_query,
            trusted_proxies: c.trusted_proxies.clone(),
        }
    }
}

/// The access log the settings ask for, started before anything is served (to be put in
/// force on the front door: `InForce::put`): a file that can't be opened stops the start,
/// naming the setting.
pub fn init(settings: &Settings, journal: Journal) -> anyhow::Result<Option<Arc<AccessLog>>> {
    start(&Wanted::from(settings), journal).with_context(|| {
        format!(
            "server.cluster.accessLogPath {:?}",
            settings.cluster.access_log_path
        )
    })
}

/// The access log `wanted` asks for (`None`: off), its file opened and its writer started.
pub fn start(wanted: &Wanted, journal: Journal) -> anyhow::Result<Option<Arc<AccessLog>>> {
    let Some(format) = wanted.format else {
        return Ok(None);
    };
    let mut log = AccessLog::start(
        format,
        wanted.query,
        wanted.path.clone(),
        journal.stderr,
        DROPPED.clone(),
    )?;
    log.trusted_proxies = wanted.trusted_proxies.clone();
    Ok(Some(Arc::new(log)))
}

pub(super) fn open(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

impl AccessLog {
    /// An access log to `path` (its writer thread started), or to stderr with the launcher's
    /// lines (`journal`: stderr is the journal).
    fn start(
        format: Format,
        query: bool,
        path: Option<PathBuf>,
        journal: bool,
        dropped: Arc<AtomicU64>,
    ) -> anyhow::Result<AccessLog> {
        let sink = match path {
            None => Sink::Stderr { journal },
            Some(path) => {
                let file = open(&path)
                    .with_context(|| format!("can't open {} for appending", path.display()))?;
                let (tx, rx) = sync_channel(QUEUE_LINES);
                let reopen = Arc::new(AtomicBool::new(false));
                let (p, r, d) = (path.clone(), reopen.clone(), dropped.clone());
                std::thread::Builder::new()
                    .name("access-log".into())
                    .spawn(move || super::access_log_file::write_file(file, &p, &rx, &r, &d))
                    .context("starting the access log's writer thread")?;
                Sink::File { tx, reopen, path }
            }
        };
        Ok(AccessLog {
            format,
            query,
            trusted_proxies: Vec::new(),
            sink,
            dropped,
        })
    }

    /// Writes one request's line, never waiting: dropped and counted if the queue is full.
    pub fn write(&self, r: &Record<'_>) {
        let line = match &self.sink {
            Sink::Stderr { journal } => {
                let text = match self.format {
                    Format::Text => {
                        let mut s = if *journal {
                            String::with_capacity(256)
                        } else {
                            now_text()
                        };
                        s.push_str(if *journal {
                            "INFO access: "
                        } else {
                            "  INFO access: "
                        });
                        render_text(&mut s, r);
                        s
                    }
                    Format::Json => {
                        let mut head = String::with_capacity(64);
                        if !journal {
                            head.push_str("\"timestamp\":\"");
                            head.push_str(&now_text());
                            head.push_str("\",");
                        }
                        head.push_str("\"level\":\"INFO\",\"message\":\"access\",");
                        let mut s = String::with_capacity(320);
                        render_json(&mut s, &head, r);
                        s
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
                Format::Text => {
                    let mut s = now_text();
                    s.push(' ');
                    render_text(&mut s, r);
                    s.push('\n');
                    s
                }
                Format::Json => {
                    let head = format!("\"timestamp\":\"{}\",", now_text());
                    let mut s = String::with_capacity(320);
                    render_json(&mut s, &head, r);
                    s.push('\n');
                    s
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
        let text = |r: &Record<'_>| {
            let mut s = String::new();
            render_text(&mut s, r);
            s
        };
        assert_eq!(
            text(&record()),
            "client=203.0.113.7 method=GET path=\"/r4/CodeSystem/$lookup\" status=404 bytes=321 \
             process=tx1 queued=0.001500 first_byte=- total=0.002000 refusal=cache_id_lost"
        );
        let mut json = String::new();
        render_json(
            &mut json,
            "\"level\":\"INFO\",",
            &Record {
                target: "/a\"\n",
                ..record()
            },
        );
        let v: serde_json::Value = serde_json::from_str(&json).expect("one JSON object");
        assert_eq!(v["path"], "/a\"\n");
        assert_eq!(v["level"], "INFO");
        assert_eq!(v["process"], "tx1");
        assert_eq!(v["firstByteSeconds"], serde_json::Value::Null);
        assert_eq!(v["queuedSeconds"], 0.0015);
        assert_eq!(v["refusal"], "cache_id_lost");
        let quoted = Record {
            target: "/a\"b",
            ..record()
        };
        assert!(text(&quoted).contains("path=\"/a\\\"b\""));
    }

    #[test]
    fn the_time_is_rfc_3339_in_utc_as_the_launchers_own_lines_write_it() {
        let t = |secs: u64, micros: u32| {
            let mut s = String::new();
            timestamp(&mut s, Duration::new(secs, micros * 1000));
            s
        };
        assert_eq!(t(0, 0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(t(951_782_400, 7), "2000-02-29T00:00:00.000007Z");
        assert_eq!(t(1_796_081_220, 370_001), "2026-11-30T23:27:00.370001Z");
        assert_eq!(t(4_102_444_799, 999_999), "2099-12-31T23:59:59.999999Z");
    }

    #[test]
    #[allow(unsafe_code)] // a test's own FIFO
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
        let dropped = Arc::new(AtomicU64::new(0));
        let log = AccessLog::start(Format::Text, false, Some(fifo), false, dropped).expect("start");
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

    #[test]
    fn each_front_door_has_its_own_access_log_which_a_reload_replaces_and_usr1_reopens() {
        // spec: DEC-44 (accessLog applied on reload)
        let dir = tempfile::tempdir().expect("temp dir");
        let journal = Journal {
            stdout: false,
            stderr: false,
        };
        let file = |name: &str| Wanted {
            format: Some(Format::Text),
            path: Some(dir.path().join(name)),
            query: false,
            trusted_proxies: Vec::new(),
        };
        let (a, b) = (InForce::default(), InForce::default());
        assert!(
            !a.is_on() && a.get().is_none() && a.reopen().is_none(),
            "off at first"
        );
        a.set(&file("a.log"), journal).expect("a's file");
        assert!(a.is_on() && !b.is_on(), "one door's log is not another's");
        assert_eq!(a.reopen(), Some(dir.path().join("a.log")));
        let held = a.get().expect("on");
        a.set(&file("b.log"), journal).expect("b's file");
        assert_eq!(
            a.reopen(),
            Some(dir.path().join("b.log")),
            "the new one in force"
        );
        assert!(
            held.query == a.get().is_some_and(|l| l.query),
            "a request keeps its own"
        );
        let bad = Wanted {
            path: Some(dir.path().join("no/such/dir/c.log")),
            ..file("c.log")
        };
        assert!(a.set(&bad, journal).is_err());
        assert_eq!(
            a.reopen(),
            Some(dir.path().join("b.log")),
            "kept when the file can't open"
        );
        a.set(
            &Wanted {
                format: None,
                path: None,
                query: false,
                trusted_proxies: Vec::new(),
            },
            journal,
        )
        .expect("off");
        assert!(!a.is_on() && a.get().is_none());
    }
}
