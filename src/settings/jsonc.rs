//! `config.json` with comments: FHIRsmith's own template has `//` and `/* */` comments, so the
//! file is read as JSON after blanking every comment outside a string. Comments are replaced by
//! spaces (newlines kept), so serde_json's line and column still point into the original file.

use std::fmt;
use std::path::{Path, PathBuf};

/// A `config.json` that could not be read or parsed, naming the file, line and column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFileError {
    pub path: PathBuf,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ConfigFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.path.display(), self.message)
        } else {
            write!(
                f,
                "{}:{}:{}: {}",
                self.path.display(),
                self.line,
                self.column,
                self.message
            )
        }
    }
}

impl std::error::Error for ConfigFileError {}

/// Parses JSON that may contain `//` and `/* */` comments (the settings' tests' way in).
#[cfg(test)]
pub(crate) fn parse(path: &Path, text: &str) -> Result<serde_json::Value, ConfigFileError> {
    parse_noting_comments(path, text).map(|(json, _)| json)
}

/// Parses JSON that may contain `//` and `/* */` comments; with where the first comment begins
/// (line, column), if there is one.
fn parse_noting_comments(
    path: &Path,
    text: &str,
) -> Result<(serde_json::Value, Option<(usize, usize)>), ConfigFileError> {
    let (blanked, first) = blank_comments(text).map_err(|(line, column)| ConfigFileError {
        path: path.to_path_buf(),
        line,
        column,
        message: "unterminated /* comment".to_string(),
    })?;
    let json = serde_json::from_str(&blanked).map_err(|e| ConfigFileError {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    Ok((json, first))
}

/// Reads and parses `<data_dir>/config.json`; `Ok(None)` when there is no such file.
pub fn read(data_dir: &Path) -> Result<Option<serde_json::Value>, ConfigFileError> {
    Ok(read_text(data_dir)?.map(|c| c.json))
}

/// A `config.json` as read: its content, and where its first comment is (line, column), which
/// FHIRsmith's own `server.js`, reading the same file with `JSON.parse`, stops at.
pub(crate) struct ConfigText {
    pub json: serde_json::Value,
    pub first_comment: Option<(usize, usize)>,
}

/// [`read`], saying also where the file's first comment is.
pub(crate) fn read_text(data_dir: &Path) -> Result<Option<ConfigText>, ConfigFileError> {
    let path = data_dir.join("config.json");
    match std::fs::read_to_string(&path) {
        Ok(text) => parse_noting_comments(&path, &text).map(|(json, first_comment)| {
            Some(ConfigText {
                json,
                first_comment,
            })
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ConfigFileError {
            path,
            line: 0,
            column: 0,
            message: e.to_string(),
        }),
    }
}

/// Text with its comments, and where the first begins (line, column).
type Blanked = (String, Option<(usize, usize)>);

/// Replaces comments with spaces. Err((line, column)) of an unterminated block comment.
fn blank_comments(text: &str) -> Result<Blanked, (usize, usize)> {
    #[derive(PartialEq)]
    enum State {
        Code,
        Str,
        StrEscape,
        Line,
        Block { line: usize, column: usize },
    }
    let mut out = String::with_capacity(text.len());
    let mut state = State::Code;
    let mut first = None;
    let (mut line, mut column) = (1usize, 0usize);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\n' {
            line += 1;
            column = 0;
        } else {
            column += 1;
        }
        match state {
            State::Code => match (c, chars.peek()) {
                ('"', _) => {
                    state = State::Str;
                    out.push(c);
                }
                ('/', Some('/')) => {
                    first = first.or(Some((line, column)));
                    chars.next();
                    column += 1;
                    state = State::Line;
                    out.push_str("  ");
                }
                ('/', Some('*')) => {
                    first = first.or(Some((line, column)));
                    chars.next();
                    state = State::Block { line, column };
                    column += 1;
                    out.push_str("  ");
                }
                _ => out.push(c),
            },
            State::Str => {
                state = match c {
                    '\\' => State::StrEscape,
                    '"' => State::Code,
                    _ => State::Str,
                };
                out.push(c);
            }
            State::StrEscape => {
                state = State::Str;
                out.push(c);
            }
            State::Line => {
                if c == '\n' {
                    state = State::Code;
                    out.push('\n');
                } else {
                    out.push(' ');
                }
            }
            State::Block { .. } => {
                if c == '*' && chars.peek() == Some(&'/') {
                    chars.next();
                    column += 1;
                    state = State::Code;
                    out.push_str("  ");
                } else if c == '\n' {
                    out.push('\n');
                } else {
                    out.push(' ');
                }
            }
        }
    }
    match state {
        State::Block { line, column } => Err((line, column)),
        _ => Ok((out, first)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<serde_json::Value, ConfigFileError> {
        parse(Path::new("config.json"), text)
    }

    #[test]
    fn comments_of_both_kinds_are_ignored() {
        let v = p("{\n  // the port\n  \"port\": 3000, /* inline */ \"a\": \"x\"\n}\n").unwrap();
        assert_eq!(v["port"], 3000);
        assert_eq!(v["a"], "x");
    }

    #[test]
    fn the_first_comment_is_found_where_it_begins() {
        let path = Path::new("config.json");
        let at = |t: &str| parse_noting_comments(path, t).map(|(_, first)| first);
        assert_eq!(
            at("{\n \"a\": \"//\", // c\n /* d */ \"b\": 1}"),
            Ok(Some((2, 13)))
        );
        assert_eq!(at("{\"a\": 1}\n/* c */"), Ok(Some((2, 1))));
        assert_eq!(at("{\"url\": \"http://x/*y*/\"}"), Ok(None));
    }

    #[test]
    fn comment_markers_inside_strings_are_kept() {
        let v = p(r#"{"url": "http://x/*y*/", "q": "a\"//b"}"#).unwrap();
        assert_eq!(v["url"], "http://x/*y*/");
        assert_eq!(v["q"], "a\"//b");
    }

    #[test]
    fn a_syntax_error_names_file_line_and_column() {
        let e = p("{\n  /* c */ \"a\": 1,\n  \"b\": ,\n}").unwrap_err();
        assert_eq!(e.line, 3);
        assert_eq!(e.column, 8);
        assert!(e.to_string().starts_with("config.json:3:8: "), "{e}");
    }

    #[test]
    fn an_unterminated_block_comment_is_an_error_at_its_start() {
        let e = p("{\n \"a\": 1 /* never closed\n}").unwrap_err();
        assert_eq!((e.line, e.column), (2, 9));
    }

    #[test]
    fn no_input_panics() {
        for s in [
            "",
            "/",
            "/*",
            "\"",
            "\"\\",
            "//",
            "{\"a\":\"\\",
            "\u{feff}{}",
        ] {
            let _ = p(s);
        }
    }
}
