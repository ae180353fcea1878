//! The control socket's connections, capped (DEC-72): at most
//! [`CONTROL_AT_MOST`](crate::proxy::conn_limit::CONTROL_AT_MOST) open at once, counted in
//! the descriptors the launcher keeps for itself (DEC-54). A connection over the cap makes room
//! by closing the oldest one that has not yet sent its request line (a client stuck or idle:
//! `fhircluster` sends its line at once); when every one is at work on an action (a `restart`
//! waits for the rolling restart), the newcomer is answered with a refusal and closed. So idle
//! connections can neither hold the launcher's descriptors nor keep `fhircluster status` or
//! `upgrade` out. Pure: which connection to close; the shell closes it.

use std::collections::VecDeque;

/// What becomes of a connection just accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Served, as this id.
    In(u64),
    /// Served as `id`, once `close` (the oldest still waiting for its line) is closed.
    InClosing { id: u64, close: u64 },
    /// Every connection is at work on an action: refused, closed at once.
    Refused,
}

/// The connections open, oldest first, each with whether it has sent its request line.
#[derive(Debug)]
pub(crate) struct Conns {
    at_most: usize,
    next: u64,
    open: VecDeque<(u64, bool)>,
}

impl Conns {
    pub(crate) fn new(at_most: usize) -> Conns {
        Conns {
            at_most: at_most.max(1),
            next: 0,
            open: VecDeque::new(),
        }
    }

    pub(crate) fn admit(&mut self) -> Admit {
        let id = self.next;
        if self.open.len() < self.at_most {
            self.next += 1;
            self.open.push_back((id, false));
            return Admit::In(id);
        }
        let Some(i) = self.open.iter().position(|&(_, heard)| !heard) else {
            return Admit::Refused;
        };
        let (close, _) = self.open.remove(i).unwrap_or((id, false));
        self.next += 1;
        self.open.push_back((id, false));
        Admit::InClosing { id, close }
    }

    /// Its request line has come: at work from now on, never closed to make room.
    pub(crate) fn heard(&mut self, id: u64) {
        if let Some(c) = self.open.iter_mut().find(|(i, _)| *i == id) {
            c.1 = true;
        }
    }

    pub(crate) fn gone(&mut self, id: u64) {
        self.open.retain(|&(i, _)| i != id);
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_the_cap_the_oldest_waiting_one_makes_room() {
        // spec: DEC-72
        let mut c = Conns::new(3);
        assert_eq!(c.admit(), Admit::In(0));
        assert_eq!(c.admit(), Admit::In(1));
        assert_eq!(c.admit(), Admit::In(2));
        c.heard(0);
        assert_eq!(c.admit(), Admit::InClosing { id: 3, close: 1 });
        assert_eq!(c.admit(), Admit::InClosing { id: 4, close: 2 });
        assert_eq!(c.len(), 3);
        c.heard(3);
        c.heard(4);
        // Every one at work: refused, nothing closed.
        assert_eq!(c.admit(), Admit::Refused);
        assert_eq!(c.len(), 3);
        c.gone(0);
        assert_eq!(c.admit(), Admit::In(5));
    }

    #[test]
    fn never_more_than_the_cap_whatever_comes() {
        // spec: DEC-72
        let mut c = Conns::new(4);
        for n in 0..1_000u64 {
            match c.admit() {
                Admit::In(id) | Admit::InClosing { id, .. } if n % 3 == 0 => c.heard(id),
                Admit::In(id) | Admit::InClosing { id, .. } if n % 7 == 0 => c.gone(id),
                _ => {}
            }
            assert!(c.len() <= 4, "{n}");
        }
        assert_eq!(Conns::new(0).admit(), Admit::In(0));
    }
}
