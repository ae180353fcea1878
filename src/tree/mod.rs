//! No process outlives its place in the cluster. Each process the launcher starts leads a process
//! group of its own and carries the run's mark in its environment (`members`); the launcher is
//! their subreaper, so whatever they start stays in its tree (`subreaper`); when a process ends,
//! what it left behind is ended with it, `SIGTERM` then `SIGKILL` after `killSeconds` (`ending`,
//! `sweep`); and a guardian process ends them all should the launcher itself be killed
//! (`guardian`, `guardian_main`), itself watched and replaced whenever it ends
//! (`guardian_watch`, `guardian_backoff`). `run` ties these to one run of the launcher.

pub(crate) mod ending;
pub(crate) mod exit_watch;
pub(crate) mod guardian;
pub(crate) mod guardian_backoff;
pub mod guardian_main;
pub(crate) mod guardian_watch;
pub(crate) mod members;
pub(crate) mod run;
pub(crate) mod subreaper;
pub(crate) mod sweep;
