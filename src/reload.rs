//! Reload on SIGHUP: `config.json` read again with the flags and environment of the start,
//! checked as at start, and compared with the settings in force, setting by setting as the
//! table (`settings/table.rs`) classifies each: a `Live` one is applied at once (`Live`,
//! `live.rs`, carries it to the part that uses it); a `Servers` one the processes take as they
//! are restarted in turn (the reload restarts exactly those whose inputs changed); an `Upgrade`
//! one (ports, addresses, the runtime ...) the launcher takes by an in-place upgrade to its own
//! binary in the same reload; a `Restart` one (where the processes run) refuses an upgrade and
//! waits for the launcher's restart, kept as it was.
//!
//! Pure: `changes` and `apply_live`. Reading the file and the machine again is the launcher's
//! (`launcher/reloader.rs`).
//!
//! Where a reload's code lives: what changed and what it means, here and in `reload/live.rs`;
//! the signal, the file read again and the upgrade it may ask for, `launcher/reloader.rs`; the
//! processes restarted in turn, `supervisor/shell/reload.rs` (the shell) and
//! `supervisor/lifecycle/rolling.rs` (the order, pure).

use crate::settings::setting::Setting;
use crate::settings::{Reload, Settings, TABLE};

mod live;

pub(crate) use live::{Count, Live};

/// One changed setting: its row, and its value before and after as the settings show it. The
/// line (`path old → new`) is written where it is logged (`Display`).
#[derive(Clone)]
pub struct Change {
    pub setting: &'static Setting,
    pub was: String,
    pub now: String,
}

impl Change {
    /// The setting's path in config.json, from its row.
    pub fn path(&self) -> &'static str {
        self.setting.path
    }
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} → {}", self.setting.path, self.was, self.now)
    }
}

impl std::fmt::Debug for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

/// Two changes are the same when they are of the same row, from and to the same values.
impl PartialEq for Change {
    fn eq(&self, other: &Change) -> bool {
        std::ptr::eq(self.setting, other.setting) && self.was == other.was && self.now == other.now
    }
}

impl Eq for Change {}

/// A change is its line, for the tests' expected lists.
#[cfg(test)]
impl PartialEq<&str> for Change {
    fn eq(&self, line: &&str) -> bool {
        let line: &str = line;
        line == format!("{self}")
    }
}

/// What a reload changes, by what becomes of each setting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Applied now.
    pub live: Vec<Change>,
    /// Read by the processes at their start: taken as those whose inputs changed restart.
    pub servers: Vec<Change>,
    /// Taken by an in-place upgrade to the same binary.
    pub upgrade: Vec<Change>,
    /// Refuse an upgrade: kept as they were until the launcher's restart.
    pub restart: Vec<Change>,
    /// The worker count, or what sizes it while none is given, changed.
    pub workers: bool,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// How many settings changed.
    pub fn count(&self) -> usize {
        self.live.len() + self.servers.len() + self.upgrade.len() + self.restart.len()
    }

    /// The one line that sums a reload up: how many settings changed and what became of them.
    pub fn summary(&self) -> String {
        if self.is_empty() {
            return "no setting changed".to_string();
        }
        let n = self.count();
        format!(
            "{n} setting{} changed: {} applied, {} taken by the in-place upgrade, {} taken by \
             the processes as they restart in turn, {} waiting for a restart of the launcher",
            if n == 1 { "" } else { "s" },
            self.live.len(),
            self.upgrade.len(),
            self.servers.len(),
            self.restart.len()
        )
    }
}

/// Compares the settings in force with the reloaded ones.
pub fn changes(old: &Settings, new: &Settings) -> Changes {
    let mut c = Changes::default();
    for setting in TABLE {
        let (was, now) = (setting.shown(old), setting.shown(new));
        if was == now {
            continue;
        }
        let list = match setting.reload {
            Reload::Live => &mut c.live,
            Reload::Servers => &mut c.servers,
            Reload::Upgrade => &mut c.upgrade,
            Reload::Restart => &mut c.restart,
        };
        list.push(Change { setting, was, now });
    }
    c.workers = Count::from(&old.cluster) != Count::from(&new.cluster);
    c
}

/// The settings in force after a reload: the `Live` and `Servers` ones from `new` (with the
/// layer that gave each), and what the processes read of config.json; the rest as they were,
/// so a change that waits for an upgrade or a restart is reported again on the next reload.
pub fn apply_live(running: &Settings, new: &Settings) -> Settings {
    let mut s = running.clone();
    for setting in TABLE
        .iter()
        .filter(|t| matches!(t.reload, Reload::Live | Reload::Servers))
    {
        (setting.take)(&mut s, new);
        s.sources.set(setting.path, new.sources.of(setting.path));
    }
    s.servers_config = new.servers_config;
    s
}

#[cfg(test)]
mod tests;
