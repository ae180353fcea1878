//! The codec fuzzed with a time budget: structure-aware inputs (the two differential tests'
//! generators, and their bytes mutated), each checked for no panic, no hang, and agreement with
//! hyper (its server for request heads, through the lobby's reading; its client for responses).
//! No coverage-guided fuzzer runs on this machine's stable toolchain (`cargo fuzz` needs nightly;
//! `tests/fuzz/README.md` has both), so this one explores by structure, and holds the codec to hyper.
//!
//! In the suite it runs for 2 seconds; for a longer run:
//!
//! ```text
//! FUZZ_SECONDS=600 cargo test --lib http1::fuzz_tests -- --nocapture
//! ```
//!
//! It prints one `FUZZ {json}` line: the inputs run of each kind, and the seed (`FUZZ_SEED` runs
//! the same inputs again).

use std::sync::mpsc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use proptest::prelude::RngExt;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use super::decode::{Decoder, Step};
use super::request_head::{check, Check};
use super::response_head::parse;
use crate::proxy::conn::lobby_differential_tests as lobby;
use crate::proxy::forward::differential_tests as client;

/// One input taking longer than this is a hang.
const HANG: Duration = Duration::from_secs(30);

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

/// Bytes that matter to an HTTP/1 parser, for mutations.
const INTERESTING: &[u8] = b"\r\n\r\n: \t;,0f9\x00\x7f\x80\xff\"#/?*";

/// `bytes` with a few random edits: bytes changed, put in or taken out, a run repeated, the end
/// cut.
fn mutate(rng: &mut TestRng, bytes: &[u8]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    for _ in 0..rng.random_range(1..5) {
        let at = rng.random_range(0..=b.len());
        match rng.random_range(0..6) {
            0 if at < b.len() => b[at] = INTERESTING[rng.random_range(0..INTERESTING.len())],
            1 => b.insert(at, INTERESTING[rng.random_range(0..INTERESTING.len())]),
            2 if at < b.len() => {
                b.remove(at);
            }
            3 if at < b.len() => b[at] = rng.random::<u8>(),
            4 => {
                let end = (at + rng.random_range(1..16)).min(b.len());
                let run = b[at..end].to_vec();
                for _ in 0..rng.random_range(1..4) {
                    b.splice(at..at, run.iter().copied());
                }
            }
            _ => b.truncate(at),
        }
    }
    b
}

/// The codec's pure parts on any bytes, at random splits: the request head at every prefix, and
/// the same bytes as a response head and its body, decoded a read at a time. Must end (each step
/// takes bytes or asks for more) and never panic.
fn pure_parts(rng: &mut TestRng, bytes: &[u8]) {
    for end in [bytes.len() / 3, bytes.len() / 2, bytes.len()] {
        let _ = check(&bytes[..end]);
    }
    if let Check::Taken(t) = check(bytes) {
        assert!(t.len <= bytes.len(), "a head longer than its bytes");
    }
    let mut buf = BytesMut::new();
    let mut rest = bytes;
    let mut head = None;
    while head.is_none() && !rest.is_empty() {
        let n = rng.random_range(1..=rest.len());
        buf.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
        match parse(&mut buf, &http::Method::GET) {
            Ok(Some(h)) => head = Some(h),
            Ok(None) => {}
            Err(_) => return,
        }
    }
    let Some(head) = head else { return };
    let mut dec = Decoder::new(head.framing);
    let mut steps = 0usize;
    loop {
        steps += 1;
        assert!(steps < 1_000_000, "the decoder went round without an end");
        let eof = rest.is_empty();
        match dec.step(&mut buf, eof) {
            Ok(Step::Data(d)) => assert!(!d.is_empty(), "empty data"),
            Ok(Step::End) | Err(_) => return,
            Ok(Step::NeedMore) if eof => panic!("more asked for after the close"),
            Ok(Step::NeedMore) => {
                let n = rng.random_range(1..=rest.len());
                buf.extend_from_slice(&rest[..n]);
                rest = &rest[n..];
            }
        }
    }
}

#[derive(Default, Debug)]
struct Counts {
    request_heads: u64,
    mutated_requests: u64,
    responses: u64,
    pure: u64,
}

/// Runs `f` on `input`, failing with the input if it panics or takes longer than [`HANG`].
fn guarded(watch: &mpsc::Sender<()>, what: &str, input: &dyn std::fmt::Debug, f: impl FnOnce()) {
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err() {
        panic!("{what} failed on {input:?}");
    }
    let _ = watch.send(());
}

#[test]
fn the_codec_neither_panics_nor_hangs_and_agrees_with_hyper_for_a_time_budget() {
    let budget = Duration::from_secs(env_u64("FUZZ_SECONDS").unwrap_or(2));
    let seed = env_u64("FUZZ_SEED").unwrap_or_else(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        now.map_or(0, |d| d.as_nanos() as u64)
    });
    eprintln!("FUZZ seed {seed} (FUZZ_SEED={seed} runs these inputs again)");
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes);
    // The watchdog: an input not done within `HANG` ends the run, with what it was.
    let (watch, done) = mpsc::channel::<()>();
    let dog = std::thread::spawn(move || loop {
        match done.recv_timeout(HANG) {
            Ok(()) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                eprintln!("FUZZ an input ran over {HANG:?}: a hang (seed {seed})");
                std::process::abort();
            }
        }
    });
    let requests = lobby::case();
    let responses = client::case();
    let mut n = Counts::default();
    let started = Instant::now();
    while started.elapsed() < budget {
        let Ok(tree) = requests.new_tree(&mut runner) else {
            break;
        };
        let c = tree.current();
        guarded(&watch, "the lobby against hyper", &c, || lobby::compare(&c));
        n.request_heads += 1;
        let m = lobby::Case {
            bytes: mutate(&mut rng, &c.bytes),
            splits: c.splits.clone(),
        };
        guarded(&watch, "the lobby against hyper (mutated)", &m, || {
            lobby::compare(&m)
        });
        n.mutated_requests += 1;
        guarded(&watch, "the codec's pure parts", &m, || {
            pure_parts(&mut rng.clone(), &m.bytes)
        });
        n.pure += 1;
        let Ok(tree) = responses.new_tree(&mut runner) else {
            break;
        };
        let r = tree.current();
        guarded(&watch, "our client against hyper's", &r, || {
            client::compare(&r)
        });
        n.responses += 1;
        let bytes: Vec<u8> = (0..r.resps.len())
            .flat_map(|i| r.pieces(i))
            .flatten()
            .collect();
        guarded(&watch, "the codec's pure parts", &bytes, || {
            pure_parts(&mut rng.clone(), &mutate(&mut rng.clone(), &bytes))
        });
        n.pure += 1;
    }
    drop(watch);
    let _ = dog.join();
    let total = n.request_heads + n.mutated_requests + n.responses + n.pure;
    println!(
        "FUZZ {{\"seconds\":{},\"seed\":{seed},\"inputs\":{total},\"request_heads\":{},\
         \"mutated_requests\":{},\"responses\":{},\"pure\":{}}}",
        started.elapsed().as_secs(),
        n.request_heads,
        n.mutated_requests,
        n.responses,
        n.pure
    );
    assert!(n.request_heads > 0 && n.responses > 0, "nothing ran: {n:?}");
}
