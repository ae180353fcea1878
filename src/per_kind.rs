//! Values kept per variant of a small enum and indexed by the variant, never by a position: the
//! front door's counters (per lane, per route, per kind of loss) and the tally the status keeper
//! reads from them share the enums, so neither side decodes what the other meant by `[1]`.

use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

/// A fieldless enum whose variants index a [`PerKind`].
pub(crate) trait Kind: Copy + 'static {
    /// Every variant, in the order of their indexes.
    const ALL: &'static [Self];
    /// The variant's index, `0..ALL.len()`.
    fn index(self) -> usize;
}

/// One `T` per variant of `K` (`N` is how many variants `K` has; checked when one is made).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PerKind<K, T, const N: usize> {
    values: [T; N],
    kind: PhantomData<K>,
}

impl<K: Kind, T, const N: usize> PerKind<K, T, N> {
    pub(crate) fn from_fn(mut f: impl FnMut(K) -> T) -> Self {
        const { assert!(K::ALL.len() == N, "N is not the number of K's variants") };
        PerKind {
            values: std::array::from_fn(|i| f(K::ALL[i])),
            kind: PhantomData,
        }
    }

    /// Each variant with its value, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (K, &T)> + '_ {
        K::ALL.iter().copied().zip(&self.values)
    }

    /// A value per variant made from this one's.
    pub(crate) fn map<U>(&self, mut f: impl FnMut(&T) -> U) -> PerKind<K, U, N> {
        PerKind::from_fn(|k| f(&self[k]))
    }
}

impl<K: Kind, T: Default, const N: usize> Default for PerKind<K, T, N> {
    fn default() -> Self {
        PerKind::from_fn(|_| T::default())
    }
}

impl<K: Kind, T, const N: usize> Index<K> for PerKind<K, T, N> {
    type Output = T;

    fn index(&self, k: K) -> &T {
        &self.values[k.index()]
    }
}

impl<K: Kind, T, const N: usize> IndexMut<K> for PerKind<K, T, N> {
    fn index_mut(&mut self, k: K) -> &mut T {
        &mut self.values[k.index()]
    }
}

/// Checks that `K::ALL` lists each variant at its index (for each `Kind`'s own test).
#[cfg(test)]
pub(crate) fn assert_in_order<K: Kind + std::fmt::Debug>() {
    for (i, k) in K::ALL.iter().enumerate() {
        assert_eq!(k.index(), i, "{k:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Colour {
        Red,
        Green,
    }

    impl Kind for Colour {
        const ALL: &'static [Colour] = &[Colour::Red, Colour::Green];
        fn index(self) -> usize {
            self as usize
        }
    }

    #[test]
    fn values_are_found_by_their_variant() {
        assert_in_order::<Colour>();
        let mut p: PerKind<Colour, u64, 2> = PerKind::default();
        p[Colour::Green] += 3;
        assert_eq!(p[Colour::Red], 0);
        assert_eq!(p.map(|v| v * 2)[Colour::Green], 6);
        let all: Vec<(Colour, u64)> = p.iter().map(|(k, v)| (k, *v)).collect();
        assert_eq!(all, [(Colour::Red, 0), (Colour::Green, 3)]);
    }
}
