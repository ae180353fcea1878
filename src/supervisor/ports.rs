//! Which port each place's process listens on. Each place has its own in DEC-21's range
//! (`internalPort + n`) until a replacement started beside its process (DEC-78) takes the
//! port of a place not running (one beyond the worker count): at the switch the two places
//! swap ports, so the ports stay those of the range, one per place, and the place not running
//! starts, if it ever does, on the port the old process left.

use crate::process::ProcessSpec;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ports(Vec<u16>);

impl Ports {
    /// Each place on its own port, as the plan made them.
    pub(crate) fn new(specs: &[ProcessSpec]) -> Ports {
        Ports(specs.iter().map(|s| s.port).collect())
    }

    /// The port place `i` listens on now.
    pub(crate) fn of(&self, i: usize) -> u16 {
        self.0.get(i).copied().unwrap_or(0)
    }

    /// Places `a` and `b` exchange ports (a replacement's switch).
    pub(crate) fn swap(&mut self, a: usize, b: usize) {
        if a < self.0.len() && b < self.0.len() {
            self.0.swap(a, b);
        }
    }

    /// Place `i`'s process is known to listen on `port` (handed over by an upgrade): the place
    /// that had that port takes `i`'s.
    pub(crate) fn take_over(&mut self, i: usize, port: u16) {
        if let Some(j) = self.0.iter().position(|&p| p == port) {
            self.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swapped_and_taken_over_ports_stay_one_per_place() {
        // spec: DEC-78, DEC-21
        let mut p = Ports(vec![3000, 3001, 3002, 3003]);
        p.swap(1, 3);
        assert_eq!(p, Ports(vec![3000, 3003, 3002, 3001]));
        p.swap(1, 3);
        p.take_over(2, 3003);
        assert_eq!(p, Ports(vec![3000, 3001, 3003, 3002]));
        p.take_over(0, 9999);
        assert_eq!(p.of(0), 3000, "a port outside the range changes nothing");
        assert_eq!(p.of(9), 0);
    }
}
