//! Helpers for the operations tests: admin requests, fenced blocks of the docs, environments.

use super::*;

/// One free loopback port (for `--admin-address`, nginx's listener ...).
pub fn free_port() -> u16 {
    free_ports(1)
}

/// GET `path` from the launcher's own endpoint on 127.0.0.1:`port`.
pub fn admin_get(port: u16, path: &str) -> Response {
    get_direct(port, path)
}

/// The text of the fenced block in `markdown` whose opening line is ```` ```<lang> title="<title>" ````;
/// panics naming the file when there is none, or more than one.
pub fn fenced_block(markdown: &str, file: &str, lang: &str, title: &str) -> String {
    let opening = format!("```{lang} title=\"{title}\"");
    let mut found = Vec::new();
    let mut lines = markdown.lines();
    while let Some(l) = lines.next() {
        if l.trim_end() == opening {
            let body: Vec<&str> = lines
                .by_ref()
                .take_while(|l| l.trim_end() != "```")
                .collect();
            found.push(body.join("\n") + "\n");
        }
    }
    assert_eq!(
        found.len(),
        1,
        "{file} must hold exactly one block opening with {opening:?}"
    );
    found.remove(0)
}

/// A file at the crate's root (README.md, nginx.md ...), read whole.
pub fn crate_file(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Every environment variable of a running process, from /proc/<pid>/environ.
pub fn environ_of(pid: i32) -> HashMap<String, String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    raw.split(|b| *b == 0)
        .filter_map(|kv| {
            let kv = String::from_utf8_lossy(kv);
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}
