//! A line from outside (a child's output, which logs what its clients sent) made safe to write
//! to a terminal: its control characters written as escapes, so that a carriage return, a
//! backspace or an escape sequence can neither forge a line nor hide one. The notation is the one
//! tracing's formatter uses for the launcher's own lines (`\x1b`, `\u{9b}`), so both read alike;
//! tracing escapes only ESC, BEL, BS, FF and DEL (and C1), which leaves a carriage return free to
//! overwrite what came before, hence all of C0 here. A tab is kept: it moves the cursor on, and
//! stack traces and tables use it.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` changes what a terminal shows other than by printing itself: C0 (but tab), DEL,
/// and C1, which some terminals take as 8-bit control codes.
fn is_terminal_control(c: char) -> bool {
    (c.is_control() && c != '\t') || ('\u{80}'..='\u{9f}').contains(&c)
}

/// `line` with each control character written as an escape; borrowed when it has none.
pub fn escape_controls(line: &str) -> Cow<'_, str> {
    if !line.chars().any(is_terminal_control) {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len() + 16);
    for c in line.chars() {
        match c {
            c if (c as u32) < 0x80 && is_terminal_control(c) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if is_terminal_control(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carriage_returns_escapes_and_every_other_control_are_escaped_and_a_tab_kept() {
        assert_eq!(
            escape_controls("ok\rFORGED \x1b[2K\x1b]0;t\x07 \x08\x0b\x0c\0\x7f\u{9b}31m\ttab"),
            "ok\\x0dFORGED \\x1b[2K\\x1b]0;t\\x07 \\x08\\x0b\\x0c\\x00\\x7f\\u{9b}31m\ttab"
        );
        assert_eq!(escape_controls("a\nb"), "a\\x0ab");
    }

    #[test]
    fn a_line_without_controls_is_borrowed_unchanged() {
        let line = "GET /r4/CodeSystem?x=caf\u{e9} \\x1b 200";
        assert!(matches!(escape_controls(line), Cow::Borrowed(l) if l == line));
    }
}
