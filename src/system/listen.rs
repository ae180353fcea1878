//! Whether a child listens on its port, read from `/proc`: the listening TCP sockets
//! (`/proc/net/tcp`, `/proc/net/tcp6`), matched by inode against the `socket:[inode]` links in
//! `/proc/<pid>/fd` of the child and its descendants (so a server under a wrapper shell counts).
//!
//! This is how a server that never speaks the IPC channel is found ready. Only a socket the
//! child's own process tree holds counts: one on the same port held by anything else (an old
//! process still shutting down, a stranger) never does (LAUNCH-4); [`Look::Others`] names it so
//! the launcher can warn. A server found on every interface (`0.0.0.0`, `::`) when told to listen
//! on one address ([`exposed`]) can be reached directly, around the launcher. At start,
//! [`held_by`] names whoever already listens on a port the plan needs. The parsers, [`decide`]
//! and [`conflicts`] are pure; [`look`] and [`held_by`] read under a `root`.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use super::unreadable::Unreadable;

/// The first wait before a look, doubled after each look up to [`MAX_INTERVAL`].
pub const FIRST_INTERVAL: Duration = Duration::from_millis(50);
pub const MAX_INTERVAL: Duration = Duration::from_secs(1);

/// The wait after `prev` (none before the first look).
pub fn next_interval(prev: Option<Duration>) -> Duration {
    match prev {
        None => FIRST_INTERVAL,
        Some(p) => (p * 2).min(MAX_INTERVAL),
    }
}

/// One socket in the LISTEN state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenSocket {
    pub addr: IpAddr,
    pub port: u16,
    pub uid: u32,
    pub inode: u64,
}

/// `st` of a listening socket in `/proc/net/tcp*`.
const TCP_LISTEN: &str = "0A";

/// The listening sockets in a `/proc/net/tcp` or `/proc/net/tcp6` table. The header and lines
/// that don't parse are skipped, as are sockets without an inode. (The launcher reads the files a
/// line at a time, `read_net_tcp`; this is the same rule over a whole text.)
#[cfg(test)]
pub fn parse_net_tcp(text: &str) -> Vec<ListenSocket> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<ListenSocket> {
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
    // The state first: nearly every line is a connection, not a listening socket.
    let mut f = line.split_whitespace();
    let local = f.nth(1)?;
    if !f.nth(1)?.eq_ignore_ascii_case(TCP_LISTEN) {
        return None;
    }
    let uid = f.nth(3)?.parse().ok()?;
    let inode = f.nth(1)?.parse().ok().filter(|&i| i != 0)?;
    let (addr, port) = parse_address(local)?;
    Some(ListenSocket {
        addr,
        port,
        uid,
        inode,
    })
}

