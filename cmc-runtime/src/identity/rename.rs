//! Renaming process identifiers while hashing: the ground of symmetry
//! reduction.
//!
//! When some processes of a model are interchangeable (three replicas that
//! run the same code and differ only in their names), a state and its image
//! under a permutation of those processes behave alike, and a reduced
//! search counts them once, by the smallest fingerprint of the state's
//! images. An image is never built: its fingerprint is the state's own,
//! hashed while a [`Renaming`] is active on the thread. Then
//!
//! * every process identifier a value hashes through
//!   [`StateHasher::write_process_id`](crate::identity::hasher::StateHasher::write_process_id)
//!   (the `StateHash` that `#[derive(cmc::ProcessId)]` writes for an
//!   identifier type) is written as the identifier of the process the
//!   permutation sends it to; a value that names no process (a "none" or a
//!   client's identifier) is written as it is;
//! * the ordered collections of the standard library (`BTreeMap`,
//!   `BTreeSet`) hash as sets of their entries, since the image holds the
//!   renamed keys in another order.
//!
//! So the hash of a value under a renaming is the hash of the renamed value
//! under the identity renaming: `tests` checks it against values renamed
//! by hand. What is hashed with no renaming active (every model that
//! declares no symmetry) is unchanged.

use std::cell::Cell;

use crate::identity::hasher::StateHasher;

impl StateHasher {
    /// Writes the identifier of a process (what `#[derive(cmc::ProcessId)]`
    /// hashes an identifier type by): under a renaming of interchangeable
    /// processes, the identifier of the process it is renamed to.
    #[inline]
    pub fn write_process_id(&mut self, id: u64) {
        self.0.word(rename(id))
    }

    /// Whether process identifiers are being renamed (the search reduces
    /// by a declared symmetry): a type that holds identifiers in a form
    /// the renaming cannot see — a packet's bytes, process indices — hashes
    /// them as identifiers then (its decoded message; the identifiers of
    /// those processes), and as it always did otherwise.
    #[inline]
    pub fn renaming(&self) -> bool {
        active()
    }

    /// `id` as the active renaming writes it (not counted as written):
    /// for showing what a hash wrote.
    pub(crate) fn renamed_id(&self, id: u64) -> u64 {
        peek(id)
    }
}

/// A type that names processes: `#[derive(cmc::ProcessId)]` on a newtype
/// of an integer (`struct NodeId(u64)`). Its `StateHash` writes the value
/// through [`StateHasher::write_process_id`], so that a model that declares
/// processes interchangeable ([`Model::interchangeable`](crate::Model::interchangeable)) renames it
/// wherever a state holds it: in processes, messages, shared variables,
/// and the keys of maps and sets.
///
/// Identifiers may be compared for equality and used as keys; what a
/// process does must not depend on their order or value (`--check-symmetry`
/// checks that it does not).
pub trait ProcessId: crate::identity::StateHash {
    /// The identifier as a number (distinct identifiers, distinct numbers).
    fn process_id(&self) -> u64;
}

/// What names a process in [`Model::interchangeable`](crate::Model::interchangeable):
/// a [`ProcessId`] type, or a plain integer, whose places in the state
/// [`Model::ids_in`](crate::Model::ids_in) names.
pub trait Identifier {
    /// Whether it is a plain integer.
    const PLAIN: bool;
    /// The identifier as a number.
    fn number(&self) -> u64;
}

impl<T: ProcessId> Identifier for T {
    const PLAIN: bool = false;
    fn number(&self) -> u64 {
        self.process_id()
    }
}

macro_rules! plain_ids {
    ($($t:ty),*) => {$(
        impl Identifier for $t {
            const PLAIN: bool = true;
            fn number(&self) -> u64 {
                *self as u64
            }
        }
    )*};
}

plain_ids!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

/// The integer types a `ProcessId` newtype may wrap, as the number its
/// identifier is written as.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "a `cmc::ProcessId` wraps an integer, not `{Self}`",
    label = "not an integer"
)]
pub trait IdWord: Copy {
    fn id_word(self) -> u64;
}

macro_rules! id_words {
    ($($t:ty),*) => {$(
        impl IdWord for $t {
            #[inline]
            fn id_word(self) -> u64 {
                self as u64
            }
        }
    )*};
}

id_words!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize);

