//! Builds the one validated `Settings` from four layers, first found wins (DEC-13): a flag, then
//! an environment variable, then `config.json` in the data directory, then the default. It walks
//! the table (`table.rs`) in order, so a setting's flag, variable, reader and default are its
//! row's, and what each setting was taken from is noted as it is read (`Settings.sources`).
//!
//! `from_sources` is the whole of it with every input passed in (no process environment, no
//! files), so each setting's behaviour is tested beside it; `load` only gathers the real inputs.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::error::{quote, SettingsError, Source};
use super::file::ConfigFile;
use super::host_prefix;
use super::node_flags::check_node_flags;
use super::setting::{key, Setting};
use super::validate::{unset_endpoints_warning, validate};
use super::value::{Raw, RawValue};
use super::{jsonc, paths, Settings, TABLE};
use crate::cli::Cli;

const DATA_DIR_ENV: &str = "FHIRSMITH_DATA_DIR";

/// The four layers, asked for one setting at a time.
struct Layers<'a> {
    cli: &'a Cli,
    env: &'a dyn Fn(&str) -> Option<String>,
    file: Option<ConfigFile<'a>>,
}

impl<'a> Layers<'a> {
    /// The setting's raw value from the first layer that has it; `None`: the default applies.
    fn first(&self, setting: &Setting) -> Option<Raw<'a>> {
        let path = setting.path;
        let text = |value: String, from: Source| Raw {
            path,
            value: RawValue::Text(value),
            from,
        };
        if let Some(flag) = &setting.flag {
            if let Some(value) = (flag.get)(self.cli) {
                return Some(text(value.clone(), Source::Flag(flag.name)));
            }
        }
        // An empty variable counts as unset, as `process.env.PORT || ...` does.
        if let Some(var) = setting.env {
            if let Some(value) = (self.env)(var).filter(|v| !v.is_empty()) {
                return Some(text(value, Source::Env(var)));
            }
        }
        self.file.and_then(|f| f.setting(path))
    }
}

/// The data directory and the layer that gave it: `--data-dir`, `FHIRSMITH_DATA_DIR`, else the
/// current directory (`None`).
pub fn data_dir(cli: &Cli, env: &dyn Fn(&str) -> Option<String>) -> (PathBuf, Option<Source>) {
    if let Some(dir) = &cli.data_dir {
        return (dir.clone(), Some(Source::Flag("--data-dir")));
    }
    match env(DATA_DIR_ENV).filter(|d| !d.is_empty()) {
        Some(dir) => (PathBuf::from(dir), Some(Source::Env(DATA_DIR_ENV))),
        None => (PathBuf::from("."), None),
    }
}

/// Every setting from explicit inputs: the flags, an environment lookup, and `config.json`'s path
/// and parsed content (`None`: there is none, so defaults). Reads nothing else.
pub fn from_sources(
    cli: &Cli,
    env: &dyn Fn(&str) -> Option<String>,
    config: Option<(&Path, &Value)>,
) -> Result<Settings, SettingsError> {
    let file = config.map(|(path, json)| ConfigFile { path, json });
    let layers = Layers { cli, env, file };
    let mut s = Settings {
        data_dir: data_dir(cli, env).0,
        node_flags: check_node_flags(&cli.node_flags)?,
        ..Settings::default()
    };
    if let Some(f) = &file {
        s.warnings = f.check()?;
        s.servers_config = servers_config(f.json);
    }
    for setting in TABLE {
        match layers.first(setting) {
            Some(raw) => {
                s.sources.set(setting.path, raw.from.clone());
                (setting.read)(&raw, &mut s)?;
            }
            None => (setting.otherwise)(&mut s)?,
        }
    }
    host_prefix::apply(&mut s, env)?;
    validate(&s)?;
    s.warnings.extend(unset_endpoints_warning(&s));
    if !s.cluster.master_serves_tx && s.cluster.workers == Some(0) {
        s.warnings.push(format!(
            "{} and {}: no process takes tx requests",
            s.sources.shown(paths::cluster::master_serves_tx, "false"),
            s.sources.shown(paths::cluster::workers, 0),
        ));
    }
    Ok(s)
}

