//! A setting's name is written once, in its row of `src/settings/table.rs` (#28.3): the product
//! code takes it from the row (`settings::paths::cluster::header_timeout`, the key alone with
//! `settings::key`), and a message that names a setting in its words names one the table has.
//! Like `tests/layers.rs`, this reads the source: the string literals of the product code (test
//! code aside: files under a `tests`, `*_tests`, `proptests` or `test_support` path, and each
//! file's code from its first `#[cfg(test)]` on). `src/bin/` is not looked at: the simulator
//! reads config.json as a FHIRsmith server would, and the load tool writes one, both outside
//! the library and its table.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::common::{is_test_path, rust_files};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The table's paths: each row is `field ["path", ...`.
fn table_paths(table: &str) -> BTreeSet<String> {
    table
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let (field, rest) = l.split_once(" [\"")?;
            if field.is_empty() || !field.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
                return None;
            }
            Some(rest.split_once('"')?.0.to_string())
        })
        .collect()
}

fn key(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

/// The string literals of `code` (their text as written, escapes kept), comments skipped.
fn literals(code: &str) -> Vec<String> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        let rest = &code[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |e| e + 2);
        } else if (rest.starts_with("r\"") || rest.starts_with("r#") || rest.starts_with("br"))
            && (i == 0 || !ident(b[i - 1]))
        {
            // A raw string: r"..", r#".."#, br"..".
            let r = rest.trim_start_matches('b');
            let hashes = r[1..].len() - r[1..].trim_start_matches('#').len();
            let body = &r[1 + hashes..];
            if !body.starts_with('"') {
                i += 1;
                continue;
            }
            let close = format!("\"{}", "#".repeat(hashes));
            let end = body[1..].find(&close).map_or(body.len() - 1, |e| e);
            out.push(body[1..1 + end].to_string());
            i += (rest.len() - body.len()) + 1 + end + close.len();
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push(code[i + 1..j.min(b.len())].to_string());
            i = j + 1;
        } else if b[i] == b'\'' {
            // A char literal ('"', '\''), or a lifetime (left alone).
            let mut chars = rest[1..].chars();
            match (chars.next(), chars.next()) {
                (Some('\\'), _) => i += 2 + rest[2..].find('\'').map_or(0, |e| e + 1),
                (Some(c), Some('\'')) => i += 2 + c.len_utf8(),
                _ => i += 1,
            }
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    out
}

/// Each product file (its path under `src/`) with the string literals of its product code.
fn product_literals() -> Vec<(String, Vec<String>)> {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    files
        .into_iter()
        .filter_map(|f| {
            let rel = f.strip_prefix(&root).expect("under src/").to_path_buf();
            if is_test_path(&rel) || rel.starts_with("bin") {
                return None;
            }
            let text = std::fs::read_to_string(&f).expect("a source file");
            let code = text.find("#[cfg(test)]").map_or(&text[..], |i| &text[..i]);
            Some((rel.display().to_string(), literals(code)))
        })
        .collect()
}

/// Literals equal to a setting's key that are something else's name: the fields of the status
/// document the master reads (each setting's value under its own name, as the spec's report has
/// it), not a reference to the row.
const NOT_A_SETTING: &[(&str, &str)] = &[
    ("status/snapshot/memory.rs", "rejectFraction"),
    ("status/snapshot/memory.rs", "abortFraction"),
];

/// Words in messages that look like a setting (`server.x`, `...Seconds`) but are none: the
/// FHIRsmith program file, the fields of the status document and of the access log's JSON
/// lines, and those of the Kubernetes manifests `print kubernetes` writes.
const NOT_SETTINGS: &[&str] = &[
    "server.js",
    "terminationGracePeriodSeconds",
    "periodSeconds",
    "timeoutSeconds",
    "cpuPercent",
    "cpuSeconds",
    "queuedSeconds",
    "firstByteSeconds",
    "totalSeconds",
];

/// The endings of the keys that carry a unit: a camelCase word with one, in a message, names a
/// setting.
const UNITS: &[&str] = &[
    "Seconds", "Minutes", "KB", "MB", "GB", "Percent", "Fraction",
];

