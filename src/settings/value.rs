//! One setting's raw value, from whichever layer gave it (a flag or environment variable as text,
//! `config.json` as JSON), turned into its type. Every failure names the setting, the value, the
//! layer and what is allowed, so a `--workers=two` is our one-line error, not a clap exit.
//!
//! Text (flags, environment) and JSON follow the same rules, except that JSON types are strict:
//! `"port": "3000"` is refused, since the file says what it means.

use std::time::Duration;

use serde_json::Value;

use super::bounds::{MAX_SECONDS, MAX_SECONDS_WORDS};
use super::error::{quote, SettingsError, Source};

/// A value as one layer gave it.
#[derive(Clone, Debug)]
pub(crate) enum RawValue<'a> {
    Text(String),
    Json(&'a Value),
}

/// A raw value with the setting it is for and where it came from.
#[derive(Clone, Debug)]
pub(crate) struct Raw<'a> {
    pub path: &'static str,
    pub value: RawValue<'a>,
    pub from: Source,
}

impl Raw<'_> {
    /// The error for this value: `expected` says what is allowed.
    pub fn invalid(&self, expected: impl Into<String>) -> SettingsError {
        let shown = match &self.value {
            RawValue::Text(t) => quote(t),
            RawValue::Json(v) => v.to_string(),
        };
        SettingsError::invalid(self.path, shown, Some(self.from.clone()), expected)
    }

    /// A number: JSON numbers, or text that parses as a finite decimal.
    fn number(&self, expected: &str) -> Result<f64, SettingsError> {
        let n = match &self.value {
            RawValue::Text(t) => t.trim().parse::<f64>().ok(),
            RawValue::Json(v) => v.as_f64(),
        };
        n.filter(|n| n.is_finite())
            .ok_or_else(|| self.invalid(expected))
    }

    /// A whole number in `min..=max` (the bound is the table's, from `bounds.rs`). JSON `4.0` is whole (JSON
    /// has one number type); `4.5`, `-1` and `"x"` are not (CONF-5).
    pub fn whole(&self, min: u64, max: u64) -> Result<u64, SettingsError> {
        let expected = format!("must be a whole number from {min} to {max}");
        let n = match &self.value {
            RawValue::Text(t) => {
                let t = t.trim();
                if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                    None
                } else {
                    t.parse::<u64>().ok()
                }
            }
            RawValue::Json(v) => v.as_u64().or_else(|| {
                v.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < u64::MAX as f64)
                    .map(|f| f as u64)
            }),
        };
        n.filter(|n| (min..=max).contains(n))
            .ok_or_else(|| self.invalid(expected))
    }

    /// A TCP port, 1..=65535.
    pub fn port(&self) -> Result<u16, SettingsError> {
        let n = self.whole(1, 65535)?;
        u16::try_from(n).map_err(|_| self.invalid("must be a whole number from 1 to 65535"))
    }

    /// Seconds, fractions allowed (`0.5`), stored as a `Duration`, at most a year
    /// (`MAX_SECONDS`). `positive`: 0 refused (CONF-24); otherwise 0 is allowed and keeps the
    /// spec's meaning for that setting.
    pub fn seconds(&self, positive: bool) -> Result<Duration, SettingsError> {
        let expected = if positive {
            format!("must be a number of seconds above 0 and at most {MAX_SECONDS_WORDS}")
        } else {
            format!("must be a number of seconds from 0 to {MAX_SECONDS_WORDS}")
        };
        let n = self.number(&expected)?;
        if n < 0.0 || (positive && n == 0.0) || n > MAX_SECONDS {
            return Err(self.invalid(expected));
        }
        Duration::try_from_secs_f64(n).map_err(|_| self.invalid(expected))
    }

    /// A number from 0 to `max` (DEC-7: negatives refused).
    pub fn non_negative(&self, max: f64) -> Result<f64, SettingsError> {
        let expected = format!("must be a number from 0 to {max}");
        let n = self.number(&expected)?;
        if !(0.0..=max).contains(&n) {
            return Err(self.invalid(expected));
        }
        Ok(n)
    }

    /// A fraction of the memory limit, in (0, 1].
    pub fn fraction(&self) -> Result<f64, SettingsError> {
        let expected = "must be a fraction above 0 and at most 1";
        let n = self.number(expected)?;
        if n <= 0.0 || n > 1.0 {
            return Err(self.invalid(expected));
        }
        Ok(n)
    }

    /// `true` or `false` (text exactly so, JSON a boolean).
    pub fn boolean(&self) -> Result<bool, SettingsError> {
        match &self.value {
            RawValue::Text(t) if t.trim() == "true" => Ok(true),
            RawValue::Text(t) if t.trim() == "false" => Ok(false),
            RawValue::Json(Value::Bool(b)) => Ok(*b),
            _ => Err(self.invalid("must be true or false")),
        }
    }

    pub fn string(&self) -> Result<String, SettingsError> {
        match &self.value {
            RawValue::Text(t) => Ok(t.clone()),
            RawValue::Json(Value::String(s)) => Ok(s.clone()),
            _ => Err(self.invalid("must be a string")),
        }
    }

    /// A list of words: a JSON array of strings, or text split on whitespace
    /// (`--command "node server.js"`).
    pub fn words(&self) -> Result<Vec<String>, SettingsError> {
        let expected = "must be an array of strings: the program, then its arguments";
        match &self.value {
            RawValue::Text(t) => Ok(t.split_whitespace().map(str::to_string).collect()),
            RawValue::Json(Value::Array(items)) => items
                .iter()
                .map(|i| {
                    i.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| self.invalid(expected))
                })
                .collect(),
            _ => Err(self.invalid(expected)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(t: &str) -> Raw<'static> {
        Raw {
            path: "server.cluster.workers",
            value: RawValue::Text(t.to_string()),
            from: Source::Flag("--workers"),
        }
    }

    fn with_json(v: &Value) -> Raw<'_> {
        Raw {
            path: "server.cluster.queueSeconds",
            value: RawValue::Json(v),
            from: Source::File("config.json".into()),
        }
    }

    #[test]
    fn workers_must_be_a_whole_number_from_any_layer() {
        // spec: CONF-5
        assert_eq!(text("4").whole(0, 65535), Ok(4));
        assert_eq!(text("0").whole(0, 65535), Ok(0));
        for bad in [
            "4.5",
            "-1",
            "x",
            "",
            "two",
            "+3",
            "1e3",
            "99999999999",
            "65536",
        ] {
            let e = text(bad).whole(0, 65535).unwrap_err();
            assert!(e.to_string().contains("server.cluster.workers"), "{e}");
            assert!(e.to_string().contains("whole number"), "{e}");
        }
        assert_eq!(with_json(&json!(4.0)).whole(0, 65535), Ok(4));
        for bad in [json!(4.5), json!(-1), json!("4"), json!(true), json!([])] {
            assert!(with_json(&bad).whole(0, 65535).is_err(), "{bad}");
        }
    }

    #[test]
    fn seconds_take_fractions_and_zero_unless_positive_is_required() {
        assert_eq!(
            with_json(&json!(0.5)).seconds(false),
            Ok(Duration::from_millis(500))
        );
        assert_eq!(text("0.25").seconds(false), Ok(Duration::from_millis(250)));
        assert_eq!(with_json(&json!(0)).seconds(false), Ok(Duration::ZERO));
        // spec: CONF-24
        assert!(with_json(&json!(0)).seconds(true).is_err());
        // spec: DEC-7
        let e = with_json(&json!(-1)).seconds(false).unwrap_err();
        assert!(e.to_string().contains("from 0 to 31536000 (a year)"), "{e}");
        // spec: CONF-16 (0 is no timeout); a year is the bound, a hair past it is refused.
        assert_eq!(
            with_json(&json!(31_536_000)).seconds(false),
            Ok(Duration::from_secs(31_536_000))
        );
        for bad in [
            json!(31_536_000.5),
            json!(1e19),
            json!(1e300),
            json!("1"),
            json!(null),
        ] {
            assert!(with_json(&bad).seconds(false).is_err(), "{bad}");
        }
        assert!(text("NaN").seconds(false).is_err());
        assert!(text("inf").seconds(false).is_err());
    }

    #[test]
    fn ports_are_1_to_65535() {
        assert_eq!(text("65535").port(), Ok(65535));
        for bad in ["0", "65536", "x", "-80"] {
            let e = text(bad).port().unwrap_err();
            assert!(e.to_string().contains("from 1 to 65535"), "{e}");
        }
    }

    #[test]
    fn fractions_are_above_0_and_at_most_1() {
        assert_eq!(with_json(&json!(1)).fraction(), Ok(1.0));
        for bad in [json!(0), json!(1.01), json!(-0.5), json!("0.5")] {
            assert!(with_json(&bad).fraction().is_err(), "{bad}");
        }
    }

    #[test]
    fn booleans_are_true_or_false_only() {
        assert_eq!(text("false").boolean(), Ok(false));
        assert_eq!(with_json(&json!(true)).boolean(), Ok(true));
        for bad in ["yes", "0", "False", ""] {
            assert!(text(bad).boolean().is_err(), "{bad}");
        }
        let e = with_json(&json!("yes")).boolean().unwrap_err();
        assert_eq!(
            e.to_string(),
            "server.cluster.queueSeconds = \"yes\" (from config.json): must be true or false"
        );
    }

    #[test]
    fn words_split_text_on_whitespace_and_take_json_string_arrays() {
        assert_eq!(
            text(" node  server.js ").words(),
            Ok(vec!["node".into(), "server.js".into()])
        );
        assert_eq!(
            with_json(&json!(["a", "b"])).words(),
            Ok(vec!["a".into(), "b".into()])
        );
        assert!(with_json(&json!(["a", 1])).words().is_err());
        assert!(with_json(&json!("node server.js")).words().is_err());
    }
}
