//! `LineFile` over a disk that fills after a given number of bytes (a short write, then
//! `ENOSPC`, as a full filesystem answers) and then has room again: at every offset, no line
//! is torn, every line is written or counted, and each change is said once.

use super::*;

/// A file on a disk with room for `room` bytes.
struct Disk {
    data: Vec<u8>,
    room: usize,
    interrupt_next: bool,
}

impl Disk {
    fn with_room(room: usize) -> Disk {
        Disk {
            data: Vec::new(),
            room,
            interrupt_next: false,
        }
    }
}

impl Write for Disk {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if std::mem::take(&mut self.interrupt_next) {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let free = self.room.saturating_sub(self.data.len());
        if free == 0 && !b.is_empty() {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        let n = b.len().min(free);
        self.data.extend_from_slice(&b[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn line(i: usize) -> Vec<u8> {
    // Lengths 8 to 30: lines that end at many offsets.
    format!("line {i:02} {}\n", "x".repeat(i * 7 % 23)).into_bytes()
}

/// What a reader of `data` sees: every whole line is one of `sent`, in order, each at most once,
/// and what follows the last `\n` is the beginning of a line sent after them. Returns the whole
/// lines' indexes in `sent`.
fn read(data: &[u8], sent: &[Vec<u8>]) -> Vec<usize> {
    let mut at = 0;
    let mut seen = Vec::new();
    let mut next = 0;
    while let Some(nl) = data[at..].iter().position(|&b| b == b'\n') {
        let l = &data[at..at + nl + 1];
        let i = (next..sent.len())
            .find(|&i| sent[i] == l)
            .unwrap_or_else(|| panic!("a torn line: {:?}", String::from_utf8_lossy(l)));
        seen.push(i);
        next = i + 1;
        at += nl + 1;
    }
    let tail = &data[at..];
    assert!(
        tail.is_empty() || (next..sent.len()).any(|i| sent[i].starts_with(tail)),
        "the file ends with {:?}, the beginning of no line to come",
        String::from_utf8_lossy(tail)
    );
    seen
}

#[derive(Default)]
struct Said {
    failed: Vec<io::Error>,
    recovered: Vec<u64>,
    dropped: u64,
}

impl Said {
    fn take(&mut self, w: Wrote) {
        self.dropped += w.dropped;
        match w.change {
            Some(Change::Failed(e)) => self.failed.push(e),
            Some(Change::Recovered { dropped }) => self.recovered.push(dropped),
            None => {}
        }
    }
}

#[test]
fn a_disk_full_at_every_offset_tears_no_line_and_counts_every_line_not_written() {
    let before: Vec<Vec<u8>> = (0..12).map(line).collect();
    let after: Vec<Vec<u8>> = (12..18).map(line).collect();
    let sent: Vec<Vec<u8>> = before.iter().chain(&after).cloned().collect();
    let total: usize = before.iter().map(Vec::len).sum();
    for room in 0..=total + 1 {
        let mut f = LineFile::new(Disk::with_room(room));
        let mut said = Said::default();
        for batch in before.chunks(3) {
            said.take(f.write(batch));
            read(&f.out.data, &sent);
        }
        // Room again (space freed): the begun line first, then the new ones.
        f.out.room = usize::MAX;
        for batch in after.chunks(2) {
            said.take(f.write(batch));
            read(&f.out.data, &sent);
        }
        let data = &f.out.data;
        assert_eq!(data.last(), Some(&b'\n'), "room {room}");
        let written = read(data, &sent);
        assert_eq!(
            written.len() as u64 + said.dropped,
            sent.len() as u64,
            "room {room}: written {written:?}, dropped {}",
            said.dropped
        );
        // Everything after the space was freed is written.
        assert!(written.ends_with(&[12, 13, 14, 15, 16, 17]), "room {room}");
        if room < total {
            assert_eq!(said.failed.len(), 1, "room {room}: one failure said");
            assert_eq!(said.failed[0].raw_os_error(), Some(libc::ENOSPC));
            assert_eq!(
                said.recovered,
                [said.dropped],
                "room {room}: one recovery said"
            );
        } else {
            assert!(said.failed.is_empty() && said.recovered.is_empty());
            assert_eq!(said.dropped, 0);
        }
    }
}

#[test]
fn a_line_begun_when_the_disk_filled_is_finished_by_the_next_write_even_an_empty_one() {
    let mut f = LineFile::new(Disk::with_room(5));
    let l = line(3);
    let w = f.write(std::slice::from_ref(&l));
    assert_eq!(w.dropped, 0, "begun, not dropped");
    assert!(matches!(w.change, Some(Change::Failed(_))));
    // Still full: nothing changes, nothing is said again.
    let w = f.write::<&[u8]>(&[]);
    assert!(w.change.is_none() && w.dropped == 0);
    assert_eq!(f.out.data, l[..5]);
    f.out.room = usize::MAX;
    // The writer's tick: no new line, the begun one finished.
    let w = f.write::<&[u8]>(&[]);
    assert!(matches!(w.change, Some(Change::Recovered { dropped: 0 })));
    assert_eq!(f.out.data, l);
    // Nothing begun and nothing failing: an empty write writes nothing and says nothing.
    assert!(f.write(&[Vec::new()]).change.is_none());
}

#[test]
fn an_interrupted_write_is_retried_and_loses_nothing() {
    let mut f = LineFile::new(Disk::with_room(usize::MAX));
    f.out.interrupt_next = true;
    let w = f.write(&[line(1), line(2)]);
    assert!(w.change.is_none() && w.dropped == 0);
    assert_eq!(f.out.data, [line(1), line(2)].concat());
}

#[test]
fn a_file_replaced_with_a_line_begun_gives_the_bytes_to_cut_and_counts_the_line() {
    let mut f = LineFile::new(Disk::with_room(line(0).len() + 4));
    let mut said = Said::default();
    said.take(f.write(&[line(0), line(1), line(2)]));
    assert_eq!(said.dropped, 1, "line 2 dropped, line 1 begun");
    let (old, torn) = f.replace(Disk::with_room(usize::MAX));
    assert_eq!(torn, 4);
    assert_eq!(
        old.data.len() - torn,
        line(0).len(),
        "cut, it ends with line 0"
    );
    said.take(f.write(&[line(3)]));
    // Line 1, begun in the old file and cut off it, counts with the outage's drops.
    assert_eq!(said.recovered, [2]);
    assert_eq!(f.out.data, line(3));
    // Replaced with nothing begun: nothing to cut.
    assert_eq!(f.replace(Disk::with_room(9)).1, 0);
}
