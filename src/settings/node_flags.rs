//! The Node flags for the children: the arguments after `--` on fhircluster's command line
//! (DEC-19), passed to every process it starts (LAUNCH-12). A debugger's (`--inspect...`) and a
//! watcher's (`--watch...`) flags are refused: in `cluster.js` they were the launcher's own
//! (LAUNCH-13, LAUNCH-14), and passed to N+1 children they would fight over one debug port or
//! restart the servers behind the launcher's back.

use super::error::{quote, SettingsError, Source};

/// Prefixes of the flags that are never passed on.
const REFUSED: &[(&str, &str)] = &[
    ("--inspect", "a debugger's flags"),
    ("--watch", "a watcher's flags"),
];

/// The node flags to pass on, or an error naming the first refused one.
pub fn check_node_flags(flags: &[String]) -> Result<Vec<String>, SettingsError> {
    for flag in flags {
        let name = flag.split('=').next().unwrap_or(flag).replace('_', "-");
        if let Some((_, what)) = REFUSED.iter().find(|(p, _)| name.starts_with(p)) {
            return Err(SettingsError::invalid(
                "node flags",
                quote(flag),
                Some(Source::NodeArgs),
                format!(
                    "{what} are not passed to the servers the launcher starts; \
                     run a server by hand (node server.js --role=...) to debug or watch it"
                ),
            ));
        }
    }
    Ok(flags.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(flags: &[&str]) -> Vec<String> {
        flags.iter().map(|f| f.to_string()).collect()
    }

    #[test]
    fn ordinary_node_flags_are_passed_on() {
        // spec: LAUNCH-12, DEC-19
        let flags = v(&["--max-old-space-size=8192", "--stack-size", "4000"]);
        assert_eq!(check_node_flags(&flags), Ok(flags.clone()));
        assert_eq!(check_node_flags(&[]), Ok(vec![]));
    }

    #[test]
    fn debugger_flags_are_refused() {
        // spec: LAUNCH-13
        for f in [
            "--inspect",
            "--inspect-brk=9229",
            "--inspect-port=1",
            "--inspect_brk",
        ] {
            let e = check_node_flags(&v(&["--max-old-space-size=1", f])).unwrap_err();
            assert_eq!(e.setting(), "node flags");
            assert!(e.to_string().contains(f), "{e}");
            assert!(e.to_string().contains("debugger"), "{e}");
        }
    }

    #[test]
    fn watcher_flags_are_refused() {
        // spec: LAUNCH-14
        for f in ["--watch", "--watch-path=src", "--watch-preserve-output"] {
            let e = check_node_flags(&v(&[f])).unwrap_err();
            assert!(e.to_string().contains("watcher"), "{e}");
        }
    }
}