fn paths() -> BTreeSet<String> {
    let table = std::fs::read_to_string(src().join("settings/table.rs")).expect("table.rs");
    let paths = table_paths(&table);
    assert!(paths.len() > 40, "table.rs's rows not found: {paths:?}");
    paths
}

#[test]
fn a_settings_name_is_taken_from_its_row_not_spelled_again() {
    let paths = paths();
    // A key is distinctive when camelCase; `port`, `workers`, `command` ... are also other
    // things' names (the IPC's, the status document's) and count only as whole paths.
    let keys: BTreeSet<&str> = paths
        .iter()
        .map(|p| key(p))
        .filter(|k| k.bytes().any(|b| b.is_ascii_uppercase()))
        .collect();
    let mut again = Vec::new();
    for (file, lits) in product_literals() {
        if file == "settings/table.rs" {
            continue;
        }
        for lit in lits {
            let pointer = paths.iter().find(|p| lit.contains(&p.replace('.', "/")));
            let whole = paths.contains(&lit) || keys.contains(lit.as_str());
            if (whole && !NOT_A_SETTING.contains(&(file.as_str(), lit.as_str())))
                || pointer.is_some()
            {
                again.push(format!("{file}: \"{lit}\""));
            }
        }
    }
    assert!(
        again.is_empty(),
        "settings' names spelled outside their row (take them from settings::paths):\n{}",
        again.join("\n")
    );
}

#[test]
fn every_setting_a_message_names_is_in_the_table() {
    let paths = paths();
    let sections: BTreeSet<&str> = paths
        .iter()
        .filter_map(|p| p.rsplit_once('.'))
        .map(|(s, _)| s)
        .collect();
    let keys: BTreeSet<&str> = paths.iter().map(|p| key(p)).collect();
    let mut unknown = Vec::new();
    for (file, lits) in product_literals() {
        for lit in lits {
            for word in words(&lit) {
                let dotted = word.contains('.');
                let first = word.split('.').next().unwrap_or("");
                let a_path = dotted && sections.iter().any(|s| s.split('.').next() == Some(first));
                let a_key = !dotted
                    && word.starts_with(|c: char| c.is_ascii_lowercase())
                    && UNITS.iter().any(|u| word.ends_with(u));
                let known = if dotted {
                    paths.contains(word) || sections.contains(word)
                } else {
                    keys.contains(word)
                };
                if (a_path || a_key) && !known && !NOT_SETTINGS.contains(&word) {
                    unknown.push(format!("{file}: {word} in \"{lit}\""));
                }
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "messages name settings src/settings/table.rs has no row for:\n{}",
        unknown.join("\n")
    );
}

/// The words of a literal: letters and digits, joined by dots (`server.cluster.workers`).
fn words(lit: &str) -> impl Iterator<Item = &str> {
    lit.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
        .map(|w| w.trim_matches('.'))
        .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic()))
}

#[test]
fn the_reader_sees_rows_literals_and_words() {
    let table =
        "        port [\"server.port\", 3000, port]\n    cluster: ClusterSettings {\n        \
                 header_timeout [\"server.cluster.headerTimeoutSeconds\", secs(30)]\n";
    let got: Vec<String> = table_paths(table).into_iter().collect();
    assert_eq!(got, ["server.cluster.headerTimeoutSeconds", "server.port"]);
    let code =
        "let a = \"x\"; // \"comment\"\n/* \"block\" */ let c = '\"'; let d = r#\"raw \"q\"\"#;\n\
                fn f<'a>(s: &'a str) -> &'a str { \"e\\\"f\" }";
    assert_eq!(literals(code), ["x", "raw \"q\"", "e\\\"f"]);
    let w: Vec<&str> =
        words("within server.cluster.headerTimeoutSeconds. (queueSeconds)").collect();
    assert_eq!(
        w,
        [
            "within",
            "server.cluster.headerTimeoutSeconds",
            "queueSeconds"
        ]
    );
}
