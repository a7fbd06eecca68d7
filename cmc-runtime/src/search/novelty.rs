//! What guided walks remember between walks, in a fixed amount of memory:
//! which states some walk already explored, and at what depth
//! ([`Explored`]), and the states whose successors a walk left untried
//! ([`Corpus`]).

use rand::Rng;

use crate::memory::Fingerprint;

/// The states some walk entered, each with the smallest depth it was
/// entered at: a lossy table of fixed size, as the bitstate ("supertrace")
/// tables of SPIN are.
///
/// A walk enters a successor only when it is *novel*: never entered, or
/// entered deeper than now. Under a depth bound, a state entered at depth
/// `d` leads to everything within `bound - d` steps of it, so once a walk
/// explored it from `d`, a later arrival at `d` or deeper has nothing new
/// to show; an arrival shallower has (more steps remain). Without the
/// depth the first, longest path to a state would hide the short one a
/// bug at the depth bound needs.
///
/// Each slot is one word: 56 bits of the fingerprint and the depth (capped
/// at 255: beyond it, depths are not told apart). A fingerprint has one
/// bucket of [`WAYS`] slots; a new one takes an empty slot, or else the
/// one with the deepest state (the cheapest to explore again). A state
/// forgotten that way is novel again when a walk meets it: it costs time,
/// never a state. Two fingerprints that agree on the bucket and the 56
/// bits are one state here, with the probability hash compaction has.
pub(super) struct Explored {
    slots: Vec<u64>,
    /// Buckets minus one (their number is a power of two).
    mask: usize,
    len: usize,
}

/// Slots per bucket: one cache line of words.
const WAYS: usize = 8;

impl Explored {
    /// A table of `bytes` bytes (rounded down to a power of two buckets,
    /// one bucket at least).
    pub(super) fn new(bytes: usize) -> Self {
        let buckets = (bytes / (8 * WAYS)).max(1);
        let buckets = 1usize << (usize::BITS - 1 - buckets.leading_zeros());
        Explored {
            slots: vec![0; buckets * WAYS],
            mask: buckets - 1,
            len: 0,
        }
    }

    /// The table's bytes.
    pub(super) fn bytes(&self) -> usize {
        self.slots.len() * 8
    }

    /// States held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.len
    }

    /// Forgets every state.
    pub(super) fn clear(&mut self) {
        self.slots.fill(0);
        self.len = 0;
    }

    /// Records that a walk enters `fp` at `depth`, and returns whether it
    /// is novel (not entered before at `depth` or shallower). A state
    /// that is not novel is left as it was.
    pub(super) fn enter(&mut self, fp: Fingerprint, depth: usize) -> bool {
        // The bucket from the low bits, the tag from the high ones (a
        // 64-bit fingerprint has only the low word: mixed, it serves both).
        let (low, high) = (fp.0 as u64, (fp.0 >> 64) as u64);
        let high = if high == 0 {
            crate::sys::hash::fmix64(low)
        } else {
            high
        };
        let tag = (high >> 8).max(1);
        let depth = depth.min(255) as u64;
        let start = (low as usize & self.mask) * WAYS;
        let bucket = &mut self.slots[start..start + WAYS];
        let mut victim = 0;
        for i in 0..WAYS {
            let slot = bucket[i];
            if slot >> 8 == tag {
                if slot & 0xff <= depth {
                    return false;
                }
                bucket[i] = tag << 8 | depth;
                return true;
            }
            if slot == 0 {
                self.len += 1;
                bucket[i] = tag << 8 | depth;
                return true;
            }
            if slot & 0xff > bucket[victim] & 0xff {
                victim = i;
            }
        }
        // Full: the deepest state goes (the first of them).
        bucket[victim] = tag << 8 | depth;
        true
    }
}

/// A bounded set of things to come back to: the states where a walk
/// stopped with successors still untried, each with its weight, the length
/// of its path. Entries are taken at random. It holds at most `capacity`
/// entries whose weights sum to at most `max_weight`; past either, the new
/// entry replaces old ones, the heaviest (deepest) of [`DRAWS`] drawn at
/// random each time, whose untried successors lead to the fewest states
/// within a depth bound ([`Corpus::push`] hands them back, so that their
/// owner can release what they hold).
pub(super) struct Corpus<T> {
    entries: Vec<(T, usize)>,
    capacity: usize,
    weight: usize,
    max_weight: usize,
    /// Entries replaced because the corpus was full.
    pub(super) dropped: u64,
}

/// The entries drawn at random for each take or replacement.
const DRAWS: usize = 4;