/// Reads the real environment and `<data dir>/config.json` (none: all defaults), then
/// [`from_sources`]. A data directory given but missing is an error naming it.
pub fn load(cli: &Cli) -> Result<Settings, SettingsError> {
    // HOSTNAME is a shell's variable, not always exported (a systemd service has none): the
    // system's host name stands in for it.
    let env = |key: &str| {
        std::env::var_os(key)
            .map(|v| v.to_string_lossy().into_owned())
            .or_else(|| {
                (key == host_prefix::HOSTNAME)
                    .then(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
                    .flatten()
                    .map(|h| h.trim().to_string())
            })
    };
    let (dir, from) = data_dir(cli, &env);
    if from.is_some() && !dir.is_dir() {
        let why = if dir.exists() {
            "is not a directory"
        } else {
            "does not exist"
        };
        return Err(SettingsError::invalid(
            "data directory",
            quote(&dir.display().to_string()),
            from,
            format!("{why}: give an existing data directory"),
        ));
    }
    let text = jsonc::read_text(&dir)?;
    let path = dir.join("config.json");
    let mut s = from_sources(cli, &env, text.as_ref().map(|c| (path.as_path(), &c.json)))?;
    match text.as_ref().map(|c| c.first_comment) {
        Some(Some(at)) => refuse_comments_for_node(&path, at, &s.command)?,
        Some(None) => {}
        None => s.warnings.push(format!(
            "{}: no such file: the defaults, the flags and environment apply",
            path.display()
        )),
    }
    s.node_preload = s
        .cluster
        .node_report
        .then(|| crate::node_report::path().to_path_buf());
    s.node_options = env("NODE_OPTIONS");
    Ok(s)
}

/// The keys of `server.cluster` the processes read themselves, as the spec's Options say:
/// the shared cache (its file and its cap, which each process logs as it starts) and the shared
/// closure tables. The rest of `server.cluster` is the launcher's alone.
const READ_BY_THE_PROCESSES: &[&str] = &[
    key(paths::cluster::shared_cache),
    key(paths::cluster::shared_cache_max_mb),
    key(paths::cluster::shared_closure),
];

/// What the processes read of config.json beyond fhircluster's own settings, as a digest: the
/// whole file (a FHIRsmith server reads all of it) but fhircluster's own `server.cluster` keys
/// (every one a row of the table; the launcher tells the processes what they need of them:
/// their role, code, port and address), those in [`READ_BY_THE_PROCESSES`] kept. Comments and
/// spacing are not read by anyone as a value, so they count for nothing.
pub(crate) fn servers_config(json: &Value) -> u64 {
    let mut theirs = json.clone();
    if let Some(cluster) = theirs
        .get_mut("server")
        .and_then(|s| s.get_mut("cluster"))
        .and_then(Value::as_object_mut)
    {
        cluster.retain(|k, _| READ_BY_THE_PROCESSES.contains(&k.as_str()));
    }
    crate::digest::Digest::default().json(&theirs).finish()
}

/// fhircluster reads comments in `config.json`, but a Node server reading the same file with
/// `JSON.parse` (FHIRsmith's `server.js` does) stops at the first one: refused, naming it, when
/// the servers are node's, so neither `--check` nor a start says "ok" to a file every process
/// would refuse. Another server (any HTTP server's own reader) may have them.
fn refuse_comments_for_node(
    path: &Path,
    (line, column): (usize, usize),
    command: &[String],
) -> Result<(), jsonc::ConfigFileError> {
    let program = command
        .first()
        .map(Path::new)
        .and_then(Path::file_name)
        .and_then(|p| p.to_str());
    if !matches!(program, Some("node" | "nodejs")) {
        return Ok(());
    }
    Err(jsonc::ConfigFileError {
        path: path.to_path_buf(),
        line,
        column,
        message: "a comment: the servers are node's, and FHIRsmith's server.js reads config.json \
                  with JSON.parse, which stops at the first comment, so none would start; remove \
                  the comments (fhircluster reads them, node does not)"
            .to_string(),
    })
}

#[cfg(test)]
#[path = "load_tests/mod.rs"]
mod tests;
