//! Which of the admin listener's connections a new one takes the place of (DEC-76). The listener
//! holds at most a fixed number at once, so a crowd on a published endpoint can't take the
//! descriptors the client port and the processes need; but a cap that makes a newcomer wait
//! leaves a health check unanswered for as long as a crowd of idle or trickling connections
//! holds every place, and a launcher that answers nothing is taken for a dead one. So a
//! newcomer is always taken, and at the cap the connection idle the longest is closed for it:
//! idle is no request in progress, which a connection still sending its head, one kept alive
//! between requests, and one whose answer is being written to a client that doesn't read all
//! are. A request in progress is never cut: when every connection held has one (a crowd
//! pipelining requests can keep them all busy), the newcomer is still taken, beyond the cap, and
//! the connection held the longest is told to close once its answer is given. Those closing
//! count apart, at most as many again, so at most twice the cap are ever open; past that the
//! newcomer is closed.
//!
//! Pure: the order is a counter, not a clock. Each connection carries a handle of the shell's
//! (`T`): given back when it is to be closed at once, lent when it is to close after its answer.

use std::collections::BTreeMap;

/// A connection held.
struct Held<T> {
    /// A request of it is in progress.
    busy: bool,
    /// Told to close once its answer is given: no longer holds a place.
    closing: bool,
    /// When it was last made idle (taken, or its last answer given), as the counter stood.
    idle_since: u64,
    handle: T,
}

/// The connections held, at most `at_most`.
pub struct Room<T> {
    at_most: usize,
    /// Ids and idle-since marks, from one counter.
    tick: u64,
    held: BTreeMap<u64, Held<T>>,
}

/// A newcomer taken: its id, the handle of the connection to close at once to make room for it,
/// or the id of the one to close after its answer (its handle: [`Room::handle`]).
pub struct Taken<T> {
    pub id: u64,
    pub closed: Option<T>,
    pub finishing: Option<u64>,
}

impl<T> Room<T> {
    pub fn new(at_most: usize) -> Room<T> {
        Room {
            at_most,
            tick: 0,
            held: BTreeMap::new(),
        }
    }

