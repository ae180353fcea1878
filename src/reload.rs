//! Reload on SIGHUP: `config.json` read again with the flags and environment of the start, checked
//! as at start, and compared with the settings in force, setting by setting as the table
//! (`settings/table.rs`) classifies each: a `Live` one is applied at once (`Live`, `live.rs`,
//! carries it to the part that uses it); a `Servers` one the servers take as the rolling restart
//! that follows starts each again (they read `config.json`, and the launcher's `hello`, at
//! start); a `Launcher` one (ports, addresses, the command, the runtime ...) waits for the
//! launcher's next start, and is logged so.
//!
//! Pure: `changes` and `apply_live`. Reading the file and the machine again is the launcher's
//! (`launcher/reloader.rs`).

use crate::settings::{Reload, Settings, TABLE};

mod live;

pub(crate) use live::{Count, Live};

/// What a reload changes, one `path old → new` line each.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Applied now.
    pub live: Vec<String>,
    /// The servers read them at their start: taken as the rolling restart replaces each.
    pub servers: Vec<String>,
    /// Changed, but the launcher takes them only at its next start.
    pub launcher: Vec<String>,
    /// The worker count, or what sizes it while none is given, changed.
    pub workers: bool,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.live.is_empty() && self.servers.is_empty() && self.launcher.is_empty()
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
            Reload::Launcher => &mut c.launcher,
        };
        list.push(format!("{} {was} → {now}", setting.path));
    }
    c.workers = Count::from(&old.cluster) != Count::from(&new.cluster);
    c
}

/// The settings in force after a reload: the `Live` and `Servers` ones from `new` (with the
/// layer that gave each), the rest as they were, so a change that waits for the launcher's next
/// start is reported again on the next reload.
pub fn apply_live(running: &Settings, new: &Settings) -> Settings {
    let mut s = running.clone();
    for setting in TABLE.iter().filter(|t| t.reload != Reload::Launcher) {
        (setting.take)(&mut s, new);
        s.sources.set(setting.path, new.sources.of(setting.path));
    }
    s
}

#[cfg(test)]
mod tests;