/// `0100007F:0BB8` (v4) or 32 hex digits `:PORT` (v6). The kernel prints the address as 32-bit
/// words in the host's byte order (little-endian on x86 and arm64), the port as a plain number.
pub fn parse_address(text: &str) -> Option<(IpAddr, u16)> {
    let (addr, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words = |hex: &str| -> Option<Vec<[u8; 4]>> {
        if hex.is_empty() || hex.len() % 8 != 0 || !hex.is_ascii() {
            return None;
        }
        (0..hex.len() / 8)
            .map(|i| {
                u32::from_str_radix(&hex[i * 8..i * 8 + 8], 16)
                    .ok()
                    .map(u32::to_ne_bytes)
            })
            .collect()
    };
    let w = words(addr)?;
    let ip = match w.len() {
        1 => IpAddr::V4(Ipv4Addr::from(w[0])),
        4 => {
            let mut bytes = [0u8; 16];
            for (i, word) in w.iter().enumerate() {
                bytes[i * 4..i * 4 + 4].copy_from_slice(word);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some((ip, port))
}

/// Whether a socket bound to `bound` accepts connections to `wanted`: the same address (a
/// v4-mapped v6 address counts as its v4 one), or a wildcard that covers it (`0.0.0.0` covers
/// every v4 address, `::` every address, as a dual-stack socket does).
pub fn covers(bound: IpAddr, wanted: IpAddr) -> bool {
    let canon = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    let (bound, wanted) = (canon(bound), canon(wanted));
    match bound {
        IpAddr::V4(b) if b.is_unspecified() => wanted.is_ipv4(),
        IpAddr::V6(b) if b.is_unspecified() => true,
        b => b == wanted,
    }
}

/// The inode of an fd link's target: `socket:[12345]` → 12345.
pub fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The parent pid in `/proc/<pid>/stat` (the field after the state, after the `)` that ends the
/// command name, which may itself hold spaces and parentheses).
pub fn parse_ppid(stat: &str) -> Option<u32> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// What a look found for one child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Look {
    /// A socket on the address and port held by the child or a descendant (this pid), bound to
    /// `addr` (an unspecified address when the tree has one such socket among several).
    Own {
        pid: u32,
        addr: IpAddr,
    },
    /// Sockets on the address and port, none held by the child's process tree.
    Others(Vec<Other>),
    Nothing,
}

/// A listening socket on a child's address and port that the child's tree does not hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Other {
    pub socket: ListenSocket,
    /// The pid and command holding it, when the launcher may see them.
    pub holder: Option<(u32, String)>,
}

impl std::fmt::Display for Other {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.socket;
        match &self.holder {
            Some((pid, cmd)) => write!(f, "pid {pid} ({cmd})")?,
            None => write!(f, "a process the launcher cannot see (uid {})", s.uid)?,
        }
        write!(f, " listens on {}", SocketAddr::new(s.addr, s.port))
    }
}

/// Decides from the listening sockets and the inodes the child's tree holds (inode → pid).
/// `Others` carries the foreign sockets without holders; [`look`] fills those in.
pub fn decide(sockets: &[ListenSocket], wanted: SocketAddr, family: &HashMap<u64, u32>) -> Look {
    let mut others = Vec::new();
    let mut own: Option<(u32, IpAddr)> = None;
    for s in sockets
        .iter()
        .filter(|s| s.port == wanted.port() && covers(s.addr, wanted.ip()))
    {
        match family.get(&s.inode) {
            // The wildcard one is kept: it is the one to warn about.
            Some(&pid) if own.is_none_or(|(_, a)| !a.is_unspecified()) => own = Some((pid, s.addr)),
            Some(_) => {}
            None => others.push(Other {
                socket: *s,
                holder: None,
            }),
        }
    }
    match own {
        Some((pid, addr)) => Look::Own { pid, addr },
        None if others.is_empty() => Look::Nothing,
        None => Look::Others(others),
    }
}

/// Whether a server told to listen on `bind_address` but found bound to `bound` can be reached
/// on addresses other than that one: it listens on every interface and was not told to.
pub fn exposed(bound: IpAddr, bind_address: IpAddr) -> bool {
    bound.is_unspecified() && !bind_address.is_unspecified()
}

/// The listening sockets that stand in the way of listening on `wanted`: on its port, on the same
/// address or on one either side's wildcard covers (`0.0.0.0` and `127.0.0.1` collide; `::`
/// collides with every address, as a dual-stack socket does).
pub fn conflicts(sockets: &[ListenSocket], wanted: SocketAddr) -> Vec<ListenSocket> {
    sockets
        .iter()
        .filter(|s| {
            s.port == wanted.port() && (covers(s.addr, wanted.ip()) || covers(wanted.ip(), s.addr))
        })
        .copied()
        .collect()
}

/// The listening sockets of this network namespace, v4 and v6 (a kernel without IPv6 has no
/// `tcp6`).
pub fn read_listening(root: &Path) -> Result<Vec<ListenSocket>, Unreadable> {
    let path = root.join("proc/net/tcp");
    let mut all = read_net_tcp(&path)?.ok_or_else(|| {
        Unreadable::io(&path, &std::io::Error::from(std::io::ErrorKind::NotFound))
    })?;
    if let Some(v6) = read_net_tcp(&root.join("proc/net/tcp6"))? {
        all.extend(v6);
    }
    Ok(all)
}

/// The listening sockets one `/proc/net/tcp*` file lists (`None`: no such file), read a line
/// at a time. On a busy host the file lists every connection, including those in TIME_WAIT: read
/// whole it was tens of MB after a load test, taken by each look at a process's sockets and
/// kept by the allocator afterwards, so an idle launcher stayed several times its size.
fn read_net_tcp(path: &Path) -> Result<Option<Vec<ListenSocket>>, Unreadable> {
    use std::io::BufRead;
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Unreadable::io(path, &e)),
    };
    let mut reader = std::io::BufReader::new(file);
    let mut line = String::new();
    let mut found = Vec::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) => return Ok(Some(found)),
            Ok(_) => found.extend(parse_line(&line)),
            Err(e) => return Err(Unreadable::io(path, &e)),
        }
    }
}

/// Who already listens where `wanted` would (see [`conflicts`]), named where the launcher may
/// see them: empty when the way is clear.
pub fn held_by(root: &Path, wanted: SocketAddr) -> Result<Vec<Other>, Unreadable> {
    let found = conflicts(&read_listening(root)?, wanted);
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let held = holders(root, &found.iter().map(|s| s.inode).collect());
    Ok(found
        .into_iter()
        .map(|socket| Other {
            holder: held.get(&socket.inode).cloned(),
            socket,
        })
        .collect())
}

