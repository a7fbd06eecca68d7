//! The transition cache: what a transition did to the fingerprint, keyed by
//! everything the transition could read, so that running it again from
//! another state that agrees on all of that needs no run at all when its
//! successor turns out to be known.
//!
//! A handler of process `p`, run from a state in which no arena points
//! into another (`Memory::isolated`), can read and write only `p`'s arena
//! and the environment's (its `Ctx` reaches nothing else, and every pointer
//! it can follow stays inside the arenas it started from). What it does is
//! a function of those two arenas' bytes, the event, the choice script and
//! the random-seed variant — as long as it draws no randomness (whose seed
//! comes from the whole state, `determinism::random`), so a run that drew is
//! never cached. The bytes of an arena are named by a hash of its table's
//! sum (the 128-bit sum of its page hashes, a content hash like the
//! fingerprint itself) and its index, kept with the table
//! (`Memory::arena_key`); see [`Prefix`] for how keys combine them. The
//! successor's fingerprint sum differs from the pre-state's by
//! the change of those two arenas' components, which the same bytes
//! determine: that difference, and the choices the run offered (the search
//! enumerates the scripts from them), are what an entry keeps.
//!
//! The search asks the cache before a run: on a hit whose successor is
//! already visited, the transition is counted and nothing else happens (no
//! restore, no run, no comparison of pages). On a miss the transition runs
//! as always, and a clean run is then recorded. When that run's successor
//! was new (and so captured) and differs from the pre-state in those two
//! arenas only, the entry also keeps their tables, the successor's stored
//! contents (the same argument: they are a function of the key): a later
//! hit whose successor is new builds it from them (`Memory::derive`)
//! instead of running the handler, fingerprinting and capturing what it
//! wrote. A hit whose successor is new and whose entry has no tables runs. The cache is a fixed-size table that grows by doubling up to
//! [`BYTES`] and then overwrites: its memory is bounded whatever the
//! search's length.

use crate::memory::TableId;
use crate::sys::hash::FoldStream;

/// The bytes a search's cache may grow to. Searches are depth-first or
/// breadth-first sweeps whose nearby states share most of their processes,
/// so a small cache answers nearly as often as an unbounded one (two-phase
/// commit with 8 RMs, depth-first: 4.9 s of CPU with 64 KiB, 5.0 s with
/// 64 MiB, 9.1 s without a cache), and a small one keeps memory per
/// state where it was. With 7 RMs, depth-first, the transitions that
/// still run: 74,000 with 64 KiB, 57,000 with 256 KiB, 44,000 with 1 MiB,
/// 42,000 (the first meetings) with 4 MiB; 256 KiB is the most that stays
/// in a core's second-level cache here, and costs 0.7 bytes per state of
/// that search.
pub(crate) const BYTES: usize = 1 << 18;

/// Entries that may hold their successor's tables at once: the pages
/// they keep alive are memory the search would not otherwise hold, and a
/// depth-first search builds most new successors from recent entries
/// (two-phase commit with 7 RMs: 258,000 of 296,000 states with 32,
/// 264,000 with 64, 273,000 with no bound).
pub(crate) const MAX_ATTACHED: usize = 64;

/// Slots the table starts with.
const MIN_SLOTS: usize = 1 << 10;

/// Slots per bucket: a key lives in one of the four slots of its bucket.
const WAYS: usize = 4;

/// Choices an entry can hold; a run that offered more is not cached.
const MAX_CHOICES: usize = 2;

#[derive(Clone, Copy, Default)]
struct Slot {
    /// The key, as two words (an entry is 56 bytes); 0 for an empty slot
    /// (a key that hashes to 0 is not cached).
    key: [u64; 2],
    /// The successor's fingerprint sum minus the pre-state's.
    delta: [u64; 2],
    /// The choices the run took, as (value, range).
    choices: [(u16, u16); MAX_CHOICES],
    len: u8,
    /// Whether `tables` holds the successor's tables.
    has_tables: bool,
    /// The successor's tables of the process's arena (unused for an
    /// environment event) and the environment's, each with a reference
    /// the cache holds (see [`TransitionCache::attach`]).
    tables: [u32; 2],
}

fn split(x: u128) -> [u64; 2] {
    [x as u64, (x >> 64) as u64]
}

