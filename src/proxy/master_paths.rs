//! Tx-capable requests the master got, counted by their path's prefix (the FHIR base), for the
//! unused-tx-endpoint rule (`ops::tx_usage`): a request routed to the master because its path is
//! outside `modules.tx.endpoints` although a tx process could answer it (`$lookup`,
//! `$validate-code`, `$expand`, `metadata`, `CodeSystem/...`).

use std::collections::BTreeMap;
use std::sync::Mutex;

/// At most this many different prefixes are counted; more (a scan) count in the total only.
const MAX_PREFIXES: usize = 64;

/// The path segments that make a request one a tx process could answer, and where the FHIR
/// base ends: the prefix is what comes before the first of them.
fn is_fhir_segment(seg: &str) -> bool {
    let op = seg
        .strip_prefix('$')
        .or_else(|| seg.strip_prefix("%24"))
        .unwrap_or("");
    matches!(
        op,
        "lookup" | "validate-code" | "expand" | "subsumes" | "translate"
    ) || matches!(
        seg,
        "metadata" | "CodeSystem" | "ValueSet" | "ConceptMap" | "NamingSystem"
    )
}

/// The FHIR base of a tx-capable path (`/4_0_0/CodeSystem/$lookup` → `/4_0_0`, `/metadata` →
/// `/`); `None` for any other path. The query is not part of `path`.
pub fn tx_capable_prefix(path: &str) -> Option<String> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let at = segs.iter().position(|s| is_fhir_segment(s))?;
    Some(format!("/{}", segs[..at].join("/")))
}

/// Tx-capable requests the master got, by prefix, since they were last taken.
#[derive(Debug, Default)]
pub struct MasterPaths(Mutex<Counts>);

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counts {
    pub by_prefix: BTreeMap<String, u64>,
    pub total: u64,
}

impl MasterPaths {
    /// A request routed to the master: counted if tx-capable. Cheap for any other path (no lock).
    pub fn observe(&self, path: &str) {
        let Some(prefix) = tx_capable_prefix(path) else {
            return;
        };
        let mut c = self.0.lock().unwrap_or_else(|p| p.into_inner());
        c.total += 1;
        if let Some(n) = c.by_prefix.get_mut(&prefix) {
            *n += 1;
        } else if c.by_prefix.len() < MAX_PREFIXES {
            c.by_prefix.insert(prefix, 1);
        }
    }

    /// What was counted, and a fresh start.
    pub fn take(&self) -> Counts {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_capable_paths_and_their_prefix() {
        for (path, prefix) in [
            ("/4_0_0/CodeSystem/$lookup", Some("/4_0_0")),
            ("/fhir/r4/ValueSet/$expand", Some("/fhir/r4")),
            ("/4_0_0/$validate-code", Some("/4_0_0")),
            ("/x/%24lookup", Some("/x")),
            ("/metadata", Some("/")),
            ("/r4/ConceptMap/$translate", Some("/r4")),
            ("/dashboard", None),
            ("/r4/$closure", None),
            ("/", None),
            ("", None),
        ] {
            assert_eq!(tx_capable_prefix(path).as_deref(), prefix, "{path}");
        }
    }

    #[test]
    fn a_scan_of_many_prefixes_is_bounded() {
        let mp = MasterPaths::default();
        for i in 0..1000 {
            mp.observe(&format!("/p{i}/metadata"));
        }
        let c = mp.take();
        assert_eq!(c.total, 1000);
        assert_eq!(c.by_prefix.len(), MAX_PREFIXES);
    }
}
