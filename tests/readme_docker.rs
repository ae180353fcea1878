//! README's requirements and its Dockerfile, held to what they describe: the launcher built here
//! asks for no glibc newer than the floor README names (so the distributions it lists run it),
//! and the Dockerfile builds the launcher in a stage of its own on a glibc base and copies it into
//! the image that runs it, started as the Compose file starts it.

use crate::common;

use common::*;

/// The highest minor version `N` of the `GLIBC_2.N` symbol versions an ELF file asks for (the
/// names its dynamic version needs carry), or `None` when it names none.
fn highest_glibc_minor(elf: &[u8]) -> Option<u32> {
    const TAG: &[u8] = b"GLIBC_2.";
    let mut highest = None;
    let mut at = 0;
    while let Some(i) = elf[at..].windows(TAG.len()).position(|w| w == TAG) {
        let digits: Vec<u8> = elf[at + i + TAG.len()..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .copied()
            .collect();
        if let Some(n) = std::str::from_utf8(&digits)
            .ok()
            .and_then(|d| d.parse().ok())
        {
            highest = highest.max(Some(n));
        }
        at += i + TAG.len();
    }
    highest
}

/// The glibc floor README's requirements give: `**glibc 2.N or later**`'s `N`.
fn readme_glibc_floor(readme: &str) -> u32 {
    readme
        .split("**glibc 2.")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("README's requirements name no \"**glibc 2.N or later**\""))
}

#[test]
fn the_glibc_tag_reader_takes_the_highest_version_named() {
    let elf = b"\0GLIBC_2.2.5\0GLIBC_2.34\0GLIBC_2.17\0GLIBC_PRIVATE\0";
    assert_eq!(highest_glibc_minor(elf), Some(34));
    assert_eq!(highest_glibc_minor(b"\0libc.so.6\0"), None);
}

#[test]
fn readme_glibc_floor_is_no_lower_than_what_the_launcher_asks_for() {
    let floor = readme_glibc_floor(&crate_file("README.md"));
    let elf = std::fs::read(LAUNCHER).expect("reading the launcher");
    let asked = highest_glibc_minor(&elf).expect("the launcher names no GLIBC_2.N version");
    assert!(
        asked <= floor,
        "the launcher asks for GLIBC_2.{asked}; README says glibc 2.{floor} or later runs it"
    );
}

#[test]
fn readme_dockerfile_builds_the_launcher_on_glibc_and_copies_it_into_the_image() {
    let readme = crate_file("README.md");
    let dockerfile = fenced_block(&readme, "README.md", "dockerfile", "Dockerfile");
    let froms: Vec<&str> = dockerfile
        .lines()
        .filter_map(|l| l.trim().strip_prefix("FROM "))
        .collect();
    assert!(
        froms.len() >= 2,
        "a build stage and a runtime stage:\n{dockerfile}"
    );
    for from in &froms {
        let image = from.to_ascii_lowercase();
        assert!(
            !image.contains("alpine") && !image.contains("musl"),
            "a musl base cannot run the launcher: {from}"
        );
    }
    let stage = froms[0]
        .split_once(" AS ")
        .map(|(_, name)| name.trim())
        .unwrap_or_else(|| panic!("the first stage has no name: {}", froms[0]));
    assert!(
        dockerfile.contains("cargo build") && dockerfile.contains("--bin fhircluster"),
        "the build stage builds the launcher:\n{dockerfile}"
    );
    let copied = dockerfile.lines().any(|l| {
        l.trim().starts_with(&format!("COPY --from={stage} "))
            && l.split_whitespace()
                .nth(2)
                .is_some_and(|src| src.ends_with("/fhircluster"))
    });
    assert!(
        copied,
        "the launcher copied from stage {stage}:\n{dockerfile}"
    );
    let cmd = dockerfile
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("CMD "))
        .unwrap_or_else(|| panic!("no CMD:\n{dockerfile}"));
    assert!(
        cmd.starts_with("[\"fhircluster\""),
        "exec form, no shell: {cmd}"
    );
    let compose = fenced_block(&readme, "README.md", "yaml", "compose.yaml");
    assert!(
        compose.contains(&format!("command: {cmd}")),
        "the image starts the launcher as the Compose file does ({cmd}):\n{compose}"
    );
}
