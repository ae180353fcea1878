//! Cache-ids as FHIRsmith issues them from `$cache-control`: `<code>.<start>.<random>`, where
//! `<start>` is when the issuing process started in base 36 (with `sharedCache`, the master's
//! generation), so a restarted process can tell an id it issued before the restart from one it
//! never issued (SIM-6, SIM-7). Pure: the random token and the clock come in.

use std::collections::HashSet;

/// Why an id is or isn't usable, in the spec's words.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Live,
    NeverIssued,
    /// Prefixed with another process's code.
    OtherInstance,
    /// Issued by this process (or generation) before a restart.
    LostToRestart,
}

pub fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

pub fn from_base36(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 13 {
        return None;
    }
    s.chars().try_fold(0u64, |acc, c| {
        acc.checked_mul(36)?.checked_add(u64::from(c.to_digit(36)?))
    })
}

/// A 22-character base-62 token from 128 random bits.
pub fn token(mut bits: u128) -> String {
    const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut out = [b'0'; 22];
    for slot in out.iter_mut().rev() {
        *slot = DIGITS[(bits % 62) as usize];
        bits /= 62;
    }
    String::from_utf8(out.to_vec()).unwrap_or_default()
}

pub fn format(code: &str, start: u64, random: &str) -> String {
    format!("{code}.{}.{random}", base36(start))
}

/// The three parts of a well-formed id.
#[derive(Debug, PartialEq, Eq)]
pub struct Parts<'a> {
    pub code: &'a str,
    pub start: u64,
    pub random: &'a str,
}

pub fn parse(id: &str) -> Option<Parts<'_>> {
    let mut it = id.split('.');
    let (code, start, random) = (it.next()?, it.next()?, it.next()?);
    let alnum = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric());
    if it.next().is_some() || !alnum(code) || !alnum(random) || id.len() > 64 {
        return None;
    }
    Some(Parts {
        code,
        start: from_base36(start)?,
        random,
    })
}

/// An id checked by a process that keeps its caches in its own memory.
pub fn classify_local(
    id: &str,
    own_code: &str,
    own_start: u64,
    issued: &HashSet<String>,
) -> Verdict {
    let Some(p) = parse(id) else {
        return Verdict::NeverIssued;
    };
    if p.code != own_code {
        Verdict::OtherInstance
    } else if p.start < own_start {
        Verdict::LostToRestart
    } else if issued.contains(id) {
        Verdict::Live
    } else {
        Verdict::NeverIssued
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_and_parse() {
        // spec: SIM-6
        let t = token(u128::MAX);
        assert_eq!(t.len(), 22);
        let id = format("tx2", 1_700_000_000_000, &t);
        assert!(id.starts_with("tx2."), "{id}");
        let p = parse(&id);
        assert_eq!(
            p.map(|p| (p.code, p.start)),
            Some(("tx2", 1_700_000_000_000))
        );
        assert!(id.len() <= 64);
        assert_eq!(from_base36(&base36(0)), Some(0));
        assert_eq!(from_base36(&base36(u64::MAX)), Some(u64::MAX));
        for bad in [
            "",
            "a.b",
            "a.b.c.d",
            "tx1..x",
            "tx1.!!.x",
            "tx1.zzzzzzzzzzzzzz.x",
            "t x.1.a",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn classification() {
        // spec: SIM-7
        let start = 1_000_000;
        let live = format("tx1", start, "abc");
        let issued: HashSet<String> = [live.clone()].into();
        let v = |id: &str| classify_local(id, "tx1", start, &issued);
        assert_eq!(v(&live), Verdict::Live);
        assert_eq!(v(&format("tx1", start, "zzz")), Verdict::NeverIssued);
        assert_eq!(v("garbage"), Verdict::NeverIssued);
        assert_eq!(v(&format("tx2", start, "abc")), Verdict::OtherInstance);
        assert_eq!(v(&format("tx1", start - 1, "abc")), Verdict::LostToRestart);
        assert_eq!(v(&format("tx1", start + 1, "abc")), Verdict::NeverIssued);
    }
}
