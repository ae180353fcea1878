//! `hostPrefix`'s rule from the host's ordinal (DEC-90): `ordinal:LETTERS` is LETTERS followed by
//! the number that ends the host's name, so every pod of a Kubernetes StatefulSet
//! (`fhircluster-0`, `fhircluster-1` ...) takes its own prefix (`h0`, `h1` ...) from one
//! manifest, and keeps it across restarts (a pod's name is stable), so the cache-ids it issued
//! stay routable. A pod's name has a `-`, which a prefix can't carry (it goes into cache-ids and
//! the balancer's regular expressions): the number alone is taken. The letters go first and are
//! letters only, so the digits after them are the ordinal and nothing else (`a1` + `2` would read
//! as `a` + `12`). Pure: the host's name is given.

use super::error::{quote, SettingsError};
use super::{paths, Settings};

/// What begins the rule's value.
pub(crate) const ORDINAL: &str = "ordinal:";

/// The variable the host's name is read from (a container's runtime sets it to the pod's name),
/// the system's host name when it is unset.
pub(crate) const HOSTNAME: &str = "HOSTNAME";

/// The prefix `value` stands for on the host named `hostname`: `value` itself, or for
/// `ordinal:LETTERS`, LETTERS and the number that ends `hostname`. `Err`: what is wrong.
pub(crate) fn resolve(value: &str, hostname: Option<&str>) -> Result<String, String> {
    let Some(letters) = value.strip_prefix(ORDINAL) else {
        return Ok(value.to_string());
    };
    if letters.is_empty() || !letters.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(format!(
            "must be {ORDINAL} and 1 or more ASCII letters, e.g. \"{ORDINAL}h\" (h0, h1 ... from \
             the host name's number)"
        ));
    }
    let name = hostname.unwrap_or_default();
    let digits = &name[name.trim_end_matches(|c: char| c.is_ascii_digit()).len()..];
    let ordinal: u64 = digits.parse().map_err(|_| {
        format!(
            "takes the number that ends the host's name ({HOSTNAME}, as a StatefulSet's pod \
             fhircluster-0 has), and {} has none",
            quote(name)
        )
    })?;
    Ok(format!("{letters}{ordinal}"))
}

/// `hostPrefix` as read, resolved on this host (its name from `env`'s [`HOSTNAME`]).
pub(super) fn apply(
    s: &mut Settings,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), SettingsError> {
    let path = paths::cluster::host_prefix;
    let hostname = env(HOSTNAME);
    s.cluster.host_prefix =
        resolve(&s.cluster.host_prefix, hostname.as_deref()).map_err(|why| {
            SettingsError::invalid(
                path,
                quote(&s.cluster.host_prefix),
                Some(s.sources.of(path)),
                why,
            )
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_without_the_rule_is_itself() {
        assert_eq!(resolve("", None).as_deref(), Ok(""));
        assert_eq!(resolve("a", Some("web-3")).as_deref(), Ok("a"));
    }

    #[test]
    fn the_ordinal_rule_takes_the_number_that_ends_the_pods_name() {
        // spec: DEC-90
        let r = |host: &str| resolve("ordinal:h", Some(host));
        assert_eq!(r("fhircluster-0").as_deref(), Ok("h0"));
        assert_eq!(r("fhircluster-12").as_deref(), Ok("h12"));
        assert_eq!(r("tx-2-fhir-7").as_deref(), Ok("h7"));
        assert_eq!(resolve("ordinal:fhir", Some("a-1")).as_deref(), Ok("fhir1"));
        for bad_host in ["fhircluster", "", "a-", "a-99999999999999999999999"] {
            let e = r(bad_host).expect_err(bad_host);
            assert!(e.contains("number that ends"), "{e}");
        }
        assert!(resolve("ordinal:h", None).is_err());
    }

    #[test]
    fn the_flag_the_variable_and_config_json_give_it_and_the_rule_reads_the_host_name() {
        // spec: DEC-90
        use crate::cli::Cli;
        let env = |k: &str| match k {
            HOSTNAME => Some("fhircluster-3".to_string()),
            "FHIRSMITH_HOST_PREFIX" => Some("ordinal:e".to_string()),
            _ => None,
        };
        let flag = Cli {
            host_prefix: Some("ordinal:h".into()),
            ..Cli::default()
        };
        let prefix =
            |cli: &Cli, env: &dyn Fn(&str) -> Option<String>, json: Option<serde_json::Value>| {
                let path = std::path::Path::new("/d/config.json");
                super::super::from_sources(cli, env, json.as_ref().map(|j| (path, j)))
                    .map(|s| s.cluster.host_prefix)
            };
        let file = Some(serde_json::json!({"server": {"cluster": {"hostPrefix": "ordinal:f"}}}));
        assert_eq!(prefix(&flag, &env, file.clone()), Ok("h3".to_string()));
        assert_eq!(prefix(&Cli::default(), &env, file.clone()), Ok("e3".into()));
        let no_var = |k: &str| (k == HOSTNAME).then(|| "fhircluster-3".to_string());
        assert_eq!(prefix(&Cli::default(), &no_var, file), Ok("f3".into()));
        let no_number = |k: &str| (k == HOSTNAME).then(|| "web".to_string());
        let e = prefix(&flag, &no_number, None)
            .expect_err("no number")
            .to_string();
        assert!(
            e.contains("hostPrefix") && e.contains("--host-prefix") && e.contains("\"web\""),
            "{e}"
        );
        // The rule's result is checked as any prefix is: its codes stay within 16 characters.
        let long = |k: &str| (k == HOSTNAME).then(|| "p-1234567890123".to_string());
        assert!(prefix(&flag, &long, None).is_err());
    }

    #[test]
    fn the_rules_letters_are_letters_so_the_digits_after_them_are_the_ordinal() {
        for bad in ["ordinal:", "ordinal:h1", "ordinal:h-", "ordinal:é"] {
            let e = resolve(bad, Some("p-1")).expect_err(bad);
            assert!(e.contains("ASCII letters"), "{e}");
        }
    }
}
