//! The status keeper across an in-place upgrade: what each process's row says of it (its last
//! restart's reason, its recycles, its memory guard's limit), the graph history and when the
//! launcher started. The events wait in the outbox's database, which the new program opens as
//! a start does; the upgrade is not a start, so no `launcherStarted`. Figures a process sends
//! every `statusSeconds` are not carried: the next ones come soon.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{Keeper, Row, Tally};
use crate::process::ProcessSpec;
use crate::settings::Settings;
use crate::status::history::{History, SavedHistory};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KeeperState {
    rows: Vec<RowState>,
    /// The graph history, typed (`status::history::saved`).
    history: SavedHistory,
    /// How long before the handover the launcher (its first program) started.
    started_ms_ago: u64,
    /// The worker count wanted and whether it was set at run time (missing from an older
    /// program's state: the new program's own count then).
    #[serde(default)]
    workers: Option<super::workers::Wanted>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RowState {
    code: String,
    last_restart: Option<String>,
    guard_limit: Option<u64>,
    recycles: u64,
    recycle_reason: Option<String>,
}

impl Keeper {
    /// The keeper as data. The minute is closed first with the front door's `tally` (its
    /// counts become an event, the history is saved), so nothing counted is lost.
    pub(crate) fn hand_over(&mut self, tally: Tally, now: Instant) -> KeeperState {
        self.minute(tally);
        let ms = u64::try_from(now.saturating_duration_since(self.started).as_millis());
        KeeperState {
            rows: self
                .rows
                .iter()
                .map(|r| RowState {
                    code: r.code.clone(),
                    last_restart: r.last_restart.clone(),
                    guard_limit: r.guard_limit,
                    recycles: r.recycles,
                    recycle_reason: r.recycle_reason.clone(),
                })
                .collect(),
            history: self.history.saved(crate::clock::unix_ms()),
            started_ms_ago: ms.unwrap_or(u64::MAX),
            workers: Some(self.wanted.clone()),
        }
    }

    /// The keeper handed over, for `specs` (the rows follow them by code; a process new to
    /// the configuration starts afresh).
    pub(crate) fn resume(
        settings: &Settings,
        specs: &[ProcessSpec],
        now: Instant,
        s: &KeeperState,
    ) -> Keeper {
        let mut k = Keeper::open(settings, specs, now);
        for row in &mut k.rows {
            if let Some(was) = s.rows.iter().find(|r| r.code == row.code) {
                *row = Row {
                    last_restart: was.last_restart.clone(),
                    guard_limit: was.guard_limit,
                    recycles: was.recycles,
                    recycle_reason: was.recycle_reason.clone(),
                    ..row.clone()
                };
            }
        }
        let ms = crate::clock::unix_ms();
        k.history = History::restore(&s.history, settings.cluster.shared_cache, ms);
        k.started = now
            .checked_sub(Duration::from_millis(s.started_ms_ago))
            .unwrap_or(now);
        if let Some(w) = &s.workers {
            k.wanted = w.clone();
        }
        k
    }
}
