use super::*;

/// Feeds `stream` in pieces of `piece` bytes, as `ParkIo` does (bytes not passed are kept and
/// grown); what was passed, and whether a refusal stopped it.
fn run(stream: &[u8], piece: usize) -> (usize, bool) {
    let mut f = Framer::new(16 * 1024);
    let (mut passed, mut held) = (0usize, 0usize);
    let mut arrived = 0usize;
    loop {
        match f.step(&stream[passed..passed + held]) {
            Step::Pass(n) => {
                assert!(n > 0 && n <= held, "{n} of {held}");
                passed += n;
                held -= n;
            }
            Step::Refuse => return (passed, true),
            Step::Wait if arrived == stream.len() => return (passed, false),
            Step::Wait => {
                let k = piece.min(stream.len() - arrived);
                arrived += k;
                held += k;
            }
        }
    }
}

const GET: &str = "GET /r4/metadata HTTP/1.1\r\nHost: a\r\n\r\n";
const BAD: &str = "GET /r4/metadata?q=\"x\" HTTP/1.1\r\nHost: a\r\n\r\n";

#[test]
fn pipelined_requests_pass_whole_and_a_bad_head_is_kept_back_in_any_pieces() {
    // spec: DEC-38
    let post = "POST /r4/x HTTP/1.1\r\nHost: a\r\nContent-Length: 7\r\n\r\nGET /x ";
    let chunked = "POST /r4/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
                   5;ext=1\r\nGET /\r\n3 \r\n\"<>\r\n0\r\nX-T: \"\r\n\r\n";
    let good = format!("{GET}{post}{chunked}{GET}");
    let with_bad = format!("{good}{BAD}{GET}");
    for piece in [1, 2, 3, 7, 64, 100_000] {
        assert_eq!(run(good.as_bytes(), piece), (good.len(), false), "{piece}");
        assert_eq!(
            run(with_bad.as_bytes(), piece),
            (good.len(), true),
            "piece {piece}"
        );
    }
}

#[test]
fn after_the_last_request_or_a_body_hyper_refuses_everything_passes() {
    let close = format!("GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n{BAD}");
    assert_eq!(run(close.as_bytes(), 5), (close.len(), false));
    let broken =
        format!("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{BAD}");
    assert_eq!(run(broken.as_bytes(), 5), (broken.len(), false));
}

#[test]
fn a_head_never_whole_is_refused_at_max_head() {
    let endless = format!("GET /x HTTP/1.1\r\nHost: a\r\n{}", "X: y\r\n".repeat(4000));
    let (passed, refused) = run(endless.as_bytes(), 1000);
    assert_eq!((passed, refused), (0, true));
    let mut f = Framer::new(16 * 1024);
    assert_eq!(f.step(b"GET /x HTTP/1.1\r\n"), Step::Wait);
}

#[test]
fn chunk_sizes_that_overflow_are_hypers_to_refuse() {
    let huge = format!(
        "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n{}\r\n",
        "f".repeat(17)
    );
    let mut f = Framer::new(16 * 1024);
    let head = huge.find("\r\n\r\n").map_or(0, |i| i + 4);
    assert_eq!(f.step(huge.as_bytes()), Step::Pass(head));
    assert_eq!(
        f.step(&huge.as_bytes()[head..]),
        Step::Pass(huge.len() - head)
    );
    assert!(matches!(f.state, State::Done));
}
