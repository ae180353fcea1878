//! What the table (`table.rs`) says of one setting, and the macro that writes the table.
//!
//! A row names the setting's place in `Settings`, its path in config.json, its default, its
//! kind of value (which also reads it, so the bound a message, the docs and the tests name is
//! the bound the reader applies), what a reload does with a change (`Reload`), and the flag and
//! environment variable that may also give it. From the rows the macro writes
//! `Settings::default()` — a struct literal with every field, so a field without a row does not
//! compile — and `TABLE`, which the loader, the unknown-key warnings, the reload and the docs'
//! checks walk.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

#[cfg(test)]
use super::bounds::{MAX_MINUTES, MAX_SECONDS};
use super::error::SettingsError;
use super::value::Raw;
use super::{AccessLogFormat, LogFormat, LogLevel, Settings};
use crate::cli::Cli;

/// What a reload (`SIGHUP`) does with a changed setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reload {
    /// Applied at once by the running launcher (`reload::Live` carries it to its part).
    Live,
    /// Read by the processes as they start (the command, config.json outside `server.cluster`,
    /// the launcher's `hello`): the reload restarts in turn each process whose inputs changed
    /// (`supervisor::inputs`), and the launcher's own use of it follows at once.
    Servers,
    /// Set up once by the launcher (its ports, addresses, runtime, routes, log format ...): the
    /// reload takes it by an in-place upgrade to the same binary, the pid and the processes
    /// kept.
    Upgrade,
    /// Says where the processes run or what they are called: the in-place upgrade refuses a
    /// change (the processes it keeps run where they were started), so it waits for a restart
    /// of the launcher, kept as it was until then.
    Restart,
}

/// The kind of value a setting takes, as the row's reader reads it: what the tests and the docs'
/// checks know of what is allowed (the macro makes both from the row's one `kind` token).
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Kind {
    /// A whole number in `min..=max`.
    Whole {
        min: u64,
        max: u64,
    },
    /// A TCP port, 1-65535.
    Port,
    /// Seconds, fractions allowed, at most a year; `positive`: 0 refused.
    Seconds {
        positive: bool,
    },
    /// A number from 0 to `max`, fractions allowed.
    Number {
        max: f64,
    },
    /// `stats.intervalMinutes`: minutes, fractions allowed, at most a year; 0 is the default.
    Minutes,
    /// A fraction above 0, at most 1.
    Fraction,
    Bool,
    Text,
    /// A program and its arguments.
    Words,
    /// An IP address.
    Address,
    /// `bindAddress`: an IP address, or a host name that resolves (DEC-40).
    BindAddress,
    /// A list of IP addresses.
    Addresses,
    /// `adminAddress`: a port (on loopback) or `address:port`.
    AdminAddress,
    /// `logFormat`: `text` or `json`.
    LogFormat,
    /// `accessLog`: `off`, `text` or `json`.
    AccessLog,
    /// `logLevel`: a level, or a whole `tracing` filter from `RUST_LOG`.
    LogLevel,
    /// `modules.tx.endpoints`: objects with a `path`.
    Endpoints,
}

#[cfg(test)]
impl Kind {
    /// Whether the setting is a number (or may be given as one).
    pub fn numeric(self) -> bool {
        matches!(
            self,
            Kind::Whole { .. }
                | Kind::Port
                | Kind::Seconds { .. }
                | Kind::Number { .. }
                | Kind::Minutes
                | Kind::Fraction
                | Kind::AdminAddress
        )
    }

    /// The largest value allowed, for a number.
    pub fn max(self) -> Option<f64> {
        match self {
            Kind::Whole { max, .. } => Some(max as f64),
            Kind::Port | Kind::AdminAddress => Some(65535.0),
            Kind::Seconds { .. } => Some(MAX_SECONDS),
            Kind::Number { max } => Some(max),
            Kind::Minutes => Some(MAX_MINUTES),
            Kind::Fraction => Some(1.0),
            _ => None,
        }
    }

