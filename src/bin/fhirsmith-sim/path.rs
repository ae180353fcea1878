//! Which operation a request is, and whether this process may answer it: the sim's own copy of
//! the routing rules (spec "Routing"), used to fail loudly when the launcher sends a worker
//! something only the master answers (SIM-10). Pure.

/// The sim's own control paths (`/sim/...`), answered by any process and never counted.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SimPath {
    Info,
    Received,
    Refuse,
    Channel,
    Alloc,
    Free,
    Hang,
    Stream,
    Large,
    Unknown,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Metadata,
    Lookup,
    ValidateCode,
    Subsumes,
    Expand,
    CacheControl,
    Closure,
    Syndication,
    Info,
    Read,
    Search,
    /// Another tx request (another `$operation`, the endpoint root ...).
    OtherTx,
    /// `/health`.
    Health,
    /// `/dashboard/status.json`.
    StatusJson,
    /// Any other path outside the tx endpoints.
    NonTx,
    Sim(SimPath),
}

impl Op {
    /// The name counts are kept under.
    pub fn name(self) -> &'static str {
        match self {
            Op::Metadata => "metadata",
            Op::Lookup => "$lookup",
            Op::ValidateCode => "$validate-code",
            Op::Subsumes => "$subsumes",
            Op::Expand => "$expand",
            Op::CacheControl => "$cache-control",
            Op::Closure => "$closure",
            Op::Syndication => "syndication",
            Op::Info => "info",
            Op::Read => "read",
            Op::Search => "search",
            Op::OtherTx => "other-tx",
            Op::Health => "health",
            Op::StatusJson => "status.json",
            Op::NonTx => "non-tx",
            Op::Sim(_) => "sim",
        }
    }

    /// A request inside a tx endpoint (cache-ids are checked on these).
    pub fn is_tx(self) -> bool {
        !matches!(self, Op::Health | Op::StatusJson | Op::NonTx | Op::Sim(_))
    }

    /// Answered only by the master (or a server with no role).
    pub fn master_only(self, shared_closure: bool) -> bool {
        match self {
            Op::Closure => !shared_closure,
            Op::Syndication | Op::Info | Op::Health | Op::StatusJson | Op::NonTx => true,
            _ => false,
        }
    }
}

/// Classifies a path (no query string) against the tx endpoints (e.g. `["/r4"]`).
pub fn classify(path: &str, endpoints: &[String]) -> Op {
    if let Some(rest) = path.strip_prefix("/sim/") {
        return Op::Sim(match rest.trim_end_matches('/') {
            "info" => SimPath::Info,
            "received" => SimPath::Received,
            "refuse" => SimPath::Refuse,
            "channel" => SimPath::Channel,
            "alloc" => SimPath::Alloc,
            "free" => SimPath::Free,
            "hang" => SimPath::Hang,
            "stream" => SimPath::Stream,
            "large" => SimPath::Large,
            _ => SimPath::Unknown,
        });
    }
    let tx_rest = endpoints.iter().find_map(|ep| {
        let rest = path.strip_prefix(ep.as_str())?;
        if rest.is_empty() {
            Some("")
        } else {
            rest.strip_prefix('/')
        }
    });
    let Some(rest) = tx_rest else {
        return match path {
            "/health" => Op::Health,
            "/dashboard/status.json" => Op::StatusJson,
            _ => Op::NonTx,
        };
    };
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let first = segments.first().copied().unwrap_or("");
    let last = segments.last().copied().unwrap_or("");
    if first == "syndication" || first.starts_with("syndication") {
        return Op::Syndication;
    }
    if first == "info" {
        return Op::Info;
    }
    match last {
        "metadata" if segments.len() == 1 => Op::Metadata,
        "$lookup" => Op::Lookup,
        "$validate-code" => Op::ValidateCode,
        "$subsumes" => Op::Subsumes,
        "$expand" => Op::Expand,
        "$cache-control" => Op::CacheControl,
        "$closure" => Op::Closure,
        l if l.starts_with('$') => Op::OtherTx,
        _ => match segments.len() {
            1 => Op::Search,
            2 => Op::Read,
            _ => Op::OtherTx,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(p: &str) -> Op {
        classify(p, &["/r4".to_string(), "/r5".to_string()])
    }

    #[test]
    fn tx_operations() {
        assert_eq!(c("/r4/metadata"), Op::Metadata);
        assert_eq!(c("/r5/CodeSystem/$lookup"), Op::Lookup);
        assert_eq!(c("/r4/ValueSet/abc/$validate-code"), Op::ValidateCode);
        assert_eq!(c("/r4/CodeSystem/$subsumes"), Op::Subsumes);
        assert_eq!(c("/r4/ValueSet/$expand"), Op::Expand);
        assert_eq!(c("/r4/$cache-control"), Op::CacheControl);
        assert_eq!(c("/r4/CodeSystem/loinc"), Op::Read);
        assert_eq!(c("/r4/CodeSystem"), Op::Search);
        assert_eq!(c("/r4"), Op::OtherTx);
        assert_eq!(c("/r4/$batch-validate-code"), Op::OtherTx);
    }

    #[test]
    fn master_only_paths() {
        // spec: SIM-10
        for (p, op) in [
            ("/r4/$closure", Op::Closure),
            ("/r4/ConceptMap/$closure", Op::Closure),
            ("/r4/syndication", Op::Syndication),
            ("/r4/syndication.xml", Op::Syndication),
            ("/r4/info/vsac", Op::Info),
            ("/", Op::NonTx),
            ("/packages/hl7.fhir.r4.core", Op::NonTx),
            ("/r4x/metadata", Op::NonTx),
            ("/health", Op::Health),
            ("/dashboard/status.json", Op::StatusJson),
        ] {
            assert_eq!(c(p), op, "{p}");
            assert!(op.master_only(false), "{p}");
            assert!(!op.is_tx() || matches!(op, Op::Closure | Op::Syndication | Op::Info));
        }
        assert!(
            !Op::Closure.master_only(true),
            "sharedClosure lets workers answer $closure"
        );
        assert!(!Op::Expand.master_only(false));
    }

    #[test]
    fn sim_paths() {
        assert_eq!(c("/sim/info"), Op::Sim(SimPath::Info));
        assert_eq!(c("/sim/stream"), Op::Sim(SimPath::Stream));
        assert_eq!(c("/sim/nope"), Op::Sim(SimPath::Unknown));
    }
}
