//! The visited set: fingerprints only (hash compaction), in a `hashbrown`
//! table whose hasher is the identity, since fingerprints are already
//! uniformly distributed.

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

/// The set of fingerprints of visited states.
#[derive(Debug)]
pub struct Visited {
    narrow: hashbrown::HashSet<u64, Build>,
    wide: hashbrown::HashSet<u128, Build>,
    width: FingerprintWidth,
}

impl Visited {
    /// An empty set keeping `width` bits per state.
    pub fn new(width: FingerprintWidth) -> Self {
        Visited {
            narrow: Default::default(),
            wide: Default::default(),
            width,
        }
    }

    /// Adds a fingerprint; true if it was not there.
    pub fn insert(&mut self, fp: Fingerprint) -> bool {
        match self.width {
            FingerprintWidth::Bits128 => self.wide.insert(fp.0),
            _ => self.narrow.insert(fp.0 as u64),
        }
    }

    /// Whether the fingerprint is in the set.
    pub fn contains(&self, fp: Fingerprint) -> bool {
        match self.width {
            FingerprintWidth::Bits128 => self.wide.contains(&fp.0),
            _ => self.narrow.contains(&(fp.0 as u64)),
        }
    }

    /// Number of fingerprints.
    pub fn len(&self) -> usize {
        self.narrow.len() + self.wide.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the table occupies (its allocated capacity).
    pub fn memory_bytes(&self) -> usize {
        self.narrow.capacity() * 9 + self.wide.capacity() * 17
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
}
