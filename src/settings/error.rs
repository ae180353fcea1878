//! The one error a bad configuration produces: a single line that names the setting, the value
//! and what is allowed, so the operator can fix it without reading code. The caller prints it and
//! exits 1 (DEC-12); nothing here exits.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use super::jsonc::ConfigFileError;

/// Where a value came from, so the message can say which of the four layers (DEC-13) to fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A command-line flag, e.g. `--workers`.
    Flag(&'static str),
    /// An environment variable, e.g. `FHIRSMITH_WORKERS`.
    Env(&'static str),
    /// The `config.json` read.
    File(PathBuf),
    /// The arguments after `--` (node flags).
    NodeArgs,
    /// No layer gave it: the spec's default (or fhircluster's, for its own settings).
    Default,
}

impl Source {
    /// What set `setting`, as a message names it: `--workers`, `environment FHIRSMITH_WORKERS`,
    /// `server.cluster.workers in /d/config.json`, `the default`.
    pub fn setter(&self, setting: &str) -> String {
        match self {
            Source::Flag(flag) => flag.to_string(),
            Source::Env(var) => format!("environment {var}"),
            Source::File(path) => format!("{setting} in {}", path.display()),
            Source::NodeArgs => "the node flags after --".to_string(),
            Source::Default => "the default".to_string(),
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Flag(flag) => write!(f, "from {flag}"),
            Source::Env(var) => write!(f, "from environment {var}"),
            Source::File(path) => write!(f, "from {}", path.display()),
            Source::NodeArgs => f.write_str("after --"),
            Source::Default => f.write_str("the default"),
        }
    }
}

/// Which layer gave each setting (DEC-13), by its path: what a message names as the setting's
/// source. A setting no layer gave is at its default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sources(BTreeMap<String, Source>);

impl Sources {
    pub(crate) fn set(&mut self, setting: &str, from: Source) {
        self.0.insert(setting.to_string(), from);
    }

    /// Where `setting`'s value came from.
    pub fn of(&self, setting: &str) -> Source {
        self.0.get(setting).cloned().unwrap_or(Source::Default)
    }

    /// `setting`'s value as a message shows it, with its source:
    /// `server.port 3003 (from environment PORT)`, `server.port 3000 (the default)`.
    pub fn shown(&self, setting: &str, value: impl fmt::Display) -> String {
        format!("{setting} {value} ({})", self.of(setting))
    }
}

/// A configuration the launcher refuses to start with.
#[derive(Clone, Debug, PartialEq)]
pub enum SettingsError {
    /// A setting whose value is not allowed: wrong type, out of range, unknown name, or in
    /// conflict with another setting (then `expected` names the other one).
    Invalid {
        /// The setting's path, e.g. `server.cluster.workers`.
        setting: String,
        /// The value as given, rendered as JSON (strings quoted).
        value: String,
        /// The layer it came from, when one layer is to blame.
        from: Option<Source>,
        /// What is allowed instead, as a phrase: `must be a whole number, 0 or more`.
        expected: String,
    },
    /// `config.json` could not be read, or is not JSON (with comments).
    ConfigFile(ConfigFileError),
}

impl SettingsError {
    /// The setting the error is about (`config.json` for a file that can't be read).
    #[cfg(test)]
    pub fn setting(&self) -> &str {
        match self {
            SettingsError::Invalid { setting, .. } => setting,
            SettingsError::ConfigFile(_) => "config.json",
        }
    }

    pub(crate) fn invalid(
        setting: impl Into<String>,
        value: impl Into<String>,
        from: Option<Source>,
        expected: impl Into<String>,
    ) -> SettingsError {
        SettingsError::Invalid {
            setting: setting.into(),
            value: value.into(),
            from,
            expected: expected.into(),
        }
    }
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettingsError::Invalid {
                setting,
                value,
                from,
                expected,
            } => {
                write!(f, "{setting} = {value}")?;
                if let Some(from) = from {
                    write!(f, " ({from})")?;
                }
                write!(f, ": {expected}")
            }
            SettingsError::ConfigFile(e) => write!(f, "config.json: {e}"),
        }
    }
}

impl std::error::Error for SettingsError {}

impl From<ConfigFileError> for SettingsError {
    fn from(e: ConfigFileError) -> Self {
        SettingsError::ConfigFile(e)
    }
}

/// Renders a text value the way JSON would, so `"two"` and `4.5` read alike from any layer.
pub(crate) fn quote(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_value_is_one_line_naming_setting_value_source_and_what_is_allowed() {
        let e = SettingsError::invalid(
            "server.cluster.workers",
            quote("two"),
            Some(Source::Flag("--workers")),
            "must be a whole number, 0 or more",
        );
        assert_eq!(
            e.to_string(),
            "server.cluster.workers = \"two\" (from --workers): must be a whole number, 0 or more"
        );
        assert_eq!(e.setting(), "server.cluster.workers");
    }

    #[test]
    fn a_file_error_names_config_json_line_and_column() {
        let e = SettingsError::from(ConfigFileError {
            path: PathBuf::from("/d/config.json"),
            line: 3,
            column: 8,
            message: "expected value".to_string(),
        });
        assert_eq!(
            e.to_string(),
            "config.json: /d/config.json:3:8: expected value"
        );
        assert!(!e.to_string().contains('\n'));
    }
}
