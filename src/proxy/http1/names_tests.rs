//! The names table: the same `HeaderName` as `from_bytes` for every name, and the right role.

use super::*;
use proptest::prelude::*;

/// The role a name has, from `from_bytes`'s name: what the table must agree with.
fn role_by_name(name: &HeaderName) -> Role {
    match name.as_str() {
        "content-length" => Role::ContentLength,
        "transfer-encoding" => Role::TransferEncoding,
        "connection" => Role::Connection,
        "keep-alive" | "proxy-connection" | "te" | "trailer" | "upgrade" => Role::HopByHop,
        "close" => Role::Close,
        _ => Role::Plain,
    }
}

/// Every name the table holds, lowercase.
const TABLE: &[&str] = &[
    "te",
    "age",
    "via",
    "date",
    "etag",
    "vary",
    "link",
    "allow",
    "server",
    "pragma",
    "expires",
    "upgrade",
    "trailer",
    "location",
    "connection",
    "keep-alive",
    "set-cookie",
    "retry-after",
    "content-type",
    "x-powered-by",
    "cache-control",
    "last-modified",
    "accept-ranges",
    "content-length",
    "content-encoding",
    "content-language",
    "content-location",
    "proxy-connection",
    "www-authenticate",
    "transfer-encoding",
    "content-disposition",
    "x-content-type-options",
    "strict-transport-security",
    "access-control-allow-origin",
];

fn agrees(name: &[u8]) -> Result<(), TestCaseError> {
    let theirs = HeaderName::from_bytes(name);
    let ours = name_of(name);
    match (ours, theirs) {
        (Ok((n, role)), Ok(t)) => {
            prop_assert_eq!(&n, &t, "{:?}", String::from_utf8_lossy(name));
            prop_assert_eq!(role, role_by_name(&t), "{:?}", t);
        }
        (Err(_), Err(_)) => {}
        (ours, theirs) => prop_assert!(false, "{:?}: {:?} / {:?}", name, ours, theirs),
    }
    Ok(())
}

#[test]
fn every_name_in_the_table_is_known_in_any_case() {
    for name in TABLE {
        assert!(known(name.as_bytes()).is_some(), "{name}");
        for variant in [name.to_ascii_uppercase(), capitalised(name)] {
            assert_eq!(
                known(variant.as_bytes()),
                known(name.as_bytes()),
                "{variant}"
            );
            agrees(variant.as_bytes()).unwrap();
        }
        agrees(name.as_bytes()).unwrap();
    }
}

#[test]
fn every_hop_by_hop_name_is_in_the_table() {
    // RFC 9110 §7.6.1 and Transfer-Encoding: the reader drops these, so it must know them all.
    for name in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    ] {
        let role = known(name.as_bytes()).map(|(_, r)| r);
        assert!(
            matches!(
                role,
                Some(Role::HopByHop | Role::Connection | Role::TransferEncoding)
            ),
            "{name}: {role:?}"
        );
    }
    assert_eq!(name_of(b"Close").map(|(_, r)| r).ok(), Some(Role::Close));
}

/// `Content-Type` as it is usually written.
fn capitalised(name: &str) -> String {
    name.split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join("-")
}

proptest! {
    /// Names near the table's (a case flipped, a byte changed, one more or less) and any token.
    #[test]
    fn any_name_gets_what_from_bytes_gives(
        at in 0..TABLE.len(),
        flips in prop::collection::vec(any::<bool>(), 32),
        edit in 0usize..4,
        pos in 0usize..32,
        byte in prop::sample::select(b"!#$%&'*+-.^_`|~09azAZ-\x7f \xc3".to_vec()),
        any_token in "[!#$%&'*+.^_`|~0-9a-zA-Z-]{1,30}",
    ) {
        let mut name: Vec<u8> = TABLE[at]
            .bytes()
            .zip(&flips)
            .map(|(b, &f)| if f { b.to_ascii_uppercase() } else { b })
            .collect();
        let pos = pos % name.len();
        match edit {
            0 => {}
            1 => name[pos] = byte,
            2 => name.insert(pos, byte),
            _ => {
                name.remove(pos);
            }
        }
        agrees(&name)?;
        agrees(any_token.as_bytes())?;
    }
}

#[test]
fn only_case_differs_in_what_passes() {
    // Every byte against every letter and `-`: equal but for ASCII case, and nothing else.
    for b in 0..=255u8 {
        for l in b"abcdefghijklmnopqrstuvwxyz-".iter() {
            let want = b.to_ascii_lowercase() == *l;
            assert_eq!(eq_lower(&[b], &[*l]), want, "{b:#x} {l}");
            let mut name = *b"content-lengt?";
            name[13] = b;
            let mut lower = *b"content-lengt?";
            lower[13] = *l;
            assert_eq!(eq_lower(&name, &lower), want, "{b:#x} {l}");
        }
    }
}
