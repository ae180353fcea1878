//! Before the old program gives anything up, the new one is checked: it exists and is
//! executable, it reads the state format this program writes (`<new> --upgrade-formats`), and
//! its own `--check` of the same configuration passes (run as a child with the same arguments,
//! environment and working directory). Any failure is the reason, one line; the old program
//! then serves on exactly as before. Blocking (it runs the new binary twice): call it off the
//! runtime's threads.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use super::exec::STATE_VAR;
use super::state::{reads, takes_client_conns, takes_listeners, FORMAT};

/// How much of a failed `--check`'s output the reason quotes.
const QUOTED: usize = 300;

/// What a checked binary takes over beyond the format's fields.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Takes {
    /// The idle client connections (`state::TAKES_CLIENT_CONNS`).
    pub clients: bool,
    /// The listeners bound for it (`state::TAKES_LISTENERS`).
    pub listeners: bool,
}

/// `Ok` when `program` may replace this one, saying what it takes over.
pub(crate) fn check(program: &Path) -> Result<Takes, String> {
    let shown = program.display();
    let meta = std::fs::metadata(program).map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(format!("{shown} is not an executable file"));
    }
    let formats = run(program, "--upgrade-formats")?;
    let line = String::from_utf8_lossy(&formats.stdout);
    if !formats.status.success() || !reads(&line, FORMAT) {
        return Err(format!(
            "{shown} does not read state format {FORMAT} (its --upgrade-formats said {:?}): \
             a downgrade across a change of format is refused",
            quote(&formats.stdout, &formats.stderr)
        ));
    }
    let checked = run(program, "--check")?;
    if !checked.status.success() {
        return Err(format!(
            "{shown} --check failed ({}): {}",
            checked.status,
            quote(&checked.stdout, &checked.stderr)
        ));
    }
    Ok(Takes {
        clients: takes_client_conns(&line),
        listeners: takes_listeners(&line),
    })
}

/// Runs `program` with `flag` first, then this program's own arguments (so `--` and what
/// follows stays last), environment (without systemd's variables: the check must not speak
/// for the service) and working directory.
fn run(program: &Path, flag: &str) -> Result<std::process::Output, String> {
    let mut cmd = Command::new(program);
    cmd.arg(flag)
        .args(std::env::args_os().skip(1))
        .env_remove(STATE_VAR)
        .stdin(Stdio::null());
    for var in crate::tree::members::NOTIFY_ENV {
        cmd.env_remove(var);
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let cannot = |e: std::io::Error| format!("{} {flag}: cannot run it: {e}", program.display());
    // Registered as the launcher's own child, or the subreaper would reap it first.
    let child = crate::tree::subreaper::spawn_known(|| {
        let c = cmd.spawn()?;
        let pid = c.id();
        Ok((c, pid))
    })
    .map_err(cannot)?;
    let pid = child.id();
    let out = child.wait_with_output();
    crate::tree::subreaper::forget(pid);
    out.map_err(cannot)
}

/// The last line a failing run wrote (its reason), shortened.
fn quote(stdout: &[u8], stderr: &[u8]) -> String {
    let text = if stderr.iter().any(|b| !b.is_ascii_whitespace()) {
        String::from_utf8_lossy(stderr)
    } else {
        String::from_utf8_lossy(stdout)
    };
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    last.chars().take(QUOTED).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_and_a_file_not_executable_are_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("fc-preflight-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let missing = dir.join("missing");
        assert!(check(&missing).expect_err("missing").contains("missing"));
        let plain = dir.join("plain");
        std::fs::write(&plain, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(check(&plain)
            .expect_err("not executable")
            .contains("not an executable file"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_quote_is_the_last_line_said() {
        assert_eq!(
            quote(b"", b"a\nfhircluster: bad port\n\n"),
            "fhircluster: bad port"
        );
        assert_eq!(quote(b"configuration ok\n", b""), "configuration ok");
    }
}
