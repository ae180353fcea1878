//! The decoder on each framing, fed a byte at a time and at its end.

use super::*;
use bytes::Bytes;

/// Decodes `input` a `step` bytes at a time, then the close: the body and whether it ended.
fn decode(framing: Framing, input: &[u8], step: usize) -> Result<(Vec<u8>, bool), DecodeError> {
    let mut dec = Decoder::new(framing);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let pieces = input.chunks(step.max(1)).map(Some).chain([None]);
    for piece in pieces {
        if let Some(p) = piece {
            buf.extend_from_slice(p);
        }
        loop {
            match dec.step(&mut buf, piece.is_none())? {
                Step::Data(d) => out.extend_from_slice(&d),
                Step::NeedMore => break,
                Step::End => return Ok((out, true)),
            }
        }
    }
    Ok((out, false))
}

#[test]
fn a_length_takes_its_bytes_and_leaves_the_rest() {
    let mut dec = Decoder::new(Framing::Length(3));
    let mut buf = BytesMut::from(&b"abcdef"[..]);
    assert_eq!(
        dec.step(&mut buf, false),
        Ok(Step::Data(Bytes::from("abc")))
    );
    assert!(dec.is_end());
    assert_eq!(dec.step(&mut buf, false), Ok(Step::End));
    assert_eq!(&buf[..], b"def");
    for step in 1..4 {
        assert_eq!(
            decode(Framing::Length(3), b"abc", step),
            Ok((b"abc".to_vec(), true))
        );
    }
}

#[test]
fn a_length_cut_short_by_the_close_fails() {
    assert_eq!(
        decode(Framing::Length(4), b"abc", 1),
        Err(DecodeError::Closed)
    );
}

#[test]
fn no_body_is_at_its_end_at_once() {
    let dec = Decoder::new(Framing::Empty);
    assert!(dec.is_end());
    assert_eq!(decode(Framing::Empty, b"", 1), Ok((vec![], true)));
}

#[test]
fn a_body_to_the_close_ends_with_it() {
    for step in 1..3 {
        assert_eq!(
            decode(Framing::ToClose, b"abc", step),
            Ok((b"abc".to_vec(), true))
        );
    }
    assert!(Decoder::new(Framing::ToClose).ends_at_close());
}

#[test]
fn chunked_is_decoded_and_a_close_before_its_end_fails() {
    let body = b"3\r\nabc\r\n0\r\n\r\n";
    for step in 1..5 {
        assert_eq!(
            decode(Framing::Chunked, body, step),
            Ok((b"abc".to_vec(), true))
        );
    }
    assert_eq!(
        decode(Framing::Chunked, b"3\r\nab", 1),
        Err(DecodeError::Closed)
    );
    assert!(matches!(
        decode(Framing::Chunked, b"x\r\n", 1),
        Err(DecodeError::Chunk(_))
    ));
}
