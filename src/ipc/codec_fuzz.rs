//! Fuzzing the IPC line reader: arbitrary bytes in arbitrary chunks never panic it, it never
//! holds more than `MAX_LINE_BYTES`, and a good line after any garbage still decodes (a child's
//! garbage costs only the lines it spoils).

use proptest::prelude::*;

use super::codec::{CodecError, Frame, LineDecoder, MAX_LINE_BYTES};

fn chunk() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        // JSON-ish bytes, so some lines parse and some nearly do.
        prop::collection::vec(
            prop::sample::select(b"{}[]\":,\\ \n\ntype0123456789aeflnrstu\xc3\xa9\xff".to_vec()),
            0..64
        ),
        Just(b"{\"type\":\"status\",\"inFlight\":1}\n".to_vec()),
        // A run with no newline, long enough to cross the limit after a few of them.
        (1usize..400_000).prop_map(|n| vec![b'x'; n]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_bytes_in_any_chunks_never_panic_and_stay_bounded(
        chunks in prop::collection::vec(chunk(), 0..24),
    ) {
        let mut d = LineDecoder::new();
        let mut out: Vec<Result<Frame, CodecError>> = Vec::new();
        for c in &chunks {
            d.feed(c, &mut out);
            prop_assert!(d.pending() <= MAX_LINE_BYTES);
        }
        // Whatever came before, a newline then a good line decodes.
        out.clear();
        d.feed(b"\n{\"type\":\"after\"}\n", &mut out);
        let last = out.last().and_then(|r| r.as_ref().ok()).map(|f| f.type_name.clone());
        prop_assert_eq!(last.as_deref(), Some("after"));
        prop_assert_eq!(d.pending(), 0);
    }
}