    fn next(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// A new connection: taken, with the longest idle one given back to be closed when the room
    /// is full, or, when every one has a request in progress, the one held the longest told to
    /// finish; `None` (the newcomer to be closed) when as many again are finishing already.
    pub fn admit(&mut self, handle: T) -> Option<Taken<T>> {
        let (mut closed, mut finishing) = (None, None);
        let finishing_now = self.held.values().filter(|h| h.closing).count();
        if self.held.len() - finishing_now >= self.at_most {
            let oldest_idle = self
                .held
                .iter()
                .filter(|(_, h)| !h.busy)
                .min_by_key(|(_, h)| h.idle_since)
                .map(|(id, _)| *id);
            if let Some(id) = oldest_idle {
                closed = self.held.remove(&id).map(|h| h.handle);
            } else if finishing_now < self.at_most {
                // Ids grow with age: the first not closing is the one held the longest.
                let (id, h) = self.held.iter_mut().find(|(_, h)| !h.closing)?;
                h.closing = true;
                finishing = Some(*id);
            } else {
                return None;
            }
        }
        let id = self.next();
        self.held.insert(
            id,
            Held {
                busy: false,
                closing: false,
                idle_since: id,
                handle,
            },
        );
        Some(Taken {
            id,
            closed,
            finishing,
        })
    }

    /// The handle of a connection held.
    pub fn handle(&self, id: u64) -> Option<&T> {
        self.held.get(&id).map(|h| &h.handle)
    }

    /// A request of `id` has begun (its head read): it is not closed to make room until it ends.
    pub fn begin(&mut self, id: u64) {
        if let Some(h) = self.held.get_mut(&id) {
            h.busy = true;
        }
    }

    /// `id`'s request has its answer: idle from now.
    pub fn end(&mut self, id: u64) {
        let now = self.next();
        if let Some(h) = self.held.get_mut(&id) {
            h.busy = false;
            h.idle_since = now;
        }
    }

    /// `id` has closed (by itself, or made to): its place is free.
    pub fn leave(&mut self, id: u64) {
        self.held.remove(&id);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Takes newcomers named by their number; what each closed at once.
    fn admit_all(room: &mut Room<u32>, names: std::ops::Range<u32>) -> Vec<Option<u32>> {
        names
            .map(|n| room.admit(n).expect("taken").closed)
            .collect()
    }

    #[test]
    fn below_the_cap_nothing_is_closed_and_at_it_the_longest_idle_makes_room() {
        // spec: DEC-76
        let mut room = Room::new(3);
        assert_eq!(admit_all(&mut room, 0..3), [None, None, None]);
        // Full: each newcomer closes the oldest idle one, the room stays at the cap.
        assert_eq!(admit_all(&mut room, 3..5), [Some(0), Some(1)]);
        assert_eq!(room.len(), 3);
    }

    #[test]
    fn a_request_in_progress_is_never_cut_and_an_answered_one_is_idle_from_its_answer() {
        // spec: DEC-76
        let mut room = Room::new(3);
        let ids: Vec<u64> = (0..3).map(|n| room.admit(n).expect("taken").id).collect();
        // The oldest is busy: the next oldest goes.
        room.begin(ids[0]);
        assert_eq!(room.admit(10).expect("taken").closed, Some(1));
        // Its request answered, it is idle since then: younger than the others now.
        room.end(ids[0]);
        assert_eq!(room.admit(11).expect("taken").closed, Some(2));
        assert_eq!(room.admit(12).expect("taken").closed, Some(10));
        assert_eq!(room.admit(13).expect("taken").closed, Some(0));
    }

    #[test]
    fn when_every_connection_has_a_request_in_progress_the_oldest_finishes_and_the_newcomer_is_taken(
    ) {
        // spec: DEC-76
        let mut room = Room::new(2);
        let a = room.admit(0).expect("taken").id;
        let b = room.admit(1).expect("taken").id;
        room.begin(a);
        room.begin(b);
        // Beyond the cap: the one held the longest closes once answered.
        let c = room.admit(2).expect("taken");
        assert_eq!((c.closed, c.finishing), (None, Some(a)));
        assert_eq!(room.handle(a), Some(&0));
        // The newcomer, idle, makes room for the next; the finishing one counts apart.
        let d = room.admit(3).expect("taken");
        assert_eq!((d.closed, d.finishing), (Some(2), None));
        room.begin(d.id);
        let e = room.admit(4).expect("taken");
        assert_eq!((e.closed, e.finishing), (None, Some(b)));
        room.begin(e.id);
        // As many finishing as the cap: the newcomer is refused, at most twice the cap open.
        assert!(room.admit(5).is_none());
        assert_eq!(room.len(), 4);
        // A finishing one answered and still open (its client not reading) is idle: closed at
        // once for the next.
        room.end(a);
        let f = room.admit(6).expect("taken");
        assert_eq!((f.closed, f.finishing), (Some(0), None));
        // Two leave: a place without closing anyone.
        room.leave(d.id);
        room.leave(e.id);
        let g = room.admit(7).expect("taken");
        assert_eq!((g.closed, g.finishing), (None, None));
    }

    #[test]
    fn a_connection_closed_to_make_room_is_forgotten_by_its_late_calls() {
        let mut room = Room::new(1);
        let a = room.admit(0).expect("taken").id;
        let b = room.admit(1).expect("taken");
        assert_eq!(b.closed, Some(0));
        // The closed connection's task still ends its request and leaves: b is untouched.
        room.begin(a);
        room.end(a);
        room.leave(a);
        assert_eq!(room.len(), 1);
        assert_eq!(room.admit(2).expect("taken").closed, Some(1));
    }
}
