//! The in-place upgrade (`kill -USR2`): the launcher replaces its own program with the binary
//! now at its path, keeping its pid, its listening sockets and every FHIRsmith process. What
//! the old program hands the new one is `state` (a versioned format, so a new binary that
//! doesn't know the old one's format is refused before anything is given up).

pub mod exec;
pub(crate) mod listeners;
pub(crate) mod preflight;
pub(crate) mod state;
