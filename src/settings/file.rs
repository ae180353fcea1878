//! The `config.json` layer: finds a setting by its dotted path, checks that the objects holding
//! settings are objects, and warns about keys under `server.cluster` and `server.memory` that
//! fhircluster doesn't know (a misspelt `workerz` would otherwise silently mean the default),
//! and about a key beside those sections that is likely one of them misspelt (`server.clustr`).
//!
//! The rest of the file (FHIRsmith's own modules and settings) is FHIRsmith's business and is not
//! checked here. A `null` value counts as not set, so the template can show optional settings.

use std::path::Path;

use serde_json::Value;

use super::error::{SettingsError, Source};
use super::table::keys_under;
use super::value::{Raw, RawValue};
use super::TABLE;

/// The sections whose every key is fhircluster's: a key the table doesn't know there is a
/// warning. (Beside the rest, `modules.tx` and `stats`, FHIRsmith keeps settings of its own.)
const OWN_SECTIONS: &[&str] = &["server.cluster", "server.memory"];

/// The objects on the way to a setting (`server`, `server.cluster` ...): each must be an
/// object when present.
fn objects() -> Vec<&'static str> {
    let mut objects: Vec<&'static str> = TABLE
        .iter()
        .flat_map(|s| {
            let path = s.path;
            path.match_indices('.').map(move |(i, _)| &path[..i])
        })
        .collect();
    objects.sort_unstable();
    objects.dedup();
    objects
}

/// The parsed `config.json` and where it was read from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConfigFile<'a> {
    pub path: &'a Path,
    pub json: &'a Value,
}

impl<'a> ConfigFile<'a> {
    /// Checks the shape and returns one warning line per unknown key under `server.cluster` and
    /// `server.memory`.
    pub fn check(&self) -> Result<Vec<String>, SettingsError> {
        if !self.json.is_object() {
            return Err(SettingsError::invalid(
                "config.json",
                kind(self.json),
                Some(self.from()),
                "must be a JSON object",
            ));
        }
        for path in objects() {
            if let Some(v) = self.get(path) {
                if !v.is_object() {
                    return Err(self.raw(path, v).invalid("must be an object"));
                }
            }
        }
        let mut warnings = self.misspelt_sections();
        for &section in OWN_SECTIONS {
            let known: Vec<&str> = keys_under(section).collect();
            if let Some(Value::Object(map)) = self.get(section) {
                for key in map.keys().filter(|k| !known.contains(&k.as_str())) {
                    warnings.push(unknown_key_warning(self.path, section, key, &known));
                }
            }
        }
        Ok(warnings)
    }

    /// One warning line per key beside one of fhircluster's own sections that is likely a
    /// misspelling of it (`server.clustr`): every setting in it would go unread. Other keys
    /// there are FHIRsmith's (`server.port`, `server.trustProxy` ...), so only a near miss is
    /// named.
    fn misspelt_sections(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        for &section in OWN_SECTIONS {
            let Some((parent, name)) = section.rsplit_once('.') else {
                continue;
            };
            let known = |key: &str| {
                TABLE.iter().any(|s| {
                    s.path
                        .strip_prefix(parent)
                        .and_then(|p| p.strip_prefix('.'))
                        .and_then(|p| p.split('.').next())
                        == Some(key)
                })
            };
            if let Some(Value::Object(map)) = self.get(parent) {
                for key in map.keys().filter(|k| !known(k) && close(name, k)) {
                    warnings.push(format!(
                        "{}: unknown section {parent}.{key} is ignored, and every setting in it \
                         (did you mean {section}?)",
                        self.path.display()
                    ));
                }
            }
        }
        warnings
    }

    /// The value at a dotted path; `None` when absent or `null`.
    pub fn get(&self, path: &str) -> Option<&'a Value> {
        let mut v = self.json;
        for part in path.split('.') {
            v = v.as_object()?.get(part)?;
        }
        (!v.is_null()).then_some(v)
    }

    /// The setting at `path` as a raw value, when the file sets it.
    pub fn setting(&self, path: &'static str) -> Option<Raw<'a>> {
        self.get(path).map(|v| self.raw(path, v))
    }

    pub fn from(&self) -> Source {
        Source::File(self.path.to_path_buf())
    }

    fn raw(&self, path: &'static str, v: &'a Value) -> Raw<'a> {
        Raw {
            path,
            value: RawValue::Json(v),
            from: self.from(),
        }
    }
}

/// A JSON value's type in words, for a file that isn't an object.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn unknown_key_warning(file: &Path, section: &str, key: &str, known: &[&str]) -> String {
    let mut line = format!(
        "{}: unknown setting {section}.{key} is ignored",
        file.display()
    );
    if let Some(near) = known.iter().find(|k| close(k, key)) {
        line.push_str(&format!(" (did you mean {section}.{near}?)"));
    }
    line
}

/// Whether two keys differ only in case or by at most two edits: the likely typos.
fn close(a: &str, b: &str) -> bool {
    let (a, b): (Vec<char>, Vec<char>) = (
        a.to_lowercase().chars().collect(),
        b.to_lowercase().chars().collect(),
    );
    if a.len().abs_diff(b.len()) > 2 {
        return false;
    }
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut row = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            row.push((prev[j] + cost).min(prev[j + 1] + 1).min(row[j] + 1));
        }
        prev = row;
    }
    prev[b.len()] <= 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn file(json: &Value) -> ConfigFile<'_> {
        ConfigFile {
            path: Path::new("/d/config.json"),
            json,
        }
    }

    #[test]
    fn unknown_keys_under_cluster_and_memory_are_warnings_naming_them() {
        // spec: CONF-1
        let j = json!({"server": {
            "cluster": {"workerz": 2, "workers": 1, "colour": "red"},
            "memory": {"rejectfraction": 0.8},
            "trustProxy": true
        }, "modules": {"packages": {}}});
        let w = file(&j).check().unwrap();
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w.iter().any(|l| l.contains("server.cluster.workerz")
            && l.contains("did you mean server.cluster.workers?")));
        assert!(w
            .iter()
            .any(|l| l.contains("server.cluster.colour") && !l.contains("did you")));
        assert!(w.iter().any(|l| l.contains("server.memory.rejectfraction")
            && l.contains("server.memory.rejectFraction")));
        assert!(w.iter().all(|l| l.starts_with("/d/config.json: ")));
    }

    #[test]
    fn a_misspelt_section_is_a_warning_naming_the_section_meant() {
        let j = json!({"server": {"Cluster": {"workers": 2}, "memroy": {}, "port": 3000,
            "cluster": {}, "trustProxy": true, "clusterName": "x"}});
        let w = file(&j).check().unwrap();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("server.Cluster") && w[0].contains("did you mean server.cluster?"));
        assert!(w[1].contains("server.memroy") && w[1].contains("did you mean server.memory?"));
    }

    #[test]
    fn a_section_that_is_not_an_object_is_an_error_naming_it() {
        let j = json!({"server": {"cluster": [1]}});
        let e = file(&j).check().unwrap_err();
        assert!(e.to_string().starts_with("server.cluster = [1]"), "{e}");
        let j = json!([1]);
        assert_eq!(file(&j).check().unwrap_err().setting(), "config.json");
    }

    #[test]
    fn null_counts_as_not_set() {
        let j = json!({"server": {"cluster": {"workers": null, "cores": 4}}});
        assert!(file(&j).get("server.cluster.workers").is_none());
        assert_eq!(file(&j).get("server.cluster.cores"), Some(&json!(4)));
        assert!(file(&j).get("server.memory.trimAllocator").is_none());
    }
}
