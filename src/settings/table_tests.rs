//! The table against what is written elsewhere: cluster.md's settings table (flags, variables,
//! defaults, what is allowed) and its Reload lists, the template, the command line and its help.

use std::collections::BTreeSet;

use clap::{CommandFactory, Parser};

use super::*;

const CLUSTER_MD: &str = include_str!("../../cluster.md");

/// The backticked words of a piece of markdown.
fn ticked(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// Markdown's backticks, quotes and spaces left out, to compare a value as written.
fn bare(text: &str) -> String {
    text.chars()
        .filter(|c| !matches!(c, '`' | '"' | ' '))
        .collect()
}

/// The cells of cluster.md's settings-table row for `path` (a path of its own, or its
/// elements' `[].path`).
fn doc_row(path: &str) -> Option<Vec<&'static str>> {
    CLUSTER_MD
        .lines()
        .find(|l| {
            l.strip_prefix("| `")
                .and_then(|rest| rest.strip_prefix(path))
                .is_some_and(|rest| rest.starts_with('`') || rest.starts_with("[]"))
        })
        .map(|l| l.split('|').map(str::trim).collect())
}

#[test]
fn cluster_md_has_a_row_for_every_setting_as_the_table_defines_it() {
    let defaults = Settings::default();
    let mut wrong = Vec::new();
    for s in TABLE {
        let Some(cells) = doc_row(s.path) else {
            wrong.push(format!("{}: no row in cluster.md's settings table", s.path));
            continue;
        };
        let (layers, default, allowed) = (cells[2], cells[3], cells[4]);
        // The flag and the variable, and no other.
        let given: BTreeSet<&str> = ticked(layers)
            .into_iter()
            .map(|t| t.split('=').next().unwrap_or(t))
            .filter(|t| {
                t.starts_with("--") || t.chars().all(|c| c.is_ascii_uppercase() || c == '_')
            })
            .collect();
        let table: BTreeSet<&str> = s.flag.iter().map(|f| f.name).chain(s.env).collect();
        if given != table {
            wrong.push(format!(
                "{}: cluster.md gives {given:?}, the table {table:?}",
                s.path
            ));
        }
        let expected = s.unset.map_or_else(|| s.shown(&defaults), str::to_string);
        if !bare(default).starts_with(&bare(&expected)) {
            wrong.push(format!(
                "{}: cluster.md's default {default:?}, the table's {expected:?}",
                s.path
            ));
        }
        if !allowed.contains(&s.kind.allowed()) {
            wrong.push(format!(
                "{}: cluster.md allows {allowed:?}, the table {:?}",
                s.path,
                s.kind.allowed()
            ));
        }
    }
    // And no row for a setting the table doesn't have.
    let section = CLUSTER_MD
        .split("\n## Settings\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .unwrap_or_default();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let path = ticked(line)[0].trim_end_matches("[].path");
        if setting(path).is_none() {
            wrong.push(format!(
                "cluster.md has a row for {path}, which the table doesn't"
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The settings a bullet of cluster.md's Reload section names: a dotted name is a path, any
/// other a key under `server.cluster`.
fn reload_list(starts: &str) -> BTreeSet<String> {
    let section = CLUSTER_MD
        .split("\n## Reload (SIGHUP)\n")
        .nth(1)
        .unwrap_or_default();
    let Some(at) = section.find(&format!("\n* {starts}")) else {
        panic!("cluster.md's Reload section has no bullet \"* {starts}\"");
    };
    let rest = &section[at + 1..];
    let end = rest[1..].find("\n* ").map_or(rest.len(), |e| e + 1);
    let bullet = rest[..end].split("\n\n").next().unwrap_or_default();
    ticked(bullet)
        .into_iter()
        .map(|t| {
            if t.contains('.') {
                t.to_string()
            } else {
                format!("server.cluster.{t}")
            }
        })
        .filter(|p| setting(p).is_some())
        .collect()
}

#[test]
fn cluster_md_reload_lists_are_the_tables() {
    for (reload, bullet) in [
        (Reload::Live, "**Applied at once**"),
        (
            Reload::Servers,
            "**Taken by the processes as they restart in turn**",
        ),
        (Reload::Upgrade, "**Taken by the in-place upgrade**"),
        (Reload::Restart, "**Needs a restart of the launcher**"),
    ] {
        let table: BTreeSet<String> = TABLE
            .iter()
            .filter(|s| s.reload == reload)
            .map(|s| s.path.to_string())
            .collect();
        assert_eq!(reload_list(bullet), table, "cluster.md's {bullet} list");
    }
}

#[test]
fn the_template_names_every_setting() {
    let text = include_str!("../../config-template.json");
    for s in TABLE {
        assert!(
            text.contains(&format!("\"{}\":", s.key())),
            "{} missing from the template",
            s.path
        );
    }
}

#[test]
fn each_flag_is_the_command_lines_and_reaches_its_setting() {
    let command = Cli::command();
    let mut flags: Vec<&str> = Vec::new();
    for s in TABLE {
        let Some(flag) = &s.flag else { continue };
        let cli = Cli::try_parse_from(["fhircluster", flag.name, "x"])
            .unwrap_or_else(|e| panic!("{}: {e}", flag.name));
        assert_eq!(
            (flag.get)(&cli).map(String::as_str),
            Some("x"),
            "{}",
            flag.name
        );
        flags.push(flag.name);
    }
    // Every flag that gives a setting is in the table.
    let not_settings = [
        "--data-dir",
        "--check",
        "--demo",
        "--help",
        "--version",
        "--upgrade-formats",
    ];
    for arg in command.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        let long = format!("--{long}");
        assert!(
            flags.contains(&long.as_str()) || not_settings.contains(&long.as_str()),
            "{long} gives no setting of the table"
        );
    }
}

#[test]
fn the_help_names_every_environment_variable() {
    let help = Cli::command().render_long_help().to_string();
    for var in TABLE.iter().filter_map(|s| s.env) {
        assert!(help.contains(var), "{var} missing from --help:\n{help}");
    }
}

#[test]
fn paths_and_flags_are_each_in_one_row() {
    let mut seen = BTreeSet::new();
    for s in TABLE {
        assert!(seen.insert(s.path), "{} twice", s.path);
        for name in s.flag.iter().map(|f| f.name).chain(s.env) {
            assert!(seen.insert(name), "{name} twice");
        }
    }
}

#[test]
fn a_rows_path_is_named_by_its_field_and_its_key_is_the_paths_end() {
    // The path constants are the rows' own (the row takes its path from them), by field.
    assert!(TABLE
        .iter()
        .any(|s| s.path == paths::cluster::header_timeout));
    assert_eq!(
        paths::cluster::header_timeout,
        "server.cluster.headerTimeoutSeconds"
    );
    assert_eq!(paths::port, "server.port");
    const KEY: &str = super::super::key(paths::cluster::header_timeout);
    assert_eq!(KEY, "headerTimeoutSeconds");
    assert_eq!(super::super::key("server.port"), "port");
    assert_eq!(super::super::key("nodots"), "nodots");
    assert_eq!(super::super::key(""), "");
    for s in TABLE {
        assert_eq!(
            s.key(),
            s.path.rsplit('.').next().unwrap_or(s.path),
            "{}",
            s.path
        );
    }
}
