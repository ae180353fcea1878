//! Helpers for the front-door tests: direct process addresses, timed requests, parallel
//! clients, a keep-alive connection.

use super::*;

impl Cluster {
    /// The loopback address a process listens on (`m0` on `internalPort`, `txN` on
    /// `internalPort + N`), for requests that bypass the launcher.
    pub fn process_addr(&self, code: &str) -> SocketAddr {
        let port = if code == "m0" {
            self.internal
        } else {
            let n: u16 = code
                .strip_prefix("tx")
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("not a process code: {code}"));
            self.internal + n
        };
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// The pid of the latest start of process `code`, from the launcher's log
    /// (`tx1: started tx-worker (pid 123) ...`), or of the replacement that took its place
    /// (`tx1: switched to its replacement (pid 124) ...`, DEC-78).
    pub fn pid_of(&self, code: &str) -> i32 {
        let prefixes = [
            format!("{code}: started "),
            format!("{code}: switched to its replacement "),
        ];
        self.log_lines()
            .iter()
            .rev()
            .filter_map(|l| {
                let at = prefixes
                    .iter()
                    .find_map(|p| Some(l.find(p.as_str())? + p.len()))?;
                let pid = l[at..].split("(pid ").nth(1)?.split(')').next()?;
                pid.trim().parse().ok()
            })
            .next()
            .unwrap_or_else(|| {
                panic!(
                    "no start of {code} in the log:\n{}",
                    self.log_lines().join("\n")
                )
            })
    }

    /// A cache-id issued by process `code`: a `$cache-control` session started straight on it
    /// (past the front door, so which process issues it is not left to chance).
    pub fn session_on(&self, code: &str) -> String {
        let r = request(
            self.process_addr(code),
            "POST",
            "/r4/$cache-control",
            &[],
            b"{}",
        );
        let id = r.header("x-cache-id").unwrap_or("").to_string();
        assert!(
            r.status == 200 && id.starts_with(&format!("{code}.")),
            "a session on {code}: {} {:?} {}",
            r.status,
            id,
            r.text()
        );
        id
    }

    /// One request through the front door, with how long it took.
    pub fn timed(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (Response, Duration) {
        let t = Instant::now();
        let r = request(self.addr(), method, path, headers, body);
        (r, t.elapsed())
    }

    /// Waits until at least `n` log lines contain `needle` (a second `tx1: ready` after a
    /// restart, ...); panics with the log when they don't come in time.
    pub fn wait_for_count(&self, needle: &str, n: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.count_lines(needle) < n {
            assert!(
                Instant::now() < deadline,
                "fewer than {n} lines containing {needle:?} within {timeout:?}; output:\n{}",
                self.log_lines().join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// How many log lines contain `needle`.
    pub fn count_lines(&self, needle: &str) -> usize {
        self.log_lines()
            .iter()
            .filter(|l| l.contains(needle))
            .count()
    }
}

impl Response {
    /// A `404` with the `cache-id-unknown` tx-issue-type (the launcher's or a process's).
    pub fn is_cache_id_unknown(&self) -> bool {
        self.status == 404 && self.text().contains("cache-id-unknown")
    }

    /// The OperationOutcome's first issue text (empty when there is none).
    pub fn outcome_text(&self) -> String {
        let v = self.json();
        v["issue"][0]["diagnostics"]
            .as_str()
            .or_else(|| v["issue"][0]["details"]["text"].as_str())
            .unwrap_or("")
            .to_string()
    }
}

impl Cluster {
    /// A tx request that never answers (`_sim_hang`), on a keep-alive connection the test
    /// holds, once it is at work on a process (by the processes' own counts).
    pub fn hung_request(&self) -> Conn {
        let mut conn = Conn::open(self.addr()).expect("connect");
        conn.send("GET", "/r4/ValueSet/$expand?_sim_hang=1", &[], b"", true)
            .expect("send");
        let workers = self.config["server"]["cluster"]["workers"]
            .as_u64()
            .unwrap_or(0);
        let codes: Vec<String> = std::iter::once("m0".to_string())
            .chain((1..=workers).map(|n| format!("tx{n}")))
            .collect();
        wait_until(
            "the hung request at work on a process",
            Duration::from_secs(10),
            || codes.iter().any(|code| in_flight_on(self, code) >= 1),
        );
        conn
    }
}

/// Runs `f` on `n` threads at once and collects what each returned, in thread order.
pub fn in_parallel<T: Send + 'static>(
    n: usize,
    f: impl Fn(usize) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let f = Arc::new(f);
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let f = f.clone();
            std::thread::spawn(move || f(i))
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("a test thread panicked"))
        .collect()
}

/// A client connection held open by the test: sends requests and reads responses when told to.
pub struct Conn {
    pub stream: TcpStream,
    pub(super) reader: BufReader<TcpStream>,
}

impl Conn {
    pub fn open(addr: SocketAddr) -> std::io::Result<Conn> {
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let reader = BufReader::new(stream.try_clone()?);
        Ok(Conn { stream, reader })
    }

    /// Sends a request head (and body); `keep_alive` false adds `Connection: close`.
    pub fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        keep_alive: bool,
    ) -> std::io::Result<()> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
        if !keep_alive {
            head.push_str("Connection: close\r\n");
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if !body.is_empty() || method == "POST" {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        self.stream.write_all(head.as_bytes())?;
        self.stream.write_all(body)
    }

    /// Reads one response (status 0 when the connection closed first).
    pub fn read(&mut self) -> Response {
        read_response(&mut self.reader).unwrap_or(Response {
            status: 0,
            headers: HashMap::new(),
            body: Vec::new(),
        })
    }

    /// Reads whatever arrives until the connection ends or `timeout` passes without data;
    /// returns the bytes read and whether the connection ended (EOF or reset).
    pub fn drain(&mut self, timeout: Duration) -> (usize, bool) {
        let _ = self.reader.get_ref().set_read_timeout(Some(timeout));
        let mut total = 0;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match self.reader.read(&mut buf) {
                Ok(0) => return (total, true),
                Ok(n) => total += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return (total, false)
                }
                Err(_) => return (total, true),
            }
        }
    }
}
