//! The crate's layers stay as `src/lib.rs` documents them (#28.6). A top-level module is
//! `src/X.rs` with `src/X/**`; it imports another when its code names `crate::Y` (or
//! `crate::{Y, ..}`). Test code is not looked at: files under a `tests`, `*_tests`, `proptests` or
//! `test_support` path and each file's code from its first `#[cfg(test)]` on, so a test may reach
//! anywhere. Two checks: the graph has no cycle at all (each strongly connected component is one
//! module), and every arrow runs down the layer list in the crate docs' "Layers" section.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::common::{is_test_path, rust_files};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The top-level modules: `src/lib.rs`'s `mod` lines.
fn modules(lib: &str) -> Vec<String> {
    lib.lines()
        .filter_map(|l| {
            let l = l
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            let name = l.strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.to_string())
        })
        .collect()
}

/// The layer list: the bullets of the crate docs' `# Layers` section, top first, each bullet the
/// modules of one layer in backticks (a bullet may run on over `//!   ` lines).
fn layers(lib: &str) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut inside = false;
    for line in lib.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            break;
        };
        let doc = doc.strip_prefix(' ').unwrap_or(doc);
        if doc.starts_with('#') {
            inside = doc.trim() == "# Layers";
            continue;
        }
        if !inside {
            continue;
        }
        let names = || {
            doc.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        if doc.starts_with("* ") {
            out.push(names());
        } else if doc.starts_with("  ") {
            if let Some(last) = out.last_mut() {
                last.extend(names());
            }
        }
    }
    out
}

/// The code of a file that counts: before its first `#[cfg(test)]`, without `//` comments.
fn product_code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// Every top-level name the code reaches through `crate::`.
fn crate_refs(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut at = 0;
    while let Some(i) = code[at..].find("crate::") {
        let start = at + i;
        at = start + "crate::".len();
        let before = code[..start].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[at..];
        if let Some(group) = rest.strip_prefix('{') {
            // The top-level names of a `crate::{a, b::c, d::{e, f}}` group.
            let mut depth = 0;
            let mut item_start = true;
            for (k, ch) in group.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && (c.is_ascii_alphanumeric() || c == '_') => {
                        out.insert(ident(&group[k..]).to_string());
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(rest).to_string());
        }
    }
    out
}

/// Which top-level module imports which, each arrow with one file that makes it.
fn graph(mods: &[String]) -> BTreeMap<String, BTreeMap<String, PathBuf>> {
    let root = src();
    let mut g: BTreeMap<String, BTreeMap<String, PathBuf>> = BTreeMap::new();
    for m in mods {
        let mut files = Vec::new();
        let file = root.join(format!("{m}.rs"));
        if file.exists() {
            files.push(file);
        }
        rust_files(&root.join(m), &mut files);
        let arrows = g.entry(m.clone()).or_default();
        for f in files {
            let rel = f.strip_prefix(&root).expect("under src/").to_path_buf();
            if is_test_path(&rel) {
                continue;
            }
            let text = std::fs::read_to_string(&f).expect("a source file");
            for to in crate_refs(&product_code(&text)) {
                if &to != m && mods.contains(&to) {
                    arrows.entry(to).or_insert_with(|| rel.clone());
                }
            }
        }
    }
    g
}

/// Tarjan's strongly connected components.
fn components(g: &BTreeMap<String, BTreeMap<String, PathBuf>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeMap<String, PathBuf>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        let g = t.g;
        for w in g[v].keys() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut c = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                c.push(w.to_string());
                if w == v {
                    break;
                }
            }
            c.sort();
            t.out.push(c);
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn lib_rs() -> String {
    std::fs::read_to_string(src().join("lib.rs")).expect("src/lib.rs")
}

#[test]
fn the_top_level_modules_import_each_other_in_no_cycle() {
    let mods = modules(&lib_rs());
    assert!(
        mods.len() > 10,
        "src/lib.rs's mod lines not found: {mods:?}"
    );
    let g = graph(&mods);
    let cycles: Vec<String> = components(&g)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| {
            let arrows: Vec<String> = c
                .iter()
                .flat_map(|a| {
                    g[a].iter()
                        .filter(|(b, _)| c.contains(b))
                        .map(move |(b, f)| format!("{a} -> {b} ({})", f.display()))
                })
                .collect();
            format!("{c:?}: {}", arrows.join(", "))
        })
        .collect();
    assert!(
        cycles.is_empty(),
        "import cycles among the top-level modules:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn every_import_runs_down_the_layers_the_crate_docs_list() {
    let lib = lib_rs();
    let mods = modules(&lib);
    let layers = layers(&lib);
    let mut layer_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, layer) in layers.iter().enumerate() {
        for m in layer {
            assert!(
                layer_of.insert(m, i).is_none(),
                "`{m}` is listed twice in lib.rs's layers"
            );
        }
    }
    let unlisted: Vec<&String> = mods
        .iter()
        .filter(|m| !layer_of.contains_key(m.as_str()))
        .collect();
    assert!(
        unlisted.is_empty(),
        "top-level modules missing from lib.rs's # Layers: {unlisted:?}"
    );
    let stale: Vec<&&str> = layer_of
        .keys()
        .filter(|m| !mods.iter().any(|x| x == **m))
        .collect();
    assert!(
        stale.is_empty(),
        "lib.rs's # Layers names no module: {stale:?}"
    );
    let mut up = Vec::new();
    for (a, arrows) in graph(&mods) {
        for (b, file) in arrows {
            // Layers are listed top first: an import must go to a later (lower) line.
            if layer_of[b.as_str()] <= layer_of[a.as_str()] {
                up.push(format!("{a} -> {b} ({})", file.display()));
            }
        }
    }
    assert!(
        up.is_empty(),
        "imports that run up or across lib.rs's # Layers:\n{}",
        up.join("\n")
    );
}

#[test]
fn the_reference_reader_sees_paths_and_groups() {
    let code = product_code(
        "use crate::a::b;\nuse crate::{c, d::{e, f}, g};\n// crate::h\nlet x = $crate::i::j;\n\
         mycrate::k;\n#[cfg(test)]\nuse crate::l;",
    );
    let got: Vec<String> = crate_refs(&code).into_iter().collect();
    assert_eq!(got, ["a", "c", "d", "g", "i"]);
    assert!(is_test_path(Path::new("settings/load_tests/fuzz.rs")));
    assert!(is_test_path(Path::new("logs/line_file_tests.rs")));
    assert!(is_test_path(Path::new("reload/tests.rs")));
    assert!(!is_test_path(Path::new("proxy/front.rs")));
}
