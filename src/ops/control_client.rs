//! `fhircluster status`, `upgrade` and `scale`'s way to a running launcher: its control socket
//! (`--control-socket`; else, with a pid file (`--pid-file`, `pidFile` in config.json), the
//! socket the launcher it names listens on (`launcher_lookup.rs`); else as the launcher finds
//! it: `controlSocket` in the data directory's config.json, else `fhircluster.sock` there), one
//! request line and one JSON answer (`control_proto.rs`); or, for `status` with
//! `--admin-address`, the read-only HTTP listener.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

use crate::cli::Cli;
use crate::settings::paths;

/// Where a client asks.
#[derive(Clone, Debug)]
pub(crate) enum Target {
    /// The control socket: every command.
    Socket(PathBuf),
    /// The HTTP admin listener: `status` only.
    Http(SocketAddr),
}

/// The control socket's path for a client, the one lookup every client command uses:
/// `--control-socket`; else the socket of the launcher the pid file names (`--pid-file`, or
/// `pidFile` in config.json); else `controlSocket` in config.json (that one value, so a bad
/// unrelated setting in the file never hides a running launcher), else the default; relative to
/// the data directory. `Err`: it is off, or the pid file names no running launcher.
pub(crate) fn socket_path(cli: &Cli) -> Result<PathBuf> {
    let env = |key: &str| std::env::var_os(key).map(|v| v.to_string_lossy().into_owned());
    let (dir, from) = crate::settings::data_dir(cli, &env);
    let named = from.is_some() || cli.control_socket.is_some() || cli.pid_file.is_some();
    let dir = lookup_dir(dir, named, &|name| Path::new(name).exists());
    // A setting's text in config.json, by its path (a JSON pointer: `/server/cluster/pidFile`).
    let from_file = |path: &str| -> Option<String> {
        let text = crate::settings::jsonc::read_text(&dir).ok()??;
        let pointer = format!("/{}", path.replace('.', "/"));
        text.json.pointer(&pointer)?.as_str().map(str::to_string)
    };
    if cli.control_socket.is_none() {
        let pid_file = cli
            .pid_file
            .clone()
            .or_else(|| from_file(paths::cluster::pid_file));
        if let Some(path) = pid_file.and_then(|p| super::pid_file::path(&dir, &p)) {
            return super::launcher_lookup::find(&path);
        }
    }
    let name = cli
        .control_socket
        .clone()
        .or_else(|| from_file(paths::cluster::control_socket))
        .unwrap_or_else(|| "fhircluster.sock".to_string());
    if name == "off" || name.is_empty() {
        bail!("the control socket is off (server.cluster.controlSocket); give --admin-address for status, or send SIGUSR2 to upgrade");
    }
    Ok(dir.join(name))
}

/// Where a client looks for the launcher: the data directory given (or, for a control socket
/// or pid file named, the current directory they are relative to); with nothing given, the
/// current directory when it is a data directory (its `config.json` or `fhircluster.sock`
/// there), else Deploy's layout, `/var/lib/fhirsmith`, as `pm2 status` needs no path.
fn lookup_dir(given: PathBuf, named: bool, here: &dyn Fn(&str) -> bool) -> PathBuf {
    if named || here("config.json") || here("fhircluster.sock") {
        given
    } else {
        PathBuf::from(crate::cli::print::DEFAULT_DATA_DIR)
    }
}

/// Connects to the control socket, with what each failure means for an operator.
fn connect(path: &Path) -> Result<UnixStream> {
    UnixStream::connect(path).map_err(|e| {
        let at = path.display();
        match e.kind() {
            std::io::ErrorKind::NotFound => anyhow!(
                "no launcher: no control socket at {at} (is the launcher running with this data \
                 directory? give --data-dir, or --admin-address for status)"
            ),
            std::io::ErrorKind::ConnectionRefused => {
                anyhow!("no launcher answers on {at} (a socket left by a launcher that is gone)")
            }
            std::io::ErrorKind::PermissionDenied => anyhow!(
                "{at}: permission denied ({e}): the control socket is for the launcher's user \
                 and server.cluster.controlGroup (run as one of them; --admin-address gives \
                 status to anyone)"
            ),
            _ => anyhow!("{at}: {e}"),
        }
    })
}

/// One command on the control socket: its JSON answer (an `error` answer is returned as such).
pub(crate) fn ask(path: &Path, command: &str) -> Result<Value> {
    ask_waiting(path, command, Duration::from_secs(5))
}

/// As [`ask`], the answer waited for up to `timeout` (a command answered when it is over).
pub(crate) fn ask_waiting(path: &Path, command: &str, timeout: Duration) -> Result<Value> {
    let mut s = connect(path)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(format!("{command}\n").as_bytes())?;
    let mut line = String::new();
    // At most 16 MB (a `status` answer is a few KB).
    BufReader::new(s.take(16 << 20))
        .read_line(&mut line)
        .with_context(|| format!("reading the answer on {}", path.display()))?;
    if line.is_empty() {
        bail!(
            "the launcher on {} closed without an answer",
            path.display()
        );
    }
    serde_json::from_str(&line)
        .with_context(|| format!("the answer on {} is not JSON", path.display()))
}

/// `status`'s JSON from either target.
pub(crate) fn status(target: &Target) -> Result<Value> {
    match target {
        Target::Http(addr) => super::status_table::fetch(*addr),
        Target::Socket(path) => {
            let v = ask(path, "status")?;
            match v["error"].as_str() {
                Some(why) => bail!("the launcher on {} answered: {why}", path.display()),
                None => Ok(v),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_nothing_given_outside_a_data_directory_deploys_layout_is_asked() {
        let none = |_: &str| false;
        let deploy = PathBuf::from("/var/lib/fhirsmith");
        assert_eq!(lookup_dir(".".into(), false, &none), deploy);
        assert_eq!(
            lookup_dir("/d".into(), true, &none),
            PathBuf::from("/d"),
            "given"
        );
        for there in ["config.json", "fhircluster.sock"] {
            let here = |name: &str| name == there;
            assert_eq!(
                lookup_dir(".".into(), false, &here),
                PathBuf::from("."),
                "{there}"
            );
        }
    }
}
