//! A small HTTP/1.1 client on raw sockets: tests control every byte and read every header.

use super::*;

#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    pub fn served_by(&self) -> &str {
        self.header("x-served-by").unwrap_or("")
    }
}

/// One request on a fresh connection (`Connection: close`); status 0 when the connection failed
/// or closed before a response.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut raw = head.into_bytes();
    raw.extend_from_slice(body);
    raw_request(addr, &raw, Duration::from_secs(60))
}

/// Sends raw bytes and reads one response (until the connection closes or the body ends).
pub fn raw_request(addr: SocketAddr, raw: &[u8], timeout: Duration) -> Response {
    let failed = Response {
        status: 0,
        headers: HashMap::new(),
        body: Vec::new(),
    };
    let Ok(mut s) = TcpStream::connect(addr) else {
        return failed;
    };
    let _ = s.set_read_timeout(Some(timeout));
    if s.write_all(raw).is_err() {
        return failed;
    }
    let mut reader = BufReader::new(s);
    read_response(&mut reader).unwrap_or(failed)
}

/// Reads one HTTP/1.1 response from `r` (Content-Length, chunked, or to EOF).
pub fn read_response<R: BufRead>(r: &mut R) -> Option<Response> {
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let status: u16 = line.split_whitespace().nth(1)?.parse().ok()?;
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let mut body = Vec::new();
    if let Some(len) = headers
        .get("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        body.resize(len, 0);
        r.read_exact(&mut body).ok()?;
    } else if headers
        .get("transfer-encoding")
        .is_some_and(|v| v.contains("chunked"))
    {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).ok()?;
            let n = usize::from_str_radix(size.trim(), 16).ok()?;
            if n == 0 {
                let mut end = String::new();
                r.read_line(&mut end).ok()?;
                break;
            }
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).ok()?;
            body.extend_from_slice(&chunk[..n]);
        }
    } else if status != 204 && status != 304 {
        let _ = r.read_to_end(&mut body);
    }
    Some(Response {
        status,
        headers,
        body,
    })
}