    /// What is allowed, as cluster.md's settings table begins its Allowed column.
    pub fn allowed(self) -> String {
        match self {
            Kind::Whole { min, max } => format!("{min}-{max}"),
            Kind::Port | Kind::AdminAddress => "1-65535".to_string(),
            Kind::Seconds { positive: false } => format!("0-{MAX_SECONDS} (a year)"),
            Kind::Seconds { positive: true } => {
                format!("above 0, at most {MAX_SECONDS} (a year)")
            }
            Kind::Number { max } => format!("0-{max}"),
            Kind::Minutes => format!("0-{MAX_MINUTES} (a year)"),
            Kind::Fraction => "above 0, at most 1".to_string(),
            Kind::Bool => "true, false".to_string(),
            Kind::Address => "an IP address".to_string(),
            Kind::BindAddress => "an IP address or a host name".to_string(),
            Kind::Addresses => "a list of IP addresses".to_string(),
            Kind::LogFormat => backquoted(LogFormat::WORDS.iter().map(|(w, _)| *w)),
            Kind::AccessLog => backquoted(
                std::iter::once(AccessLogFormat::OFF)
                    .chain(LogFormat::WORDS.iter().map(|(w, _)| *w)),
            ),
            Kind::LogLevel => "`error`, `warn`, `info`, `debug`".to_string(),
            Kind::Text | Kind::Words | Kind::Endpoints => String::new(),
        }
    }
}

