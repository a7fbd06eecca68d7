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
//! comes from the whole state, `identity::random`), so a run that drew is
//! never cached. The bytes of an arena are named by its table's sum (the
//! 128-bit sum of its page hashes, a content hash like the fingerprint
//! itself). The successor's fingerprint sum differs from the pre-state's by
//! the change of those two arenas' components, which the same bytes
//! determine: that difference, and the choices the run offered (the search
//! enumerates the scripts from them), are what an entry keeps.
//!
//! The search asks the cache before a run: on a hit whose successor is
//! already visited, the transition is counted and nothing else happens (no
//! restore, no run, no comparison of pages). On a miss, or a hit whose
//! successor is new, the transition runs as always; a clean run is then
//! recorded. The cache is a fixed-size table that grows by doubling up to
//! [`MAX_SLOTS`] and then overwrites: its memory is bounded whatever the
//! search's length.

use crate::hash::FoldStream;

/// Slots the table starts with.
const MIN_SLOTS: usize = 1 << 10;

/// Slots the table may grow to (64 bytes each: 32 MiB).
pub(crate) const MAX_SLOTS: usize = 1 << 19;

/// Choices an entry can hold; a run that offered more is not cached.
const MAX_CHOICES: usize = 2;

#[derive(Clone, Copy, Default)]
struct Slot {
    /// The key; 0 for an empty slot (a key that hashes to 0 is not
    /// cached).
    key: u128,
    /// The successor's fingerprint sum minus the pre-state's.
    delta: u128,
    /// The choices the run took, as (value, range).
    choices: [(u32, u32); MAX_CHOICES],
    len: u8,
}

/// What an entry says about a transition.
pub(crate) struct Hit {
    /// The successor's fingerprint sum minus the pre-state's.
    pub(crate) delta: u128,
    /// The choices the run took, as (value, range).
    pub(crate) choices: Vec<(usize, usize)>,
}

/// The cache (see the module documentation).
pub(crate) struct TransitionCache {
    slots: Vec<Slot>,
    filled: usize,
    /// Lookups that found an entry.
    pub(crate) hits: u64,
}

impl TransitionCache {
    pub(crate) fn new() -> Self {
        TransitionCache {
            slots: vec![Slot::default(); MIN_SLOTS],
            filled: 0,
            hits: 0,
        }
    }

    /// The key of a transition: the event, the choice script, the
    /// random-seed variant, and the contents (table sums) of the arenas it
    /// can read.
    pub(crate) fn key(
        actor: usize,
        handler: usize,
        script: &[usize],
        seed: u32,
        sums: [u128; 2],
    ) -> u128 {
        let mut h = FoldStream::default();
        h.word(actor as u64);
        h.word(handler as u64);
        h.word(u64::from(seed));
        for s in sums {
            h.word(s as u64);
            h.word((s >> 64) as u64);
        }
        h.word(script.len() as u64);
        for &c in script {
            h.word(c as u64);
        }
        h.finish128()
    }

    /// The first of the two slots where `key` may be.
    fn bucket(&self, key: u128) -> usize {
        (key as usize ^ (key >> 64) as usize) & (self.slots.len() - 2)
    }

    /// The entry of `key`, if the cache has it.
    pub(crate) fn get(&mut self, key: u128) -> Option<Hit> {
        let b = self.bucket(key);
        let slot = self.slots[b..b + 2].iter().find(|s| s.key == key)?;
        if key == 0 {
            return None;
        }
        self.hits += 1;
        Some(Hit {
            delta: slot.delta,
            choices: slot.choices[..usize::from(slot.len)]
                .iter()
                .map(|&(v, n)| (v as usize, n as usize))
                .collect(),
        })
    }

    /// Records what the transition with `key` did; choices that do not fit
    /// an entry leave the cache as it was.
    pub(crate) fn insert(&mut self, key: u128, delta: u128, choices: &[(usize, usize)]) {
        if key == 0 || choices.len() > MAX_CHOICES {
            return;
        }
        let mut packed = [(0u32, 0u32); MAX_CHOICES];
        for (p, &(v, n)) in packed.iter_mut().zip(choices) {
            let (Ok(v), Ok(n)) = (u32::try_from(v), u32::try_from(n)) else {
                return;
            };
            *p = (v, n);
        }
        if self.filled * 4 >= self.slots.len() && self.slots.len() < MAX_SLOTS {
            self.grow();
        }
        self.put(Slot {
            key,
            delta,
            choices: packed,
            len: choices.len() as u8,
        });
    }

    /// Puts an entry in its bucket: over its own key's, else in an empty
    /// slot, else over one of the two (chosen by the key).
    fn put(&mut self, slot: Slot) {
        let b = self.bucket(slot.key);
        let i = (b..b + 2)
            .find(|&i| self.slots[i].key == slot.key)
            .or_else(|| (b..b + 2).find(|&i| self.slots[i].key == 0))
            .unwrap_or(b + (slot.key >> 127) as usize);
        if self.slots[i].key == 0 {
            self.filled += 1;
        }
        self.slots[i] = slot;
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        self.slots = vec![Slot::default(); old.len() * 2];
        self.filled = 0;
        for slot in old.into_iter().filter(|s| s.key != 0) {
            self.put(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_what_it_was_given_and_grows_without_losing_it() {
        let mut c = TransitionCache::new();
        let keys: Vec<u128> = (0..5000u64)
            .map(|k| TransitionCache::key(k as usize % 7, 3, &[k as usize], 0, [k.into(), 9]))
            .collect();
        for (k, &key) in keys.iter().enumerate() {
            c.insert(key, k as u128, &[(k % 3, 3)]);
        }
        assert!(c.slots.len() > MIN_SLOTS, "the table grew");
        let mut found = 0;
        for (k, &key) in keys.iter().enumerate() {
            if let Some(hit) = c.get(key) {
                assert_eq!(hit.delta, k as u128, "an entry is its own key's");
                assert_eq!(hit.choices, vec![(k % 3, 3)]);
                found += 1;
            }
        }
        // Two slots per bucket: a few collide and overwrite one another.
        assert!(
            found > keys.len() * 9 / 10,
            "found {found} of {}",
            keys.len()
        );
        assert_eq!(c.hits, found as u64);
        assert!(c.get(12345).is_none(), "an unknown key misses");
    }

    #[test]
    fn keys_differ_in_every_component() {
        let base = TransitionCache::key(1, 2, &[0], 0, [3, 4]);
        let others = [
            TransitionCache::key(2, 2, &[0], 0, [3, 4]),
            TransitionCache::key(1, 3, &[0], 0, [3, 4]),
            TransitionCache::key(1, 2, &[1], 0, [3, 4]),
            TransitionCache::key(1, 2, &[0, 0], 0, [3, 4]),
            TransitionCache::key(1, 2, &[], 0, [3, 4]),
            TransitionCache::key(1, 2, &[0], 1, [3, 4]),
            TransitionCache::key(1, 2, &[0], 0, [4, 3]),
            TransitionCache::key(1, 2, &[0], 0, [3 << 64, 4]),
        ];
        for o in others {
            assert_ne!(o, base);
        }
    }

    #[test]
    fn runs_with_many_choices_are_not_cached() {
        let mut c = TransitionCache::new();
        c.insert(77, 1, &[(0, 2), (1, 2), (0, 2)]);
        assert!(c.get(77).is_none());
    }
}
