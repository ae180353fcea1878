//! `load` with a real data directory, comments in config.json, and the template.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;
use crate::settings::jsonc;

#[test]
fn comments_in_config_json_are_read_through() {
    let text = "{\n // the port\n \"server\": { /* cluster */ \"cluster\": { \"workers\": 2 } }\n}";
    let json = jsonc::parse(Path::new(FILE), text).unwrap();
    let s = from_sources(&cli(&[]), &env_of(&[]), Some((Path::new(FILE), &json))).unwrap();
    assert_eq!(s.cluster.workers, Some(2));
}

#[test]
fn the_template_loads_to_the_defaults() {
    let path = Path::new("config-template.json");
    let json = jsonc::parse(path, include_str!("../../../config-template.json")).unwrap();
    let s = from_sources(
        &cli(&["--data-dir", "/x"]),
        &env_of(&[]),
        Some((path, &json)),
    )
    .unwrap();
    assert_eq!(s.warnings, Vec::<String>::new());
    // The template lists an endpoint to copy: there is no default one (FHIRsmith has none).
    assert_eq!(s.tx.endpoints, vec!["/r4"]);
    let mut defaults = Settings::default();
    defaults.tx.endpoints = s.tx.endpoints.clone();
    assert_eq!(
        Settings {
            data_dir: PathBuf::from("."),
            sources: Sources::default(),
            servers_config: 0,
            ..s
        },
        defaults
    );
}

#[test]
fn load_reads_config_json_from_the_data_dir() {
    // spec: LAUNCH-1
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    // Flags outrank whatever this process's environment holds.
    // A server that is not node's: config.json may have comments (fhircluster reads them).
    let args = [
        "--data-dir",
        d,
        "--port",
        "4000",
        "--workers",
        "1",
        "--command",
        "python3 s.py",
    ];
    let s = load(&cli(&args)).unwrap();
    assert_eq!(
        (s.data_dir.as_path(), s.cluster.drain),
        (dir.path(), Duration::from_secs(30))
    );
    std::fs::write(
        dir.path().join("config.json"),
        "{ // c\n \"server\": {\"cluster\": {\"drainSeconds\": 5}}}",
    )
    .unwrap();
    assert_eq!(
        load(&cli(&args)).unwrap().cluster.drain,
        Duration::from_secs(5)
    );
    std::fs::write(dir.path().join("config.json"), "{\n \"server\": ,\n}").unwrap();
    let e = load(&cli(&args)).unwrap_err();
    assert_eq!(e.setting(), "config.json");
    assert!(e.to_string().contains("config.json:2:"), "{e}");
}

#[test]
fn a_commented_config_json_for_node_servers_is_refused_at_its_first_comment() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let file = "{\n \"server\": {\"port\": 4000}, /* the port */\n \"x\": 1 // more\n}";
    std::fs::write(dir.path().join("config.json"), file).unwrap();
    for command in ["node server.js", "/usr/bin/nodejs server.js"] {
        let e = load(&cli(&["--data-dir", d, "--command", command])).unwrap_err();
        assert_eq!(e.setting(), "config.json");
        let text = e.to_string();
        assert!(text.contains("config.json:2:28: a comment"), "{text}");
        assert!(text.contains("JSON.parse"), "{text}");
    }
    assert!(load(&cli(&["--data-dir", d, "--command", "python3 s.py"])).is_ok());
}

#[test]
fn a_data_directory_without_config_json_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let s = load(&cli(&["--data-dir", d])).unwrap();
    let file = dir.path().join("config.json").display().to_string();
    assert!(
        s.warnings
            .iter()
            .any(|w| w.starts_with(&file) && w.contains("no such file")),
        "{:?}",
        s.warnings
    );
}

#[test]
fn a_missing_data_dir_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("nope");
    let e = load(&cli(&["--data-dir", gone.to_str().unwrap()])).unwrap_err();
    assert_eq!(e.setting(), "data directory");
    assert!(
        e.to_string().contains("nope") && e.to_string().contains("does not exist"),
        "{e}"
    );
    let file = dir.path().join("f");
    std::fs::write(&file, "").unwrap();
    let e = load(&cli(&["--data-dir", file.to_str().unwrap()])).unwrap_err();
    assert!(e.to_string().contains("not a directory"), "{e}");
}