/// A permutation of a model's interchangeable processes, with the
/// identifier each has: hashing under it writes the identifier of the
/// process at position `i` as that of the process at position `perm[i]`.
/// Or the *masked* renaming, which writes every one of those identifiers
/// as the same value: a hash under it is the same for a state and all its
/// images.
#[derive(Clone, Debug)]
pub struct Renaming {
    /// (identifier, what it is written as), sorted by identifier.
    map: Vec<(u64, u64)>,
    /// Position `i` is renamed `perm[i]` (empty when masked).
    perm: Vec<usize>,
}

/// What the masked renaming writes every identifier as.
const MASKED: u64 = 0x6d61_736b_6564_5f69;

impl Renaming {
    /// The renaming of the process at position `i` to the one at `perm[i]`,
    /// where the identifier of the one at position `i` is `ids[i]`.
    ///
    /// # Panics
    /// When `perm` is not a permutation of `0..ids.len()`, or two processes
    /// have the same identifier.
    pub fn new(ids: Vec<u64>, perm: Vec<usize>) -> Renaming {
        assert_eq!(
            ids.len(),
            perm.len(),
            "a renaming permutes every process: {} identifiers, a permutation of {}",
            ids.len(),
            perm.len()
        );
        let mut seen = vec![false; perm.len()];
        for &p in &perm {
            assert!(
                p < perm.len() && !std::mem::replace(&mut seen[p], true),
                "{perm:?} is not a permutation of 0..{}",
                perm.len()
            );
        }
        let map = Self::sorted(ids.iter().zip(&perm).map(|(&id, &p)| (id, ids[p])));
        Renaming { map, perm }
    }

    /// The renaming that writes every identifier of `ids` as one value.
    ///
    /// # Panics
    /// When two processes have the same identifier.
    pub fn masked(ids: &[u64]) -> Renaming {
        let map = Self::sorted(ids.iter().map(|&id| (id, MASKED)));
        Renaming {
            map,
            perm: Vec::new(),
        }
    }

    /// The renaming that writes the identifier at position `i` of `ids` as
    /// one value and all the others as another: a hash under it tells
    /// where that process's identifier is, and is the same for the
    /// process's image under every renaming.
    pub fn singled(ids: &[u64], i: usize) -> Renaming {
        let map = Self::sorted(
            ids.iter()
                .enumerate()
                .map(|(k, &id)| (id, if k == i { !MASKED } else { MASKED })),
        );
        Renaming {
            map,
            perm: Vec::new(),
        }
    }

    fn sorted(pairs: impl Iterator<Item = (u64, u64)>) -> Vec<(u64, u64)> {
        let mut map: Vec<(u64, u64)> = pairs.collect();
        map.sort_unstable();
        assert!(
            map.windows(2).all(|w| w[0].0 != w[1].0),
            "two processes have the same identifier: {:?}",
            map.iter().map(|p| p.0).collect::<Vec<_>>()
        );
        map
    }

    /// The identity renaming of processes with identifiers `ids`.
    pub fn identity(ids: Vec<u64>) -> Renaming {
        let n = ids.len();
        Renaming::new(ids, (0..n).collect())
    }

    /// The permutation: position `i` becomes `perm()[i]` (empty when
    /// masked).
    pub fn perm(&self) -> &[usize] {
        &self.perm
    }

    /// The identifier `id` renamed: that of the process the permutation
    /// sends its process to, or `id` itself when it names no process.
    #[inline]
    pub fn rename(&self, id: u64) -> u64 {
        match self.map.binary_search_by_key(&id, |&(v, _)| v) {
            Ok(at) => self.map[at].1,
            Err(_) => id,
        }
    }

    /// Whether it moves no process.
    pub fn is_identity(&self) -> bool {
        self.map.iter().all(|&(a, b)| a == b)
    }
}

thread_local! {
    /// The renaming hashes on this thread are computed under, or null.
    static ACTIVE: Cell<*const Renaming> = const { Cell::new(std::ptr::null()) };
    /// How many identifiers were written under a renaming on this thread.
    static WRITTEN: Cell<u64> = const { Cell::new(0) };
}

/// Runs `f` with `renaming` active on this thread (see the module
/// documentation), and the previous one (usually none) active again
/// afterwards, also when `f` unwinds.
pub fn hashing_renamed<R>(renaming: &Renaming, f: impl FnOnce() -> R) -> R {
    struct Restore(*const Renaming);
    impl Drop for Restore {
        fn drop(&mut self) {
            ACTIVE.with(|a| a.set(self.0));
        }
    }
    let previous = ACTIVE.with(|a| a.replace(renaming));
    let _restore = Restore(previous);
    f()
}