impl<T> Corpus<T> {
    pub(super) fn new(capacity: usize, max_weight: usize) -> Self {
        assert!(capacity > 0, "a corpus holds one entry at least");
        Corpus {
            entries: Vec::new(),
            capacity,
            weight: 0,
            max_weight,
            dropped: 0,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    /// Adds `entry` of `weight` (one heavier than the whole corpus may
    /// be is handed back at once); returns the entries it replaced.
    pub(super) fn push(&mut self, entry: T, weight: usize, rng: &mut impl Rng) -> Vec<T> {
        if weight > self.max_weight {
            self.dropped += 1;
            return vec![entry];
        }
        let mut out = Vec::new();
        while self.entries.len() == self.capacity || self.weight + weight > self.max_weight {
            let k = self.heaviest_drawn(rng);
            let (old, w) = self.entries.swap_remove(k);
            self.weight -= w;
            self.dropped += 1;
            out.push(old);
        }
        self.weight += weight;
        self.entries.push((entry, weight));
        out
    }

    /// Takes an entry out, one at random.
    pub(super) fn take(&mut self, rng: &mut impl Rng) -> Option<T> {
        if self.entries.is_empty() {
            return None;
        }
        let k = rng.gen_range(0..self.entries.len());
        let (entry, w) = self.entries.swap_remove(k);
        self.weight -= w;
        Some(entry)
    }

    /// The index of the heaviest entry among [`DRAWS`] drawn at random
    /// (the first of them on a tie). The corpus is not empty.
    fn heaviest_drawn(&self, rng: &mut impl Rng) -> usize {
        let n = self.entries.len();
        let mut best = rng.gen_range(0..n);
        for _ in 1..DRAWS {
            let k = rng.gen_range(0..n);
            if self.entries[k].1 > self.entries[best].1 {
                best = k;
            }
        }
        best
    }

    /// Every entry, taken out.
    pub(super) fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.weight = 0;
        self.entries.drain(..).map(|(entry, _)| entry)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    use super::*;

    fn fp(k: u64) -> Fingerprint {
        let lo = crate::sys::hash::fmix64(k + 1);
        let hi = crate::sys::hash::fmix64(lo ^ 0x5555);
        Fingerprint(u128::from(hi) << 64 | u128::from(lo))
    }

    /// With room for every state, the table answers as a map from state
    /// to least depth does.
    #[test]
    fn with_room_the_table_is_a_map_of_least_depths() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut table = Explored::new(1 << 20);
        let mut reference: HashMap<u64, usize> = HashMap::new();
        for _ in 0..200_000 {
            let k = rng.gen_range(0..5_000u64);
            let depth = rng.gen_range(0..300usize);
            let capped = depth.min(255);
            let novel = match reference.get(&k) {
                Some(&d) => capped < d,
                None => true,
            };
            if novel {
                reference.insert(k, capped);
            }
            assert_eq!(
                table.enter(fp(k), depth),
                novel,
                "state {k} at depth {depth}"
            );
        }
        assert_eq!(table.len(), reference.len());
    }

    /// A full table forgets (the deepest first), and a forgotten state is
    /// novel again; a state never entered is always novel.
    #[test]
    fn a_full_table_forgets_the_deepest_and_never_invents() {
        // One bucket: eight slots.
        let mut table = Explored::new(64);
        assert_eq!(table.bytes(), 64);
        for k in 0..8 {
            assert!(table.enter(fp(k), k as usize + 1));
        }
        for k in 0..8 {
            assert!(!table.enter(fp(k), 20), "state {k} is held");
        }
        // A ninth state replaces the deepest (state 7, at depth 8).
        assert!(table.enter(fp(100), 3));
        assert!(table.enter(fp(7), 8), "state 7 was forgotten");
        assert!(!table.enter(fp(100), 3), "state 100 is held");
        for k in 1000..2000 {
            assert!(table.enter(fp(k), 0), "state {k} was never entered");
        }
        table.clear();
        assert_eq!(table.len(), 0);
        assert!(table.enter(fp(0), 1));
    }

    /// The corpus keeps at most its capacity and its weight, hands back
    /// what it replaces, and gives back each entry once.
    #[test]
    fn the_corpus_is_bounded_and_loses_nothing_silently() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut corpus = Corpus::new(10, 100);
        let mut out = Vec::new();
        let mut weights = HashMap::new();
        for k in 0..60usize {
            let weight = k % 13;
            weights.insert(k, weight);
            out.extend(corpus.push(k, weight, &mut rng));
            assert!(corpus.len() <= 10);
            assert!(corpus.weight <= 100);
            let held: usize = corpus.entries.iter().map(|&(k, _)| weights[&k]).sum();
            assert_eq!(held, corpus.weight);
        }
        assert_eq!(corpus.dropped as usize, out.len());
        // Too heavy for the corpus: handed back at once.
        assert_eq!(corpus.push(1000, 101, &mut rng), vec![1000]);
        out.push(1000);
        while let Some(k) = corpus.take(&mut rng) {
            out.push(k);
        }
        assert_eq!(corpus.weight, 0);
        out.sort_unstable();
        let mut all: Vec<usize> = (0..60).collect();
        all.push(1000);
        assert_eq!(out, all);
    }

    /// A full corpus gives up heavy entries first, as a tournament of four
    /// does: one of the heaviest quarter about 1 - (3/4)^4 = 68 % of the
    /// time.
    #[test]
    fn the_corpus_gives_up_heavy_entries_first() {
        let mut rng = SmallRng::seed_from_u64(3);
        let trials = 20_000;
        let expected = 1.0 - 0.75f64.powi(4);
        // Full: the new entry replaces one of the heaviest more often.
        let mut heavy = 0;
        for _ in 0..trials {
            let mut corpus = Corpus::new(100, usize::MAX);
            for w in 0..100 {
                corpus.push(w, w, &mut rng);
            }
            if corpus.push(1000, 0, &mut rng)[0] >= 75 {
                heavy += 1;
            }
        }
        let share = heavy as f64 / trials as f64;
        assert!(
            (share - expected).abs() < 0.02,
            "{share} against {expected}"
        );
    }
}
