//! `unsafe` in one place (the style notes' point 9): the product's FFI lives in
//! `src/system/ffi.rs`, each block with its `SAFETY` comment, and the rest of the product (the
//! launcher's library and the binaries under `src/bin/`, which call `fhircluster::system::ffi`)
//! calls its safe functions or nix's. This test fails when `unsafe` appears in any file under
//! `src/` but that one. Comments, string literals and `#[cfg(test)]` items are not looked at:
//! tests may keep theirs (a fifo made for a test, a zeroed struct), and so may test files
//! (`*_tests.rs`, `tests.rs`, `load_tests/`, `proptests/`).

use std::path::{Path, PathBuf};

/// Where `unsafe` may be.
const HOME: &str = "src/system/ffi.rs";

#[test]
fn unsafe_lives_in_the_ffi_module_only() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    walk(&root.join("src"), &mut files);
    let mut outside = Vec::new();
    let mut home_seen = false;
    for path in files {
        let rel = path
            .strip_prefix(root)
            .expect("under the crate")
            .to_string_lossy()
            .replace('\\', "/");
        if rel == HOME {
            home_seen = true;
            continue;
        }
        if is_test_file(&rel) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("a source file");
        let lines = unsafe_lines(&product_code(&text));
        if !lines.is_empty() {
            outside.push(format!("{rel}:{lines:?}"));
        }
    }
    assert!(
        home_seen,
        "{HOME} not found: the test looks in the wrong place"
    );
    assert!(
        outside.is_empty(),
        "`unsafe` outside {HOME} (put the call there, behind a safe function with its SAFETY \
         comment, or use nix's safe wrapper): {outside:?}"
    );
}

#[test]
fn every_unsafe_in_the_ffi_module_says_why_it_is_sound() {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(HOME))
        .expect("the ffi module");
    let unexplained = unexplained(&text);
    assert!(
        unexplained.is_empty(),
        "`unsafe` in {HOME} without a `// SAFETY:` comment right above it, lines {unexplained:?}"
    );
}

#[test]
fn an_unsafe_without_its_safety_comment_is_seen() {
    let text = "fn a() {\n\
                // SAFETY: why.\n\
                unsafe { x() }\n\
                #[cfg(unix)]\n\
                // SAFETY: why,\n\
                // over two lines.\n\
                let r = unsafe { y() };\n\
                // Not a reason.\n\
                unsafe { z() }\n\
                w();\n\
                unsafe { v() }\n\
                }\n";
    assert_eq!(unexplained(text), vec![9, 11]);
}

/// The lines (1-based) of `text`'s `unsafe` (outside test items) with no `// SAFETY:` in the
/// comment lines (and attributes) right above them.
fn unexplained(text: &str) -> Vec<usize> {
    let lines: Vec<&str> = text.lines().collect();
    unsafe_lines(&product_code(text))
        .into_iter()
        .filter(|&n| {
            !lines[..n - 1]
                .iter()
                .rev()
                .map(|l| l.trim_start())
                .take_while(|l| l.starts_with("//") || l.starts_with("#["))
                .any(|l| l.starts_with("// SAFETY:"))
        })
        .collect()
}

#[test]
fn the_scan_sees_code_and_skips_comments_strings_and_test_items() {
    let text = "fn a() { unsafe { x() } }\n\
                // unsafe in a comment\n\
                /* unsafe\n in a block */\n\
                const S: &str = \"unsafe\";\n\
                #![forbid(unsafe_code)]\n\
                #[cfg(test)]\nmod tests {\n    fn t() { unsafe { y() } }\n}\n\
                fn b() { unsafe { z() } }\n";
    assert_eq!(unsafe_lines(&product_code(text)), vec![1, 11]);
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a directory of src/") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn is_test_file(rel: &str) -> bool {
    rel.ends_with("_tests.rs")
        || rel.ends_with("/tests.rs")
        || rel.contains("/load_tests/")
        || rel.contains("/proptests/")
        || rel.contains("/tests/")
}

/// The lines (1-based) whose code says `unsafe` as a word.
fn unsafe_lines(code: &str) -> Vec<usize> {
    code.lines()
        .enumerate()
        .filter(|(_, l)| {
            l.match_indices("unsafe").any(|(i, _)| {
                let before = l[..i].chars().next_back();
                let after = l[i + "unsafe".len()..].chars().next();
                let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                !word(before) && !word(after)
            })
        })
        .map(|(n, _)| n + 1)
        .collect()
}

/// `text` with its comments and string literals blanked and its `#[cfg(test)]` items taken
/// out (each replaced by as many empty lines, so line numbers hold).
fn product_code(text: &str) -> String {
    let blanked = blank_comments_and_strings(text);
    let mut out = String::with_capacity(blanked.len());
    let mut rest = blanked.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let end = item_end(item);
        out.extend(item[..end].chars().filter(|&c| c == '\n'));
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Where the item that begins `item` (at its attribute) ends: after its `;` or its closing
/// brace, whichever comes first at depth 0.
fn item_end(item: &str) -> usize {
    let mut depth = 0usize;
    for (i, c) in item.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            ';' if depth == 0 => return i + 1,
            _ => {}
        }
    }
    item.len()
}

/// Comments and the insides of string and char literals replaced by spaces (newlines kept).
fn blank_comments_and_strings(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let next = b.get(i + 1).copied();
        if b[i] == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if b[i] == '/' && next == Some('*') {
            i += 2;
            while i < b.len() && !(b[i] == '*' && b.get(i + 1) == Some(&'/')) {
                if b[i] == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
        } else if b[i] == 'r'
            && matches!(next, Some('"' | '#'))
            && !i
                .checked_sub(1)
                .is_some_and(|p| b[p].is_alphanumeric() || b[p] == '_')
        {
            // A raw string: r"..." or r#"..."#, ended by the quote and as many hashes.
            let hashes = b[i + 1..].iter().take_while(|&&c| c == '#').count();
            let open = i + 1 + hashes;
            if b.get(open) != Some(&'"') {
                out.push(b[i]);
                i += 1;
                continue;
            }
            out.push('"');
            i = open + 1;
            while i < b.len() {
                if b[i] == '"'
                    && b[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&c| c == '#')
                        .count()
                        == hashes
                {
                    i += 1 + hashes;
                    break;
                }
                if b[i] == '\n' {
                    out.push('\n');
                }
                i += 1;
            }
            out.push('"');
        } else if b[i] == '\'' && (b.get(i + 2) == Some(&'\'') || next == Some('\\')) {
            // A char literal ('"', '\''): skipped whole, so its quote starts no string.
            i += if next == Some('\\') { 3 } else { 1 };
            while i < b.len() && b[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else if b[i] == '"' {
            out.push('"');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                if b.get(i) == Some(&'\n') {
                    out.push('\n');
                }
                i += 1;
            }
            out.push('"');
            i += 1;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}
