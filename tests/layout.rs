//! The test suite's own layout: every file in `tests/` is a module of the one integration
//! binary. Cargo.toml turns `autotests` off, so a file `tests/integration.rs` doesn't name would
//! be built and run by nothing, silently. No compiler lint sees this: an unnamed file under
//! `tests/` is not compiled at all, so nothing but a look at the folder can say it is there.

use std::path::Path;

#[test]
fn every_test_file_is_a_module_of_the_integration_binary() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let root = std::fs::read_to_string(dir.join("integration.rs")).expect("tests/integration.rs");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("tests/") {
        let path = entry.expect("an entry of tests/").path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(module) = name.strip_suffix(".rs") else {
            continue;
        };
        if module != "integration" && !root.lines().any(|l| l == format!("mod {module};")) {
            missing.push(name.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "not declared in tests/integration.rs, so never built: {missing:?}"
    );
}