fn join(x: [u64; 2]) -> u128 {
    u128::from(x[0]) | (u128::from(x[1]) << 64)
}

/// What the keys of one process's events (and of its guards) in one
/// state come from: the contents of its arena and the environment's, the
/// arenas its code can read, each named by a 128-bit hash of the arena and
/// its contents (`Memory::arena_key`; the arena says which process). It
/// is the exclusive or of the two, the environment's rotated (so that
/// the pair is ordered); the environment's own events use a constant for
/// the missing arena. It is the guard cache's key; an event's key is it
/// combined with the event's own hash (see [`TransitionCache::event_key`]).
/// Keys built by exclusive or from independent hashes are equal for
/// different inputs only if those hashes happen to cancel, as likely as
/// any collision of 128-bit hashes.
#[derive(Clone, Copy)]
pub(crate) struct Prefix(u128);

/// What stands for the process arena in the prefix of environment events.
const NO_ARENA: u128 = 0x6a09_e667_f3bc_c908_b2fb_1366_ea95_7d3b;

impl Prefix {
    /// The prefix of a process with these arena keys (`own` is `None` for
    /// the environment).
    pub(crate) fn new(own: Option<u128>, env: u128) -> Self {
        Prefix(own.unwrap_or(NO_ARENA) ^ env.rotate_left(64))
    }
}

/// What an entry says about a transition: a fact about its key, true
/// whatever later happens to the entry.
#[derive(Clone, Copy)]
pub(crate) struct Fact {
    /// The successor's fingerprint sum minus the pre-state's.
    pub(crate) delta: u128,
    choices: [(u16, u16); MAX_CHOICES],
    len: u8,
    /// The entry's tables when it was read, and the cache's generation
    /// then: they are still the entry's while the generation is (see
    /// [`TransitionCache::tables_now`]).
    tables: Option<[TableId; 2]>,
    generation: u64,
}

impl Fact {
    /// The choices the run took, as (value, range).
    pub(crate) fn choices(&self) -> Vec<(usize, usize)> {
        if self.len == 0 {
            return Vec::new();
        }
        self.choices[..usize::from(self.len)]
            .iter()
            .map(|&(v, n)| (usize::from(v), usize::from(n)))
            .collect()
    }
}

/// The cache (see the module documentation).
pub(crate) struct TransitionCache {
    slots: Vec<Slot>,
    /// The most slots the table may grow to.
    max_slots: usize,
    filled: usize,
    /// The keys of the entries given tables, oldest first (one may have
    /// been overwritten since): at most `max_attached` entries hold tables,
    /// whose pages the cache keeps alive.
    attached: std::collections::VecDeque<[u64; 2]>,
    max_attached: usize,
    /// Counts the changes that may move or drop an entry's tables.
    generation: u64,
}

impl TransitionCache {
    /// A cache of at most `max_bytes` (at least one bucket).
    pub(crate) fn new(max_bytes: usize) -> Self {
        let fit = (max_bytes / size_of::<Slot>()).max(WAYS);
        // The largest power of two that fits.
        let max_slots = 1 << (usize::BITS - 1 - fit.leading_zeros());
        TransitionCache {
            slots: vec![Slot::default(); MIN_SLOTS.min(max_slots)],
            max_slots,
            filled: 0,
            attached: std::collections::VecDeque::new(),
            max_attached: MAX_ATTACHED,
            generation: 0,
        }
    }

    /// Bytes of checker memory its table takes.
    pub(crate) fn bytes(&self) -> usize {
        self.slots.capacity() * size_of::<Slot>()
    }

    /// The key of a transition: the event, the choice script, the
    /// random-seed variant, and the keys of the arenas it can read.
    #[cfg(test)]
    pub(crate) fn key(handler: usize, script: &[usize], seed: u32, arenas: [u128; 2]) -> u128 {
        Self::event_key(
            &Prefix::new(Some(arenas[0]), arenas[1]),
            Self::event_hash(handler, script, seed),
        )
    }

    /// [`TransitionCache::key`] from the part all events of the process
    /// share in one state and the event's own hash
    /// ([`TransitionCache::event_hash`]). Two keys are the same only if
    /// the prefixes differ exactly as the event hashes do: both are
    /// 128-bit hashes, so that is as likely as any other collision of
    /// them.
    pub(crate) fn event_key(prefix: &Prefix, event_hash: u128) -> u128 {
        prefix.0 ^ event_hash
    }

