//! The worker rules by name (SIZE-9, DEC-23). A rule turns physical cores and vCPUs into a
//! worker count; an engine whose processes use the CPU differently adds its own rule to `RULES`,
//! the one place rules are listed (`registerWorkerRule` in FHIRsmith's `worker-count.js`).
//! `KNOWN_RULES` is derived from it at compile time, so the two cannot disagree.

use std::fmt;

/// A named way to derive the worker count from the CPUs.
#[derive(Debug)]
pub struct WorkerRule {
    pub name: &'static str,
    /// The count for `cores` physical cores (after any quota cap) and `vcpu` CPUs; may be 0 (the
    /// caller raises it to 1, SIZE-12).
    pub count: fn(cores: u32, vcpu: u32) -> u32,
    /// The formula with the numbers in, for the decision line: `min(4, round(0.6×8))`.
    pub explain: fn(cores: u32, vcpu: u32) -> String,
}

/// Rules are the same when their names are: names are unique in `RULES`.
impl PartialEq for WorkerRule {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

/// `classic`: `min(cores, round(0.6 × vCPU))` (SIZE-10). Rounded in integers (`(6v + 5) / 10`):
/// 0.6 × v never ends in .5, and this keeps float error out of it.
fn classic_count(cores: u32, vcpu: u32) -> u32 {
    let rounded = (u64::from(vcpu) * 6 + 5) / 10;
    u32::try_from(rounded).unwrap_or(u32::MAX).min(cores)
}

fn classic_explain(cores: u32, vcpu: u32) -> String {
    format!("min({cores}, round(0.6×{vcpu}))")
}

/// Every rule, by name. A new rule joins here and nowhere else.
pub const RULES: &[WorkerRule] = &[WorkerRule {
    name: "classic",
    count: classic_count,
    explain: classic_explain,
}];

const RULE_NAMES: [&str; RULES.len()] = {
    let mut names = [""; RULES.len()];
    let mut i = 0;
    while i < RULES.len() {
        names[i] = RULES[i].name;
        i += 1;
    }
    names
};

/// The names of the known rules, for validating `server.cluster.workerRule`.
pub const KNOWN_RULES: &[&str] = &RULE_NAMES;

/// `server.cluster.workerRule` names no known rule (DEC-23): a start-up error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownRule {
    pub name: String,
}

impl fmt::Display for UnknownRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "server.cluster.workerRule {:?} is not a known rule (known: {})",
            self.name,
            KNOWN_RULES.join(", ")
        )
    }
}

impl std::error::Error for UnknownRule {}

/// The rule named `name`.
pub fn find_rule(name: &str) -> Result<&'static WorkerRule, UnknownRule> {
    RULES
        .iter()
        .find(|rule| rule.name == name)
        .ok_or_else(|| UnknownRule {
            name: name.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_gives_the_specs_table() {
        // spec: SIZE-10, SIZE-11
        let classic = find_rule("classic").unwrap();
        assert_eq!((classic.count)(4, 4), 2);
        assert_eq!((classic.count)(4, 8), 4);
        assert_eq!((classic.count)(8, 8), 5);
        assert_eq!((classic.count)(8, 16), 8);
        assert_eq!((classic.explain)(4, 8), "min(4, round(0.6×8))");
    }

    #[test]
    fn classic_rounds_like_math_round() {
        // round(0.6) = 1, round(1.2) = 1, round(1.8) = 2, round(3.0) = 3
        let classic = find_rule("classic").unwrap();
        let counts: Vec<u32> = [1, 2, 3, 5]
            .iter()
            .map(|&v| (classic.count)(99, v))
            .collect();
        assert_eq!(counts, vec![1, 1, 2, 3]);
        assert_eq!((classic.count)(0, 8), 0, "the rule itself may give 0");
    }

    #[test]
    fn known_rules_list_every_rule() {
        // spec: SIZE-9
        assert_eq!(KNOWN_RULES, &["classic"]);
        assert_eq!(KNOWN_RULES.len(), RULES.len());
    }

    #[test]
    fn an_unknown_rule_lists_the_known_ones() {
        // spec: DEC-23
        let err = find_rule("turbo").unwrap_err();
        assert_eq!(
            err.to_string(),
            "server.cluster.workerRule \"turbo\" is not a known rule (known: classic)"
        );
    }
}
