//! The last lines a process wrote on its stderr, kept so that when the master is given up the
//! error can say what it said before it died (a missing module, a port in use, a bad
//! configuration) next to its exit status. Bounded in lines and bytes: a process that floods its
//! stderr costs the launcher no more than `MAX_LINES` lines of `MAX_BYTES` in all.

use std::collections::VecDeque;

/// Lines kept.
pub const MAX_LINES: usize = 20;
/// Bytes kept, in all; a longer single line is cut to this.
pub const MAX_BYTES: usize = 4096;

/// The newest lines, oldest first, within both bounds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StderrTail {
    lines: VecDeque<String>,
    bytes: usize,
}

impl StderrTail {
    pub fn push(&mut self, line: &str) {
        let line = cut(line, MAX_BYTES);
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.lines.len() > MAX_LINES || self.bytes > MAX_BYTES {
            match self.lines.pop_front() {
                Some(old) => self.bytes -= old.len(),
                None => break,
            }
        }
    }

    pub fn lines(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().map(String::as_str)
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

/// `line` cut at a character boundary to at most `max` bytes.
fn cut(line: &str, max: usize) -> String {
    if line.len() <= max {
        return line.to_string();
    }
    let mut end = max;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_newest_lines_are_kept_oldest_first() {
        let mut t = StderrTail::default();
        assert!(t.is_empty());
        for i in 0..30 {
            t.push(&format!("line {i}"));
        }
        let kept: Vec<&str> = t.lines().collect();
        assert_eq!(kept.len(), MAX_LINES);
        assert_eq!(kept[0], "line 10");
        assert_eq!(kept[MAX_LINES - 1], "line 29");
    }

    #[test]
    fn a_huge_line_is_cut_and_pushes_the_others_out() {
        let mut t = StderrTail::default();
        t.push("before");
        t.push(&"é".repeat(5000));
        let kept: Vec<&str> = t.lines().collect();
        assert_eq!(kept.len(), 1);
        assert!(kept[0].len() <= MAX_BYTES && kept[0].len() >= MAX_BYTES - 1);
        t.push("after");
        assert_eq!(t.lines().last(), Some("after"));
    }

    proptest! {
        #[test]
        fn both_bounds_always_hold_and_the_last_line_is_kept(
            lines in proptest::collection::vec(".{0,600}", 1..60)
        ) {
            let mut t = StderrTail::default();
            for l in &lines {
                t.push(l);
            }
            let kept: Vec<&str> = t.lines().collect();
            prop_assert!(kept.len() <= MAX_LINES);
            prop_assert!(kept.iter().map(|l| l.len()).sum::<usize>() <= MAX_BYTES);
            prop_assert_eq!(*kept.last().unwrap(), lines.last().unwrap().as_str());
        }
    }
}