    /// The hash of an event's handler, choice script and random-seed
    /// variant (its process is in the prefix).
    pub(crate) fn event_hash(handler: usize, script: &[usize], seed: u32) -> u128 {
        let mut h = FoldStream::default();
        h.word(handler as u64);
        h.word(u64::from(seed));
        h.word(script.len() as u64);
        for &c in script {
            h.word(c as u64);
        }
        h.finish128()
    }

    /// The first of the slots of `key`'s bucket.
    fn bucket(&self, key: [u64; 2]) -> usize {
        (key[0] ^ key[1]) as usize & (self.slots.len() - WAYS)
    }

    fn find(&self, key: u128) -> Option<&Slot> {
        let key = split(key);
        if key == [0, 0] {
            return None;
        }
        let b = self.bucket(key);
        self.slots[b..b + WAYS].iter().find(|s| s.key == key)
    }

    /// What the cache knows about the transition with `key`, if anything.
    pub(crate) fn get(&self, key: u128) -> Option<Fact> {
        self.find(key).map(|slot| Fact {
            delta: join(slot.delta),
            choices: slot.choices,
            len: slot.len,
            tables: slot.has_tables.then(|| slot.tables.map(TableId)),
            generation: self.generation,
        })
    }

    /// [`TransitionCache::tables`] of the entry `fact` was read from
    /// under `key`: the tables the fact saw if nothing changed the cache
    /// since (no second lookup), else looked up again.
    pub(crate) fn tables_now(&self, key: u128, fact: &Fact) -> Option<[TableId; 2]> {
        if fact.generation == self.generation {
            fact.tables
        } else {
            self.tables(key)
        }
    }

    /// The successor's tables of the process's arena and of the
    /// environment's, if the entry of `key` has them; they stay the
    /// cache's.
    pub(crate) fn tables(&self, key: u128) -> Option<[TableId; 2]> {
        self.find(key)
            .filter(|slot| slot.has_tables)
            .map(|slot| slot.tables.map(TableId))
    }

    /// Gives the entry of `key` the successor's tables (see the module
    /// documentation). Returns whether it took them (and with them the
    /// caller's references; not if the entry is gone or has tables
    /// already), and the tables of the entry that held tables longest, if
    /// that many hold tables now: the caller gives back their references.
    pub(crate) fn attach(
        &mut self,
        key: u128,
        tables: [TableId; 2],
    ) -> (bool, Option<[TableId; 2]>) {
        let key = split(key);
        if key == [0, 0] {
            return (false, None);
        }
        self.generation += 1;
        let b = self.bucket(key);
        let Some(slot) = self.slots[b..b + WAYS]
            .iter_mut()
            .find(|s| s.key == key && !s.has_tables)
        else {
            return (false, None);
        };
        slot.tables = tables.map(|t| t.0);
        slot.has_tables = true;
        self.attached.push_back(key);
        if self.attached.len() <= self.max_attached {
            return (true, None);
        }
        // The oldest attachment, if its entry still holds tables (it may
        // have been overwritten since).
        let old = self.attached.pop_front().expect("more than the bound");
        let b = self.bucket(old);
        let dropped = self.slots[b..b + WAYS]
            .iter_mut()
            .find(|s| s.key == old && s.has_tables)
            .map(|slot| {
                slot.has_tables = false;
                slot.tables.map(TableId)
            });
        (true, dropped)
    }

    /// Takes every table the entries hold (the caller gives their
    /// references back); the entries stay, without them.
    pub(crate) fn take_tables(&mut self) -> Vec<TableId> {
        self.generation += 1;
        let mut out = Vec::new();
        for slot in self.slots.iter_mut().filter(|s| s.has_tables) {
            out.extend(slot.tables.map(TableId));
            slot.has_tables = false;
        }
        out
    }

