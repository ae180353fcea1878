//! The product's own source, read by the tests that hold the code to its rules (`layers`,
//! `setting_names`): its Rust files, and which of them are test code.

use std::path::{Path, PathBuf};

/// Whether `rel` (a path under `src/`) is test code: a `tests` module's file, a `*_tests.rs`
/// beside its code, proptests or test support.
pub fn is_test_path(rel: &Path) -> bool {
    rel.with_extension("").components().any(|c| {
        let c = c.as_os_str().to_string_lossy();
        c == "tests" || c.ends_with("_tests") || c == "proptests" || c == "test_support"
    })
}

/// Every `.rs` file under `dir`, into `out`.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let p = e.expect("an entry of src/").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}