/// How many process identifiers were written under a renaming on this
/// thread so far: a value whose hash writes none is its own image under
/// every renaming.
pub(crate) fn ids_written() -> u64 {
    WRITTEN.with(Cell::get)
}

/// Whether a renaming is active: ordered collections then hash as sets.
#[inline]
pub(crate) fn active() -> bool {
    ACTIVE.with(|a| !a.get().is_null())
}

/// `id` under the active renaming (or `id`), not counted as written: for
/// showing what a hash wrote.
pub(crate) fn peek(id: u64) -> u64 {
    ACTIVE
        .with(|a| {
            let r = a.get();
            // SAFETY: as in `rename`.
            (!r.is_null()).then(|| unsafe { &*r }.rename(id))
        })
        .unwrap_or(id)
}

/// `id` under the active renaming, or `id` when none is active.
#[inline]
pub(crate) fn rename(id: u64) -> u64 {
    ACTIVE.with(|a| {
        let r = a.get();
        if r.is_null() {
            id
        } else {
            WRITTEN.with(|w| w.set(w.get() + 1));
            // SAFETY: a non-null pointer was set by `hashing_renamed` from a
            // reference that outlives the call of `f` during which it is
            // set, and is reset before that call returns or unwinds.
            unsafe { &*r }.rename(id)
        }
    })
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::identity::{fingerprint, StateHash};

    /// A process identifier, hashed as one (what the derive writes).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
    struct Id(u64);

    impl StateHash for Id {
        fn state_hash(&self, h: &mut StateHasher) {
            h.write_process_id(self.0);
        }
    }

    /// A replica's state with identifiers everywhere a protocol keeps them.
    #[derive(Clone, Debug, PartialEq)]
    struct Replica {
        me: Id,
        leader: Option<Id>,
        votes: BTreeSet<Id>,
        next_index: BTreeMap<Id, u32>,
        acked: HashMap<Id, bool>,
        log: Vec<(u32, Id)>,
        inbox: VecDeque<(Id, u8)>,
        term: u32,
    }

    impl StateHash for Replica {
        fn state_hash(&self, h: &mut StateHasher) {
            self.me.state_hash(h);
            self.leader.state_hash(h);
            self.votes.state_hash(h);
            self.next_index.state_hash(h);
            self.acked.state_hash(h);
            self.log.state_hash(h);
            self.inbox.state_hash(h);
            self.term.state_hash(h);
        }
    }

    /// The replica with every identifier renamed by hand.
    fn renamed(r: &Replica, f: &dyn Fn(Id) -> Id) -> Replica {
        Replica {
            me: f(r.me),
            leader: r.leader.map(f),
            votes: r.votes.iter().map(|&i| f(i)).collect(),
            next_index: r.next_index.iter().map(|(&i, &n)| (f(i), n)).collect(),
            acked: r.acked.iter().map(|(&i, &b)| (f(i), b)).collect(),
            log: r.log.iter().map(|&(t, i)| (t, f(i))).collect(),
            inbox: r.inbox.iter().map(|&(i, m)| (f(i), m)).collect(),
            term: r.term,
        }
    }

    /// Identifiers 10, 20, ..., and 0 (which names no process).
    fn random_replica(rng: &mut StdRng, n: usize) -> Replica {
        let id = |rng: &mut StdRng| Id(rng.gen_range(0..=n as u64) * 10);
        let k = rng.gen_range(0..4);
        Replica {
            me: id(rng),
            leader: rng.gen_bool(0.5).then(|| id(rng)),
            votes: (0..k).map(|_| id(rng)).collect(),
            next_index: (0..k).map(|_| (id(rng), rng.gen_range(0..3))).collect(),
            acked: (0..k).map(|_| (id(rng), rng.gen_bool(0.5))).collect(),
            log: (0..k).map(|_| (rng.gen_range(0..3), id(rng))).collect(),
            inbox: (0..k).map(|_| (id(rng), rng.gen_range(0..2))).collect(),
            term: rng.gen_range(0..3),
        }
    }

    fn under<T: StateHash>(r: &Renaming, value: &T) -> u128 {
        hashing_renamed(r, || fingerprint(value))
    }

    #[test]
    fn a_value_hashed_under_a_renaming_is_its_renamed_copy() {
        let mut rng = StdRng::seed_from_u64(7);
        for n in 1..=5 {
            let ids: Vec<u64> = (1..=n as u64).map(|i| i * 10).collect();
            let identity = Renaming::identity(ids.clone());
            for _ in 0..200 {
                let value = random_replica(&mut rng, n);
                let mut perm: Vec<usize> = (0..n).collect();
                for i in (1..n).rev() {
                    perm.swap(i, rng.gen_range(0..=i));
                }
                let r = Renaming::new(ids.clone(), perm);
                let copy = renamed(&value, &|Id(v)| Id(r.rename(v)));
                assert_eq!(
                    under(&r, &value),
                    under(&identity, &copy),
                    "{value:?} under {:?}",
                    r.perm()
                );
            }
        }
    }

    #[test]
    fn renamings_tell_different_values_apart() {
        let ids = vec![10, 20, 30];
        let identity = Renaming::identity(ids.clone());
        let mut rng = StdRng::seed_from_u64(3);
        let mut distinct = 0;
        for _ in 0..300 {
            let (a, b) = (random_replica(&mut rng, 3), random_replica(&mut rng, 3));
            if a != b {
                distinct += 1;
                assert_ne!(
                    under(&identity, &a),
                    under(&identity, &b),
                    "{a:?} and {b:?}"
                );
            }
        }
        assert!(distinct > 200);
    }

    #[test]
    fn identifiers_that_name_no_process_stay() {
        let r = Renaming::new(vec![10, 20, 30], vec![2, 0, 1]);
        assert_eq!((r.rename(10), r.rename(20), r.rename(30)), (30, 10, 20));
        assert_eq!((r.rename(0), r.rename(15)), (0, 15));
        assert!(!r.is_identity());
        assert!(Renaming::identity(vec![4, 5]).is_identity());
    }

    #[test]
    fn without_a_renaming_nothing_changes() {
        let value = Replica {
            me: Id(10),
            leader: None,
            votes: BTreeSet::from([Id(20), Id(10)]),
            next_index: BTreeMap::new(),
            acked: HashMap::new(),
            log: vec![(1, Id(20))],
            inbox: VecDeque::new(),
            term: 1,
        };
        assert!(!active());
        let plain = fingerprint(&value);
        // The identity renaming hashes the ordered set as a set: another
        // fingerprint, the same for every order.
        let r = Renaming::identity(vec![10, 20]);
        assert_ne!(under(&r, &value), plain);
        assert_eq!(fingerprint(&value), plain);
        assert!(!active());
    }

    #[test]
    fn the_masked_hash_is_the_same_for_every_image() {
        let mut rng = StdRng::seed_from_u64(11);
        let ids = vec![10, 20, 30, 40];
        let masked = Renaming::masked(&ids);
        for _ in 0..200 {
            let value = random_replica(&mut rng, 4);
            let mut perm: Vec<usize> = (0..4).collect();
            for i in (1..4).rev() {
                perm.swap(i, rng.gen_range(0..=i));
            }
            let r = Renaming::new(ids.clone(), perm);
            let copy = renamed(&value, &|Id(v)| Id(r.rename(v)));
            assert_eq!(under(&masked, &value), under(&masked, &copy), "{value:?}");
        }
    }

    #[test]
    fn identifiers_written_are_counted() {
        let r = Renaming::identity(vec![1, 2]);
        let before = ids_written();
        under(&r, &(Id(1), 5u32, Id(7)));
        assert_eq!(ids_written() - before, 2);
        fingerprint(&Id(1));
        assert_eq!(ids_written() - before, 2, "not counted without a renaming");
    }

    #[test]
    #[should_panic(expected = "is not a permutation")]
    fn a_renaming_must_be_a_permutation() {
        Renaming::new(vec![1, 2, 3], vec![0, 0, 1]);
    }

    #[test]
    #[should_panic(expected = "the same identifier")]
    fn identifiers_must_differ() {
        Renaming::identity(vec![1, 1]);
    }

    #[test]
    fn the_renaming_ends_when_the_hash_panics() {
        let r = Renaming::identity(vec![1]);
        let caught = std::panic::catch_unwind(|| hashing_renamed(&r, || panic!("in a hash")));
        assert!(caught.is_err());
        assert!(!active());
    }
}