    /// Records what the transition with `key` did; choices that do not fit
    /// an entry leave the cache as it was. Returns the tables of the entry
    /// it overwrote, if that had any: the caller gives back their
    /// references.
    pub(crate) fn insert(
        &mut self,
        key: u128,
        delta: u128,
        choices: &[(usize, usize)],
    ) -> Option<[TableId; 2]> {
        if key == 0 || choices.len() > MAX_CHOICES {
            return None;
        }
        let mut packed = [(0u16, 0u16); MAX_CHOICES];
        for (p, &(v, n)) in packed.iter_mut().zip(choices) {
            let (Ok(v), Ok(n)) = (u16::try_from(v), u16::try_from(n)) else {
                return None;
            };
            *p = (v, n);
        }
        if self.filled * 2 >= self.slots.len() && self.slots.len() < self.max_slots {
            self.grow();
        }
        let old = self.put(Slot {
            key: split(key),
            delta: split(delta),
            choices: packed,
            len: choices.len() as u8,
            has_tables: false,
            tables: [0; 2],
        });
        old.has_tables.then(|| old.tables.map(TableId))
    }

    /// Puts an entry in its bucket: over its own key's, else in an empty
    /// slot, else over one of the others (chosen by the key); returns the
    /// slot it overwrote.
    fn put(&mut self, slot: Slot) -> Slot {
        self.generation += 1;
        let b = self.bucket(slot.key);
        let i = (b..b + WAYS)
            .find(|&i| self.slots[i].key == slot.key)
            .or_else(|| (b..b + WAYS).find(|&i| self.slots[i].key == [0, 0]))
            .unwrap_or(b + (slot.key[1] >> 62) as usize);
        if self.slots[i].key == [0, 0] {
            self.filled += 1;
        }
        std::mem::replace(&mut self.slots[i], slot)
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        self.slots = vec![Slot::default(); old.len() * 2];
        self.filled = 0;
        for slot in old.into_iter().filter(|s| s.key != [0, 0]) {
            // A bucket's entries go to two buckets of the larger table:
            // none is overwritten.
            let lost = self.put(slot);
            assert!(
                lost.key == [0, 0],
                "growing the transition cache overwrote an entry"
            );
        }
    }
}

/// The guard cache: which handlers of a process its guards enabled, keyed
/// as a transition is, by the process and the contents of the two arenas
/// its guards can read (its own and the environment's, when the state is
/// isolated; see the module documentation). With it and the transition
/// cache, a state whose every event is known needs no restore at all.
/// Its memory is fixed: [`GUARD_SLOTS`] entries of 24 bytes.
pub(crate) struct GuardCache {
    slots: Vec<GuardSlot>,
    /// Lookups that found an entry.
    pub(crate) hits: u64,
}

/// Arena contents remembered as satisfying every per-process invariant
/// (`Engine::passed`, 16 bytes each).
pub(crate) const PASSED_SLOTS: usize = 1 << 10;

/// Entries of the guard cache.
pub(crate) const GUARD_SLOTS: usize = 1 << 10;

#[derive(Clone, Copy, Default)]
struct GuardSlot {
    /// 0 for an empty slot.
    key: [u64; 2],
    /// Bit `h`: handler `h` is enabled.
    enabled: u64,
}

impl GuardCache {
    pub(crate) fn new() -> Self {
        GuardCache {
            slots: vec![GuardSlot::default(); GUARD_SLOTS],
            hits: 0,
        }
    }

    /// Bytes of checker memory its table takes.
    pub(crate) fn bytes(&self) -> usize {
        self.slots.capacity() * size_of::<GuardSlot>()
    }

    /// The key of a process's guards in a state: the prefix of its
    /// events' keys (this table is apart from theirs).
    pub(crate) fn key(prefix: &Prefix) -> u128 {
        prefix.0
    }

    fn bucket(key: [u64; 2]) -> usize {
        (key[0] ^ key[1]) as usize & (GUARD_SLOTS - WAYS)
    }

    /// The handlers the guards of `key` enabled, as a bit set.
    pub(crate) fn get(&mut self, key: u128) -> Option<u64> {
        let key = split(key);
        if key == [0, 0] {
            return None;
        }
        let b = Self::bucket(key);
        let slot = self.slots[b..b + WAYS].iter().find(|s| s.key == key)?;
        self.hits += 1;
        Some(slot.enabled)
    }

    /// Records the handlers the guards of `key` enabled.
    pub(crate) fn insert(&mut self, key: u128, enabled: u64) {
        let key = split(key);
        if key == [0, 0] {
            return;
        }
        let b = Self::bucket(key);
        let i = (b..b + WAYS)
            .find(|&i| self.slots[i].key == key || self.slots[i].key == [0, 0])
            .unwrap_or(b + (key[1] >> 62) as usize);
        self.slots[i] = GuardSlot { key, enabled };
    }
}

