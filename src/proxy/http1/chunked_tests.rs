//! The chunked decoder on whole inputs and on inputs fed one byte at a time.

use super::*;

/// Decodes `input` fed in pieces of `step` bytes: the data, or the first error.
fn decode(input: &[u8], step: usize) -> Result<(Vec<u8>, bool), ChunkError> {
    let mut dec = Chunked::default();
    let mut buf = BytesMut::new();
    let mut data = Vec::new();
    for piece in input.chunks(step.max(1)) {
        buf.extend_from_slice(piece);
        loop {
            match dec.step(&mut buf)? {
                Step::Data(d) => data.extend_from_slice(&d),
                Step::NeedMore => break,
                Step::End => return Ok((data, buf.is_empty())),
            }
        }
    }
    Ok((data, false))
}

#[test]
fn chunks_are_joined_whatever_the_read_boundaries() {
    let body = b"4\r\nWiki\r\n5;name=val\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\n\r\n";
    for step in [1, 2, 3, 7, body.len()] {
        let (data, clean) = decode(body, step).unwrap();
        assert_eq!(data, b"Wikipedia in\r\n\r\nchunks.", "step {step}");
        assert!(clean);
    }
}

#[test]
fn trailers_are_read_past_and_what_follows_is_left() {
    let (data, clean) = decode(b"1\r\na\r\n0\r\nx-t: 1\r\ny: 2\r\n\r\nNEXT", 100).unwrap();
    assert_eq!(data, b"a");
    assert!(!clean, "the bytes after the body stay in the buffer");
}

#[test]
fn an_unfinished_body_asks_for_more() {
    assert_eq!(decode(b"5\r\nab", 100).unwrap(), (b"ab".to_vec(), false));
}

#[test]
fn malformed_framing_is_refused() {
    for bad in [
        &b"\r\n"[..],
        b"g\r\n",
        b"4 4\r\nabcd\r\n0\r\n\r\n",
        b"4\nabcd\r\n0\r\n\r\n",
        b"4\r\nabcdX\r\n0\r\n\r\n",
        b"4\r\nabcd\rX0\r\n\r\n",
        b"4;ext\nabcd\r\n",
        b"0\r\n\rX",
        b"0\r\nx: y\rX",
        b"-1\r\n",
    ] {
        assert!(
            decode(bad, 1).is_err(),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn sizes_are_overflow_checked() {
    assert_eq!(
        decode(b"10000000000000000\r\n", 100),
        Err(ChunkError("chunk size overflows"))
    );
    // The largest size is fine (the data just never all comes).
    assert!(decode(b"FFFFFFFFFFFFFFFF\r\nabc", 100).is_ok());
}

#[test]
fn extensions_and_trailers_are_bounded() {
    let mut long = b"1;".to_vec();
    long.extend(std::iter::repeat_n(b'x', 17 * 1024));
    assert!(decode(&long, 4096).is_err());
    let mut trailers = b"0\r\n".to_vec();
    trailers.extend(std::iter::repeat_n(b'x', 17 * 1024));
    assert!(decode(&trailers, 4096).is_err());
}
