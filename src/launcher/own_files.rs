//! The launcher's own files, opened or written as it starts: the access log, the pid file and
//! the Node preload. At a start a failure stops it; after an in-place upgrade the processes and
//! the clients are already this program's, so it is a `WARNING` saying what it costs, and the
//! launcher serves on (DEC-70). Each is a step of the test hook (`test_hooks`).

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use tracing::warn;

use crate::logs::access_log::AccessLog;
use crate::logs::journald::Journal;
use crate::settings::Settings;

/// The access log the settings ask for. After an upgrade, one that can't be opened is
/// recorded as off in `settings` (what is in force), so the next reload opens it.
pub(super) fn access_log(
    settings: &mut Settings,
    journal: Journal,
    upgraded: bool,
) -> Result<Option<Arc<AccessLog>>> {
    let opened = hooked("setup-access-log", || {
        crate::logs::access_log::init(settings, journal)
    });
    match opened {
        Err(e) if upgraded => {
            warn!("{e:#}: no access log until a reload opens it");
            settings.cluster.access_log = Default::default();
            Ok(None)
        }
        other => other,
    }
}

/// The pid file, written.
pub(super) fn pid_file(path: &Path, upgraded: bool) -> Result<()> {
    let claimed = hooked("setup-pid-file", || crate::ops::pid_file::claim(path));
    survived(claimed, upgraded, "serving on without the pid file")
}

/// The Node preload, written.
pub(super) fn preload(path: &Path, upgraded: bool) -> Result<()> {
    let installed = hooked("setup-preload", || crate::node_report::install(path));
    survived(
        installed,
        upgraded,
        "a process started again without it can't start: revert nodeReport, or free the path",
    )
}

/// `run`, unless the test hook makes step `name` fail.
fn hooked<T>(name: &str, run: impl FnOnce() -> Result<T>) -> Result<T> {
    crate::test_hooks::failing(name).map_err(anyhow::Error::msg)?;
    run()
}

fn survived(step: Result<()>, upgraded: bool, then: &str) -> Result<()> {
    match step {
        Err(e) if upgraded => {
            warn!("{e:#}: {then}");
            Ok(())
        }
        other => other,
    }
}