/// A transition the transition cache knows: its fact, and the
/// successor's fingerprint sum and fingerprint from the expanded state.
#[derive(Clone, Copy)]
pub(super) struct Known {
    pub(super) fact: Fact,
    pub(super) sum: u128,
    pub(super) fp: crate::memory::Fingerprint,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An arena key as `Memory::arena_key` makes them: a hash of an arena
    /// and its contents.
    fn arena(a: usize, sum: u128) -> u128 {
        let mut h = FoldStream::default();
        h.word(a as u64);
        h.word(sum as u64);
        h.word((sum >> 64) as u64);
        h.finish128()
    }

    /// The key of `handler` of process `actor` (arena `actor`, the
    /// environment arena 99) whose arenas have these sums.
    fn key5(actor: usize, handler: usize, script: &[usize], seed: u32, sums: [u128; 2]) -> u128 {
        TransitionCache::key(
            handler,
            script,
            seed,
            [arena(actor, sums[0]), arena(99, sums[1])],
        )
    }

    fn prefix(actor: usize, sums: [u128; 2]) -> Prefix {
        Prefix::new(Some(arena(actor, sums[0])), arena(99, sums[1]))
    }

    #[test]
    fn finds_what_it_was_given_and_grows_without_losing_it() {
        let mut c = TransitionCache::new(1 << 20);
        let keys: Vec<u128> = (0..5000u64)
            .map(|k| key5(k as usize % 7, 3, &[k as usize], 0, [k.into(), 9]))
            .collect();
        for (k, &key) in keys.iter().enumerate() {
            c.insert(key, k as u128, &[(k % 3, 3)]);
        }
        assert!(c.slots.len() > MIN_SLOTS, "the table grew");
        let mut found = 0;
        for (k, &key) in keys.iter().enumerate() {
            if let Some(hit) = c.get(key) {
                assert_eq!(hit.delta, k as u128, "an entry is its own key's");
                assert_eq!(hit.choices(), vec![(k % 3, 3)]);
                found += 1;
            }
        }
        // Two slots per bucket: a few collide and overwrite one another.
        assert!(
            found > keys.len() * 9 / 10,
            "found {found} of {}",
            keys.len()
        );
        assert!(c.get(12345).is_none(), "an unknown key misses");
    }

    #[test]
    fn tables_are_kept_once_and_handed_back_when_an_entry_goes() {
        // Two slots' worth: one bucket, so the fifth key overwrites.
        let mut c = TransitionCache::new(4 * size_of::<Slot>());
        let keys: Vec<u128> = (1..=5u64).map(|k| u128::from(k) << 70).collect();
        let t = |k: u32| [TableId(k), TableId(k + 100)];
        assert!(c.insert(keys[0], 1, &[]).is_none());
        assert!(c.tables(keys[0]).is_none(), "no tables until attached");
        assert_eq!(c.attach(keys[0], t(1)), (true, None));
        assert_eq!(c.tables(keys[0]), Some(t(1)));
        assert_eq!(
            c.attach(keys[0], t(2)),
            (false, None),
            "an entry takes tables once"
        );
        assert_eq!(
            c.attach(keys[1], t(2)),
            (false, None),
            "no entry, no tables"
        );
        assert_eq!(c.get(keys[0]).map(|f| f.delta), Some(1));
        // A fact read before a change says what the entry holds after it.
        let mut facts = vec![(keys[0], c.get(keys[0]).unwrap())];
        let mut handed = Vec::new();
        for (i, &k) in keys.iter().enumerate().skip(1) {
            handed.extend(c.insert(k, i as u128, &[]));
            for (key, fact) in &facts {
                assert_eq!(c.tables_now(*key, fact), c.tables(*key), "after insert {i}");
            }
            let (taken, dropped) = c.attach(k, t(10 * i as u32));
            assert!(taken);
            handed.extend(dropped);
            for (key, fact) in &facts {
                assert_eq!(c.tables_now(*key, fact), c.tables(*key), "after attach {i}");
            }
            facts.push((k, c.get(k).unwrap()));
        }
        assert!(
            c.tables_now(keys[0], &facts[0].1).is_none(),
            "the first entry was overwritten, its tables handed back"
        );
        // Every table taken is handed back once: by an overwrite or by
        // take_tables.
        let mut all: Vec<u32> = handed.iter().flatten().map(|t| t.0).collect();
        all.extend(c.take_tables().iter().map(|t| t.0));
        all.sort_unstable();
        let mut want: Vec<u32> = [1, 10, 20, 30, 40]
            .iter()
            .flat_map(|&k| [k, k + 100])
            .collect();
        want.sort_unstable();
        assert_eq!(all, want);
        assert!(c.take_tables().is_empty());
    }

