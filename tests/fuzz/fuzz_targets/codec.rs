//! The codec (`src/proxy/http1/`, built here on its own) under a coverage-guided fuzzer: any
//! bytes, as a request head, a response head and its body, or a chunked body; none may panic
//! or hang, and each must read the same however its bytes are split into reads (the lobby and
//! the upstream client read them a read at a time). Agreement with hyper is the structure-aware
//! fuzzing's part (`src/proxy/http1/fuzz_tests.rs`), which runs hyper beside the codec.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../../src/proxy/http1/mod.rs"]
mod http1;

use http1::chunked::{Chunked, Step as ChunkStep};
use http1::decode::{Decoder, Step};
use http1::request_head::{check, Check};
use http1::response_head::parse;

/// The first non-partial reading over growing prefixes is the whole's.
fn request_head(data: &[u8], step: usize) {
    let mut first = None;
    let mut end = 0;
    while end < data.len() {
        end = (end + step).min(data.len());
        let c = check(&data[..end]);
        if c != Check::Partial {
            first = Some(c);
            break;
        }
    }
    let whole = check(data);
    match first {
        Some(Check::Taken(t)) => assert_eq!(whole, Check::Taken(t), "a head read in pieces"),
        Some(Check::Refused(_)) => {
            assert!(matches!(whole, Check::Refused(_)), "refused in pieces, not whole")
        }
        _ => {}
    }
}

/// A response head, then its body, fed `step` bytes at a time: the body as decoded, or `None`
/// for a refusal.
fn response(data: &[u8], step: usize) -> Option<(u16, Vec<u8>, bool)> {
    let mut buf = BytesMut::new();
    let mut pieces = data.chunks(step);
    let head = loop {
        if let Some(h) = parse(&mut buf, &http::Method::GET).ok()? {
            break h;
        }
        buf.extend_from_slice(pieces.next()?);
    };
    let mut dec = Decoder::new(head.framing);
    let mut body = Vec::new();
    let mut eof = false;
    for _ in 0..data.len() * 4 + 16 {
        match dec.step(&mut buf, eof) {
            Ok(Step::Data(d)) => {
                assert!(!d.is_empty(), "empty data");
                body.extend_from_slice(&d);
            }
            Ok(Step::End) => return Some((head.parts.status.as_u16(), body, true)),
            Err(_) => return None,
            Ok(Step::NeedMore) => {
                assert!(!eof, "more asked for after the end");
                match pieces.next() {
                    Some(p) => buf.extend_from_slice(p),
                    None => eof = true,
                }
            }
        }
    }
    panic!("the decoder went round without an end");
}

/// `step` (which takes the data) and `skip` (which moves past it) agree on where a chunked body
/// ends and how much it holds.
fn chunked(data: &[u8], step: usize) {
    let mut taker = Chunked::default();
    let mut buf = BytesMut::new();
    let mut taken: Result<(usize, bool), ()> = Ok((0, false));
    'outer: for p in data.chunks(step) {
        buf.extend_from_slice(p);
        loop {
            match taker.step(&mut buf) {
                Ok(ChunkStep::Data(d)) => taken = taken.map(|(n, _)| (n + d.len(), false)),
                Ok(ChunkStep::End) => {
                    taken = taken.map(|(n, _)| (n, true));
                    break 'outer;
                }
                Ok(ChunkStep::NeedMore) => break,
                Err(_) => {
                    taken = Err(());
                    break 'outer;
                }
            }
        }
    }
    let mut skipper = Chunked::default();
    let skipped = skipper.skip(data).map(|(_, end)| end).map_err(|_| ());
    match (taken, skipped) {
        (Ok((_, a)), Ok(b)) => assert_eq!(a, b, "step and skip disagree on the end"),
        (Err(()), Err(())) => {}
        (a, b) => panic!("step {a:?} / skip {b:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, data)) = data.split_first() else {
        return;
    };
    let step = usize::from(sel >> 2) + 1;
    match sel & 3 {
        0 | 1 => request_head(data, step),
        2 => {
            let whole = response(data, data.len().max(1));
            let pieces = response(data, step);
            // A refusal may come sooner in pieces (a head over the cap is seen before it ends);
            // what is read to the end is the same.
            if let (Some(a), Some(b)) = (&whole, &pieces) {
                assert_eq!(a, b, "a response read in pieces");
            }
        }
        _ => chunked(data, step),
    }
});