/// `a`, `b`: words as the docs' Allowed column lists them.
#[cfg(test)]
fn backquoted<'a>(words: impl Iterator<Item = &'a str>) -> String {
    words
        .map(|w| format!("`{w}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A command-line flag and where clap puts its value.
pub(crate) struct Flag {
    /// `--workers`
    pub name: &'static str,
    pub get: fn(&Cli) -> Option<&String>,
}

/// One row of the table.
pub(crate) struct Setting {
    /// In config.json, e.g. `server.cluster.workers`.
    pub path: &'static str,
    pub flag: Option<Flag>,
    pub env: Option<&'static str>,
    pub reload: Reload,
    #[cfg(test)]
    pub kind: Kind,
    /// The default in words, where it is no value of its own (`from the CPUs and memory`,
    /// `port + 1`, `off`); shown in parentheses for a value that is not set.
    pub unset: Option<&'static str>,
    /// Puts the value a layer gave into the setting's field (refusing a bad one).
    pub read: fn(&Raw<'_>, &mut Settings) -> Result<(), SettingsError>,
    /// When no layer gives it: the default, for most already in place; `internalPort`'s
    /// follows the port read.
    pub otherwise: fn(&mut Settings) -> Result<(), SettingsError>,
    /// The value as config.json would hold it; `None`: not set.
    pub show: fn(&Settings) -> Option<String>,
    /// Copies the value from the second settings into the first.
    pub take: fn(&mut Settings, &Settings),
}

impl Setting {
    /// The value as a message shows it: as config.json would hold it, or `(<the default>)`.
    pub fn shown(&self, s: &Settings) -> String {
        (self.show)(s).unwrap_or_else(|| format!("({})", self.unset.unwrap_or("not set")))
    }

    /// The last part of the path (`workers`), as config.json's object under its section has it.
    pub fn key(&self) -> &'static str {
        key(self.path)
    }

    /// The object holding it (`server.cluster`); empty for none.
    pub fn section(&self) -> &'static str {
        self.path.rsplit_once('.').map_or("", |(s, _)| s)
    }
}

/// The last part of a setting's path (`headerTimeoutSeconds`), as config.json's object under
/// its section has it and as messages name it: `key(paths::cluster::header_timeout)`.
pub(crate) const fn key(path: &'static str) -> &'static str {
    let bytes = path.as_bytes();
    let mut at = bytes.len();
    while at > 0 && bytes[at - 1] != b'.' {
        at -= 1;
    }
    match std::str::from_utf8(bytes.split_at(at).1) {
        Ok(key) => key,
        Err(_) => path,
    }
}

/// A value turned into the type of the field that holds it. Every bound fits the field's
/// type, so `None` (refused) is for a table that is wrong, not for input.
pub(crate) trait Put<V>: Sized {
    fn put(v: V) -> Option<Self>;
}

macro_rules! put_as_is {
    ($($t:ty),*) => {$(
        impl Put<$t> for $t {
            fn put(v: $t) -> Option<$t> {
                Some(v)
            }
        }
    )*};
}
put_as_is!(
    u64,
    f64,
    bool,
    String,
    Vec<String>,
    Vec<IpAddr>,
    Duration,
    LogFormat,
    AccessLogFormat,
    LogLevel
);

impl Put<u64> for u16 {
    fn put(v: u64) -> Option<u16> {
        u16::try_from(v).ok()
    }
}

impl Put<u64> for u32 {
    fn put(v: u64) -> Option<u32> {
        u32::try_from(v).ok()
    }
}

impl Put<u64> for Option<u32> {
    fn put(v: u64) -> Option<Option<u32>> {
        u32::try_from(v).ok().map(Some)
    }
}

impl Put<Duration> for Option<Duration> {
    fn put(v: Duration) -> Option<Option<Duration>> {
        Some(Some(v))
    }
}

/// An address as given (`bindAddress` passes it on as written) and as read.
impl Put<(String, IpAddr)> for String {
    fn put(v: (String, IpAddr)) -> Option<String> {
        Some(v.0)
    }
}

impl Put<(String, IpAddr)> for Option<IpAddr> {
    fn put(v: (String, IpAddr)) -> Option<Option<IpAddr>> {
        Some(Some(v.1))
    }
}

impl Put<SocketAddr> for Option<SocketAddr> {
    fn put(v: SocketAddr) -> Option<Option<SocketAddr>> {
        Some(Some(v))
    }
}

/// Puts a value read from `r` into its field's type.
pub(crate) fn put<V, T: Put<V>>(
    r: &Raw<'_>,
    v: Result<V, SettingsError>,
) -> Result<T, SettingsError> {
    T::put(v?).ok_or_else(|| r.invalid("is out of range"))
}

/// A field's value as config.json would hold it (`None`: not set).
pub(crate) trait Show {
    fn show(&self) -> Option<String>;
}

macro_rules! show_display {
    ($($t:ty),*) => {$(
        impl Show for $t {
            fn show(&self) -> Option<String> {
                Some(self.to_string())
            }
        }
    )*};
}
show_display!(u16, u32, u64, f64, bool);

/// A JSON string: quoted and escaped.
fn quoted(text: &str) -> Option<String> {
    Some(super::error::quote(text))
}

impl Show for Duration {
    fn show(&self) -> Option<String> {
        self.as_secs_f64().show()
    }
}

impl Show for String {
    fn show(&self) -> Option<String> {
        quoted(self)
    }
}

impl Show for Vec<String> {
    fn show(&self) -> Option<String> {
        serde_json::to_string(self).ok()
    }
}

impl Show for Vec<IpAddr> {
    fn show(&self) -> Option<String> {
        let list: Vec<String> = self.iter().map(|ip| format!("\"{ip}\"")).collect();
        Some(format!("[{}]", list.join(", ")))
    }
}

impl Show for IpAddr {
    fn show(&self) -> Option<String> {
        quoted(&self.to_string())
    }
}

impl Show for SocketAddr {
    fn show(&self) -> Option<String> {
        quoted(&self.to_string())
    }
}

impl Show for LogFormat {
    fn show(&self) -> Option<String> {
        quoted(self.word())
    }
}

impl Show for AccessLogFormat {
    fn show(&self) -> Option<String> {
        quoted(self.word())
    }
}

impl Show for LogLevel {
    fn show(&self) -> Option<String> {
        quoted(self.filter())
    }
}

impl<T: Show> Show for Option<T> {
    fn show(&self) -> Option<String> {
        self.as_ref().and_then(T::show)
    }
}

/// The default when no layer gives a setting and its default is already in place.
pub(crate) fn as_default(_: &mut Settings) -> Result<(), SettingsError> {
    Ok(())
}

/// Writes `Settings::default()` and `TABLE` from the rows. A row:
///
/// `field [path, default, kind, reload (, flag "--name" cli_field)? (, env "VAR")?
///  (, unset "the default in words" (otherwise_fn)?)?]`
macro_rules! settings_table {
    (
        own { $( $own:ident : $oval:expr ),* $(,)? }
        Settings { $( $top:ident [ $($trow:tt)* ] )* }
        $( $sec:ident : $Sec:ident { $( $f:ident [ $($row:tt)* ] )* } )*
    ) => {
        impl Default for Settings {
            /// The defaults of the table, the spec's (and fhircluster's for its own settings).
            fn default() -> Settings {
                Settings {
                    $( $top: settings_table!(@default $($trow)*), )*
                    $( $sec: $Sec { $( $f: settings_table!(@default $($row)*), )* }, )*
                    $( $own: $oval, )*
                }
            }
        }

        /// Each setting's path in config.json, by its field in `Settings`:
        /// `paths::cluster::header_timeout` is `"server.cluster.headerTimeoutSeconds"`, the
        /// row's own spelling. A message or a list that names a setting takes it from here (the
        /// key alone with `settings::key`), so the name is written once, in its row
        /// (`tests/setting_names.rs` holds the code to that).
        #[allow(non_upper_case_globals)]
        pub(crate) mod paths {
            $( pub(crate) const $top: &str = $crate::settings::setting::settings_table!(@path $($trow)*); )*
            $(
                pub(crate) mod $sec {
                    $( pub(crate) const $f: &str = $crate::settings::setting::settings_table!(@path $($row)*); )*
                }
            )*
        }

        /// Every setting, in the order they are read (a default may follow one read before).
        pub(crate) static TABLE: &[Setting] = &[
            $( settings_table!(@row [$top] $($trow)*), )*
            $( $( settings_table!(@row [$sec . $f] $($row)*), )* )*
        ];
    };

    (@default $path:literal, $default:expr, $($rest:tt)*) => { $default };
    (@path $path:literal, $($rest:tt)*) => { $path };

    (@row [$($at:ident).+] $path:literal, $default:expr,
        $kind:ident $(( $($arg:expr),* ))?, $reload:ident
        $(, flag $flag:literal $cli:ident)?
        $(, env $env:literal)?
        $(, unset $unset:literal $(($otherwise:path))?)?
    ) => {
        Setting {
            path: paths::$($at)::+,
            flag: settings_table!(@flag $($flag $cli)?),
            env: settings_table!(@opt $($env)?),
            reload: Reload::$reload,
            #[cfg(test)]
            kind: settings_table!(@kind $kind $(($($arg),*))?),
            unset: settings_table!(@opt $($unset)?),
            read: |r, s| {
                s.$($at).+ = put(r, settings_table!(@read r, $default, $kind $(($($arg),*))?))?;
                Ok(())
            },
            otherwise: settings_table!(@otherwise $($($otherwise)?)?),
            show: |s| Show::show(&s.$($at).+),
            take: |s, from| s.$($at).+ = from.$($at).+.clone(),
        }
    };

    (@flag) => { None };
    (@flag $flag:literal $cli:ident) => {
        Some(Flag { name: $flag, get: |c: &Cli| c.$cli.as_ref() })
    };
    (@opt) => { None };
    (@opt $v:literal) => { Some($v) };
    (@otherwise) => { as_default };
    (@otherwise $f:path) => { $f };

    (@kind whole($min:expr, $max:expr)) => { Kind::Whole { min: $min, max: $max } };
    (@kind seconds) => { Kind::Seconds { positive: false } };
    (@kind positive_seconds) => { Kind::Seconds { positive: true } };
    (@kind number($max:expr)) => { Kind::Number { max: $max } };
    (@kind port) => { Kind::Port };
    (@kind minutes) => { Kind::Minutes };
    (@kind fraction) => { Kind::Fraction };
    (@kind boolean) => { Kind::Bool };
    (@kind text) => { Kind::Text };
    (@kind words) => { Kind::Words };
    (@kind address) => { Kind::Address };
    (@kind bind_address) => { Kind::BindAddress };
    (@kind addresses) => { Kind::Addresses };
    (@kind admin_address) => { Kind::AdminAddress };
    (@kind log_format) => { Kind::LogFormat };
    (@kind log_level) => { Kind::LogLevel };
    (@kind endpoints) => { Kind::Endpoints };
    (@kind header_name) => { Kind::Text };
    (@kind access_log) => { Kind::AccessLog };
    (@kind control_socket) => { Kind::Text };
    (@kind control_group) => { Kind::Text };

    (@read $r:ident, $d:expr, whole($min:expr, $max:expr)) => { $r.whole($min, $max) };
    (@read $r:ident, $d:expr, seconds) => { $r.seconds(false) };
    (@read $r:ident, $d:expr, positive_seconds) => { $r.seconds(true) };
    (@read $r:ident, $d:expr, number($max:expr)) => { $r.non_negative($max) };
    (@read $r:ident, $d:expr, port) => { $r.port().map(u64::from) };
    (@read $r:ident, $d:expr, minutes) => { super::table::interval_minutes($r, $d) };
    (@read $r:ident, $d:expr, fraction) => { $r.fraction() };
    (@read $r:ident, $d:expr, boolean) => { $r.boolean() };
    (@read $r:ident, $d:expr, text) => { $r.string() };
    (@read $r:ident, $d:expr, words) => { $r.words() };
    (@read $r:ident, $d:expr, address) => { super::table::address($r) };
    (@read $r:ident, $d:expr, addresses) => { super::table::addresses($r) };
    (@read $r:ident, $d:expr, bind_address) => { super::table::bind_address($r) };
    (@read $r:ident, $d:expr, admin_address) => { super::table::admin_address($r) };
    (@read $r:ident, $d:expr, log_format) => { super::table::log_format($r) };
    (@read $r:ident, $d:expr, log_level) => { super::table::log_level($r) };
    (@read $r:ident, $d:expr, endpoints) => { super::table::endpoints($r) };
    (@read $r:ident, $d:expr, header_name) => { super::table::header_name($r) };
    (@read $r:ident, $d:expr, access_log) => { super::table::access_log($r) };
    (@read $r:ident, $d:expr, control_socket) => { super::table::control_socket($r) };
    (@read $r:ident, $d:expr, control_group) => { super::table::control_group($r) };
}
pub(crate) use settings_table;