    #[test]
    fn only_the_latest_attachments_keep_their_tables() {
        let mut c = TransitionCache::new(1 << 20);
        let keys: Vec<u128> = (1..=(MAX_ATTACHED as u64 + 10))
            .map(|k| key5(0, 0, &[], 0, [k.into(), 0]))
            .collect();
        let mut dropped = Vec::new();
        for (i, &k) in keys.iter().enumerate() {
            assert!(c.insert(k, 0, &[]).is_none());
            let (taken, old) = c.attach(k, [TableId(i as u32); 2]);
            assert!(taken);
            dropped.extend(old);
        }
        // The first ten gave theirs back, in order; the rest keep them.
        let want: Vec<[TableId; 2]> = (0..10).map(|i| [TableId(i); 2]).collect();
        assert_eq!(dropped, want);
        assert!(c.tables(keys[9]).is_none());
        assert_eq!(c.tables(keys[10]), Some([TableId(10); 2]));
        assert_eq!(c.take_tables().len(), 2 * MAX_ATTACHED);
    }

    #[test]
    fn stays_within_its_bytes() {
        let mut c = TransitionCache::new(64 << 10);
        for k in 0..100_000u64 {
            c.insert(key5(0, 0, &[], 0, [k.into(), 0]), 1, &[]);
        }
        assert!(c.slots.len() * size_of::<Slot>() <= 64 << 10);
        assert_eq!(size_of::<Slot>(), 56);
    }

    #[test]
    fn keys_differ_in_every_component() {
        let base = key5(1, 2, &[0], 0, [3, 4]);
        let others = [
            key5(2, 2, &[0], 0, [3, 4]),
            key5(1, 3, &[0], 0, [3, 4]),
            key5(1, 2, &[1], 0, [3, 4]),
            key5(1, 2, &[0, 0], 0, [3, 4]),
            key5(1, 2, &[], 0, [3, 4]),
            key5(1, 2, &[0], 1, [3, 4]),
            key5(1, 2, &[0], 0, [4, 3]),
            key5(1, 2, &[0], 0, [3 << 64, 4]),
        ];
        for o in others {
            assert_ne!(o, base);
        }
    }

    #[test]
    fn guard_entries_are_found_under_their_own_key_only() {
        let mut g = GuardCache::new();
        let keys: Vec<u128> = (0..300u64)
            .map(|k| GuardCache::key(&prefix(k as usize % 5, [k.into(), 1])))
            .collect();
        for (k, &key) in keys.iter().enumerate() {
            g.insert(key, k as u64);
        }
        let found = keys
            .iter()
            .enumerate()
            .filter(|&(k, &key)| g.get(key).inspect(|&m| assert_eq!(m, k as u64)).is_some())
            .count();
        assert!(found > 250, "found {found} of 300");
        assert!(g.get(GuardCache::key(&prefix(9, [0, 0]))).is_none());
        // Keys differ with the process and with either arena.
        let p = GuardCache::key(&prefix(1, [2, 3]));
        assert_ne!(p, GuardCache::key(&prefix(2, [2, 3])));
        assert_ne!(p, GuardCache::key(&prefix(1, [3, 3])));
        assert_ne!(p, GuardCache::key(&prefix(1, [2, 2])));
        assert_ne!(p, GuardCache::key(&prefix(1, [3, 2])));
    }

    #[test]
    fn runs_with_many_choices_are_not_cached() {
        let mut c = TransitionCache::new(1 << 20);
        c.insert(77, 1, &[(0, 2), (1, 2), (0, 2)]);
        assert!(c.get(77).is_none());
    }
}