/// The direct children of `pid`, as [`family`] finds them.
pub fn children(root: &Path, pid: u32) -> Vec<u32> {
    children_files(root, pid).unwrap_or_else(|| ppid_map(root).remove(&pid).unwrap_or_default())
}

/// `pid` and every descendant: from `/proc/<pid>/task/*/children` where the kernel has them,
/// otherwise from the parent pids of every process.
pub fn family(root: &Path, pid: u32) -> Vec<u32> {
    let mut parents: Option<HashMap<u32, Vec<u32>>> = None;
    let mut seen = HashSet::from([pid]);
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        i += 1;
        let kids = match children_files(root, p) {
            Some(k) => k,
            None => parents
                .get_or_insert_with(|| ppid_map(root))
                .get(&p)
                .cloned()
                .unwrap_or_default(),
        };
        for k in kids {
            if seen.insert(k) {
                out.push(k);
            }
        }
    }
    out
}

/// The children listed in `/proc/<pid>/task/*/children`; `None` when the kernel has no such
/// files (or the process is gone).
fn children_files(root: &Path, pid: u32) -> Option<Vec<u32>> {
    let tasks = std::fs::read_dir(root.join(format!("proc/{pid}/task"))).ok()?;
    let mut kids = Vec::new();
    let mut any = false;
    for t in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
            any = true;
            kids.extend(
                text.split_whitespace()
                    .filter_map(|s| s.parse::<u32>().ok()),
            );
        }
    }
    any.then_some(kids)
}

/// Parent pid → its children, from every `/proc/<pid>/stat`.
fn ppid_map(root: &Path) -> HashMap<u32, Vec<u32>> {
    let mut map: HashMap<u32, Vec<u32>> = HashMap::new();
    for p in pids(root) {
        let stat = std::fs::read_to_string(root.join(format!("proc/{p}/stat")));
        if let Some(ppid) = stat.ok().as_deref().and_then(parse_ppid) {
            map.entry(ppid).or_default().push(p);
        }
    }
    map
}

/// Every process's pid in `root`'s `/proc`.
pub fn pids(root: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(root.join("proc")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// The socket inodes among `pid`'s open files (none when they can't be read).
pub fn socket_inodes(root: &Path, pid: u32) -> Vec<u64> {
    let Ok(fds) = std::fs::read_dir(root.join(format!("proc/{pid}/fd"))) else {
        return Vec::new();
    };
    fds.flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|target| socket_inode(target.to_str()?))
        .collect()
}

/// The command of `pid`: its arguments, or its name when they are empty or unreadable.
pub fn command_of(root: &Path, pid: u32) -> String {
    let args = std::fs::read(root.join(format!("proc/{pid}/cmdline"))).unwrap_or_default();
    let text: Vec<String> = args
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    if text.is_empty() {
        std::fs::read_to_string(root.join(format!("proc/{pid}/comm")))
            .map(|c| c.trim().to_string())
            .unwrap_or_else(|_| "?".to_string())
    } else {
        text.join(" ")
    }
}

/// Which process holds each of `inodes`, where the launcher may read its open files.
fn holders(root: &Path, inodes: &HashSet<u64>) -> HashMap<u64, (u32, String)> {
    let mut found = HashMap::new();
    for p in pids(root) {
        for inode in socket_inodes(root, p) {
            if inodes.contains(&inode) && !found.contains_key(&inode) {
                found.insert(inode, (p, command_of(root, p)));
            }
        }
        if found.len() == inodes.len() {
            break;
        }
    }
    found
}

/// Looks once whether `pid`'s process tree listens on `wanted`. With `name_others`, the holders
/// of foreign sockets are looked up too (a scan of every process's files: do it once per start).
pub fn look(
    root: &Path,
    pid: u32,
    wanted: SocketAddr,
    name_others: bool,
) -> Result<Look, Unreadable> {
    let sockets = read_listening(root)?;
    if !sockets
        .iter()
        .any(|s| s.port == wanted.port() && covers(s.addr, wanted.ip()))
    {
        return Ok(Look::Nothing);
    }
    let mut tree = HashMap::new();
    for p in family(root, pid) {
        for inode in socket_inodes(root, p) {
            tree.entry(inode).or_insert(p);
        }
    }
    match decide(&sockets, wanted, &tree) {
        Look::Others(mut others) if name_others => {
            let inodes = others.iter().map(|o| o.socket.inode).collect();
            let held = holders(root, &inodes);
            for o in &mut others {
                o.holder = held.get(&o.socket.inode).cloned();
            }
            Ok(Look::Others(others))
        }
        other => Ok(other),
    }
}

#[cfg(test)]
#[path = "listen_tests.rs"]
mod tests;
