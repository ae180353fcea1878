//! A network namespace of the test's own, joined to the host's by a veth pair, so a client can
//! reach the launcher from a non-loopback address on any host (no reliance on the machine having
//! one). Needs root and iproute2's `ip`; without them it fails saying so.

use super::*;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;

/// The namespace, its veth pair and their addresses (a /30 of 10.0.0.0/8 chosen from this test
/// process's pid); removed on drop.
pub struct NetNs {
    pub name: String,
    /// The host's end: an address of this host that is not loopback.
    pub host: Ipv4Addr,
    /// The namespace's end: where a client inside the namespace comes from.
    pub inside: Ipv4Addr,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("`ip` (iproute2) could not run: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl NetNs {
    /// Creates the namespace and the pair, or says exactly what is missing.
    pub fn create() -> Result<NetNs, String> {
        // SAFETY: geteuid only reads this process's credentials.
        if unsafe { libc::geteuid() } != 0 {
            return Err("creating a network namespace needs root".to_string());
        }
        let pid = std::process::id();
        let name = format!("fhct-{pid}");
        let (outer, inner) = (format!("fv{pid}h"), format!("fv{pid}n"));
        let net = [
            100 + ((pid >> 14) % 100) as u8,
            ((pid >> 6) & 0xff) as u8,
            ((pid & 0x3f) * 4) as u8,
        ];
        let ns = NetNs {
            name: name.clone(),
            host: Ipv4Addr::new(10, net[0], net[1], net[2] + 1),
            inside: Ipv4Addr::new(10, net[0], net[1], net[2] + 2),
        };
        ip(&["netns", "add", &name])?;
        // From here on, drop removes the namespace (and the pair with it).
        let (host, inside) = (format!("{}/30", ns.host), format!("{}/30", ns.inside));
        ip(&[
            "link", "add", &outer, "type", "veth", "peer", "name", &inner,
        ])?;
        ip(&["link", "set", &inner, "netns", &name])?;
        ip(&["addr", "add", &host, "dev", &outer])?;
        ip(&["link", "set", &outer, "up"])?;
        for args in [
            vec!["addr", "add", inside.as_str(), "dev", inner.as_str()],
            vec!["link", "set", inner.as_str(), "up"],
            vec!["link", "set", "lo", "up"],
        ] {
            let mut all = vec!["netns", "exec", name.as_str(), "ip"];
            all.extend(args);
            ip(&all)?;
        }
        Ok(ns)
    }

    /// Runs `f` on a thread inside the namespace (only that thread joins it), and returns
    /// what it returned.
    pub fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/run/netns/{}", self.name);
        std::thread::spawn(move || {
            let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            // SAFETY: setns on a namespace file this thread holds open; it moves only this
            // thread, which ends with `f`.
            let joined = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(
                joined,
                0,
                "setns into {path}: {}",
                std::io::Error::last_os_error()
            );
            f()
        })
        .join()
        .expect("the thread in the namespace")
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        if let Err(e) = ip(&["netns", "del", &self.name]) {
            eprintln!("could not remove the test network namespace: {e}");
        }
    }
}
