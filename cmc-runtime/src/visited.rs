//! The visited set: fingerprints only (hash compaction), in `hashbrown`
//! tables whose hasher is the identity, since fingerprints are already
//! uniformly distributed.
//!
//! The set is split into [`SHARDS`] tables by four bits of the fingerprint
//! that neither the bucket index nor hashbrown's control byte uses (bits 32
//! to 35): a table that grows allocates its new array while the old one is
//! still live, so with one table the peak memory of a search is about 1.5
//! times what the set needs just after it doubles; with sixteen, each grows
//! on its own and the peak exceeds the need by a sixteenth of that.

use std::hash::{BuildHasherDefault, Hasher};

use crate::memory::{Fingerprint, FingerprintWidth};

/// A hasher that passes a fingerprint through.
#[derive(Default, Clone, Copy, Debug)]
pub struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only reached for types other than u64/u128; fold the bytes in.
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.0 = crate::hash::fmix64(self.0 ^ u64::from_le_bytes(w));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn write_u128(&mut self, n: u128) {
        self.0 = n as u64 ^ (n >> 64) as u64;
    }
}

type Build = BuildHasherDefault<IdentityHasher>;

/// Tables the set is split into.
pub const SHARDS: usize = 16;

fn shard(fp: u64) -> usize {
    (fp >> 32) as usize % SHARDS
}

/// The set of fingerprints of visited states.
#[derive(Debug)]
pub struct Visited {
    narrow: Vec<hashbrown::HashSet<u64, Build>>,
    wide: Vec<hashbrown::HashSet<u128, Build>>,
    width: FingerprintWidth,
}

impl Visited {
    /// An empty set keeping `width` bits per state.
    pub fn new(width: FingerprintWidth) -> Self {
        let wide = width == FingerprintWidth::Bits128;
        Visited {
            narrow: (0..if wide { 0 } else { SHARDS })
                .map(|_| Default::default())
                .collect(),
            wide: (0..if wide { SHARDS } else { 0 })
                .map(|_| Default::default())
                .collect(),
            width,
        }
    }

    /// Adds a fingerprint; true if it was not there.
    pub fn insert(&mut self, fp: Fingerprint) -> bool {
        let low = fp.0 as u64;
        match self.width {
            FingerprintWidth::Bits128 => self.wide[shard(low)].insert(fp.0),
            _ => self.narrow[shard(low)].insert(low),
        }
    }

    /// Whether the fingerprint is in the set.
    pub fn contains(&self, fp: Fingerprint) -> bool {
        let low = fp.0 as u64;
        match self.width {
            FingerprintWidth::Bits128 => self.wide[shard(low)].contains(&fp.0),
            _ => self.narrow[shard(low)].contains(&low),
        }
    }

    /// Number of fingerprints.
    pub fn len(&self) -> usize {
        self.narrow.iter().map(|t| t.len()).sum::<usize>()
            + self.wide.iter().map(|t| t.len()).sum::<usize>()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the table occupies (its allocated capacity).
    pub fn memory_bytes(&self) -> usize {
        self.narrow.iter().map(|t| t.capacity() * 9).sum::<usize>()
            + self.wide.iter().map(|t| t.capacity() * 17).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn width_decides_what_is_equal() {
        let a = Fingerprint(1 | (5u128 << 64));
        let b = Fingerprint(1 | (6u128 << 64));
        let mut narrow = Visited::new(FingerprintWidth::Bits64);
        assert!(narrow.insert(a));
        assert!(!narrow.insert(b), "64-bit set must ignore the high half");
        let mut wide = Visited::new(FingerprintWidth::Bits128);
        assert!(wide.insert(a));
        assert!(wide.insert(b));
        assert!(wide.contains(a) && wide.contains(b));
        assert_eq!(wide.len(), 2);
    }

    /// The sharded set against a plain one on random fingerprints, some of
    /// them repeated.
    #[test]
    fn shards_answer_as_one_set_would() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
        for width in [FingerprintWidth::Bits64, FingerprintWidth::Bits128] {
            let mut set = Visited::new(width);
            let mut reference = std::collections::HashSet::new();
            for _ in 0..20_000 {
                let fp = Fingerprint(rng.gen::<u128>() % 5000 * 0x9e37_79b9_7f4a_7c15_f39c);
                let key = if width == FingerprintWidth::Bits128 {
                    fp.0
                } else {
                    fp.0 as u64 as u128
                };
                assert_eq!(set.insert(fp), reference.insert(key));
                assert!(set.contains(fp));
            }
            assert_eq!(set.len(), reference.len());
            assert!(set.memory_bytes() >= set.len() * 9);
        }
    }
}
