//! What a reader of the machine returns when it could not read something: what it tried and why it
//! failed. Nothing is made up (spec, Status): a caller shows the reason, or falls back in a way the
//! spec names (the vCPUs for the cores), never to an invented number.

use std::fmt;
use std::io;
use std::path::Path;

/// A figure the machine did not give: `what` was being read, `why` it could not be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreadable {
    pub what: String,
    pub why: String,
}

impl Unreadable {
    pub fn new(what: impl Into<String>, why: impl Into<String>) -> Self {
        Unreadable {
            what: what.into(),
            why: why.into(),
        }
    }

    /// A file that could not be read.
    pub fn io(path: &Path, err: &io::Error) -> Self {
        Unreadable::new(path.display().to_string(), err.to_string())
    }

    /// A file that was read but did not hold what was expected.
    pub fn parse(path: &Path, why: impl Into<String>) -> Self {
        Unreadable::new(path.display().to_string(), why)
    }
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.why)
    }
}

impl std::error::Error for Unreadable {}

/// Reads a whole text file, or says why not.
pub(crate) fn read_text(path: &Path) -> Result<String, Unreadable> {
    std::fs::read_to_string(path).map_err(|e| Unreadable::io(path, &e))
}

/// Reads a text file that may be absent: `Ok(None)` when it does not exist (an ancestor cgroup
/// without that controller file, the root cgroup without `memory.max`).
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>, Unreadable> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Unreadable::io(path, &e)),
    }
}

/// `path` (absolute on the machine, e.g. `/sys/fs/cgroup/memory`) under `root`, so readers run on
/// fixture trees: with `root` = `/` it is `path` itself.
pub(crate) fn under_root(root: &Path, path: &Path) -> std::path::PathBuf {
    match path.strip_prefix("/") {
        Ok(relative) => root.join(relative),
        Err(_) => root.join(path),
    }
}
