//! Page hashes and the fingerprint arithmetic built on them.
//!
//! A page hash is 128 bits. The state fingerprint is a sum, modulo 2^128, of
//! one *term* per page, where the term mixes the page's hash with its arena
//! and page index (AdHash, Bellare and Micciancio). A transition that rewrites
//! `d` pages changes `d` terms, so the fingerprint is updated in `O(d)` by
//! subtracting the old terms and adding the new ones.
//!
//! Fingerprints must not depend on where the arenas happen to be mapped
//! (another run, another engine in the same process): when capture hashes a
//! page, every aligned 8-byte word whose value points into one of the
//! memory's own arenas is hashed as (arena index, offset), tagged, not as an
//! address. Page *contents* are stored unchanged.
//!
//! The default page hash, [`PageHasher::Fold`], processes 64 bytes per round in
//! four independent lanes, each folding a 64×64→128-bit product; each lane
//! chains its previous value into the next multiplication, so the hash depends
//! on the order of the words and not only on their multiset. SipHash-1-3
//! ([`PageHasher::Sip`]) is the keyed reference; the benchmark `snapshot`
//! prints both (`hash_per_page` and `hash_per_page_siphash13`).

use std::hash::Hasher;

const K: [u64; 8] = [
    0xa076_1d64_78bd_642f,
    0xe703_7ed1_a0b4_28db,
    0x8ebc_6af0_9c88_c6e3,
    0x5899_65cc_7537_4cc3,
    0x1d8e_4e27_c47d_124f,
    0x9e37_79b9_7f4a_7c15,
    0xbf58_476d_1ce4_e5b9,
    0x94d0_49bb_1331_11eb,
];

/// The folded 64×64→128-bit multiplication: low half xor high half.
#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = (a as u128).wrapping_mul(b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

/// The next output of a SplitMix64 generator, whose state `state` advances.
#[inline]
pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A strong 64-bit finaliser (MurmurHash3's fmix64).
#[inline(always)]
pub(crate) fn fmix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    x
}

/// Hashes up to a page of bytes (any length works) with the multiply-fold
/// hash.
pub(crate) fn fold_hash(data: &[u8]) -> u128 {
    fold_hash_mapped(data, |w| w)
}

#[inline(always)]
fn word(bytes: &[u8], at: usize, map: &impl Fn(u64) -> u64) -> u64 {
    map(u64::from_le_bytes(
        bytes[at..at + 8].try_into().expect("8 bytes"),
    ))
}

/// [`fold_hash`] of the aligned words of `data` each replaced by `map` of
/// it (`sys::reloc` hashes pointers as offsets this way). Contents are not
/// copied: the map applies as the words are read.
#[inline(always)]
pub(crate) fn fold_hash_mapped(data: &[u8], map: impl Fn(u64) -> u64) -> u128 {
    let reloc = &map;
    let len = data.len() as u64;
    let mut lane = [K[0] ^ len, K[1], K[2], K[3]];
    let mut chunks = data.chunks_exact(64);
    for chunk in &mut chunks {
        for (j, st) in lane.iter_mut().enumerate() {
            let a = word(chunk, 16 * j, reloc);
            let b = word(chunk, 16 * j + 8, reloc);
            // Keeping `st` rotated in the xor means a zero product (a word
            // equal to the key) cannot erase what the lane has absorbed.
            *st = fold_mul(a ^ K[4 + j], b ^ *st) ^ st.rotate_left(29);
        }
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut tail = [0u8; 64];
        tail[..rest.len()].copy_from_slice(rest);
        for (j, st) in lane.iter_mut().enumerate() {
            let a = word(&tail, 16 * j, reloc);
            let b = word(&tail, 16 * j + 8, reloc);
            *st = fold_mul(a ^ K[4 + j], b ^ *st) ^ st.rotate_left(29);
        }
    }
    let lo =
        fmix64(fold_mul(lane[0] ^ K[5], lane[1] ^ K[6]) ^ fold_mul(lane[2] ^ K[7], lane[3] ^ len));
    let hi =
        fmix64(fold_mul(lane[0] ^ K[2], lane[3] ^ K[1]) ^ fold_mul(lane[1] ^ K[0], lane[2] ^ !len));
    ((hi as u128) << 64) | lo as u128
}

/// The name of the function that hashes states (recorded in traces): the
/// stream hash below, version 1. Traces recorded before it was named have
/// no name, and their fingerprints are SipHash-1-3's.
pub const STATE_HASH: &str = "fold-1";

/// The name of the state hash of traces that record none.
pub(crate) const OLD_STATE_HASH: &str = "siphash-1-3";

/// The streaming hash behind state identity ([`crate::StateHasher`]): two
/// 64-bit lanes, each folding a 64×64→128-bit product of the next word and
/// its own state per word, as a page hash's lanes do, and a count of words.
/// Writes are absorbed as they come (no buffer): a whole number is one
/// word, a byte string its 8-byte words, its zero-padded tail and its
/// length, so the hash depends on how values split their writes, which
/// every `Hash` and `StateHash` does the same way for equal values.
/// About ten times cheaper than SipHash-1-3 per word; its quality is
/// tested below against structured inputs (single bit flips, all short
/// sequences of small numbers, reordered words).
#[derive(Clone, Copy, Debug)]
pub(crate) struct FoldStream {
    a: u64,
    b: u64,
    n: u64,
}

impl Default for FoldStream {
    fn default() -> Self {
        FoldStream {
            a: K[0],
            b: K[1],
            n: 0,
        }
    }
}

impl FoldStream {
    /// Absorbs one word.
    #[inline(always)]
    pub(crate) fn word(&mut self, w: u64) {
        // The rotated old state keeps what a lane has absorbed even when
        // the product is zero (a word equal to the key).
        self.a = fold_mul(w ^ K[4], self.a ^ K[5]) ^ self.a.rotate_left(29);
        self.b = fold_mul(w ^ K[6], self.b ^ K[7]) ^ self.b.rotate_left(37);
        self.n = self.n.wrapping_add(1);
    }

    /// Absorbs a byte string: short ones word by word, long ones through
    /// the page hash (four lanes, 64 bytes a round), then its length.
    #[inline]
    pub(crate) fn bytes(&mut self, bytes: &[u8]) {
        if bytes.len() >= 64 {
            let h = fold_hash(bytes);
            self.word(h as u64);
            self.word((h >> 64) as u64);
        } else {
            let mut words = bytes.chunks_exact(8);
            for w in &mut words {
                self.word(u64::from_le_bytes(w.try_into().expect("8 bytes")));
            }
            let rest = words.remainder();
            if !rest.is_empty() {
                let mut tail = [0u8; 8];
                tail[..rest.len()].copy_from_slice(rest);
                self.word(u64::from_le_bytes(tail));
            }
        }
        self.word(bytes.len() as u64 ^ K[3]);
    }

    /// The 128-bit result.
    #[inline]
    pub(crate) fn finish128(&self) -> u128 {
        let lo = fmix64(fold_mul(self.a ^ K[2], self.b ^ K[3]) ^ self.n);
        let hi = fmix64(
            fold_mul(self.b.rotate_left(17) ^ K[0], self.a ^ K[1]) ^ self.n.wrapping_mul(K[7]),
        );
        ((hi as u128) << 64) | lo as u128
    }
}

/// Hashes bytes with SipHash-1-3 (two independent keyed 64-bit hashes form
/// the 128 bits).
pub(crate) fn sip_hash(data: &[u8]) -> u128 {
    let mut a = siphasher::sip::SipHasher13::new_with_keys(K[0], K[1]);
    a.write(data);
    let mut b = siphasher::sip::SipHasher13::new_with_keys(K[2], K[3]);
    b.write(data);
    ((b.finish() as u128) << 64) | a.finish() as u128
}

/// The fingerprint term of the page with hash `h` at page `page` of arena
/// `arena`. Distinct positions give unrelated terms, so moving a page's
/// content to another index changes the fingerprint.
#[inline]
pub(crate) fn term(arena: usize, page: usize, h: u128) -> u128 {
    let pos = ((arena as u64) << 40) ^ page as u64;
    let lo = h as u64;
    let hi = (h >> 64) as u64;
    let x = fmix64(lo ^ pos.wrapping_mul(K[5]));
    let y = fmix64(hi ^ pos.wrapping_mul(K[6]) ^ x.rotate_left(31));
    ((y as u128) << 64) | x as u128
}

/// Turns the sum of terms into a fingerprint (a final avalanche so that
/// truncating to 64 bits keeps every input bit's influence).
#[inline]
pub(crate) fn finish(sum: u128) -> u128 {
    let a = finish64(sum);
    let b = fmix64((sum >> 64) as u64 ^ fold_mul(a ^ K[7], K[2]));
    ((b as u128) << 64) | a as u128
}

/// The low 64 bits of [`finish`], computed alone (a 64-bit fingerprint
/// needs no more).
#[inline]
pub(crate) fn finish64(sum: u128) -> u64 {
    let lo = sum as u64;
    let hi = (sum >> 64) as u64;
    fmix64(lo ^ fold_mul(hi ^ K[3], K[4]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_low_half_of_a_fingerprint_is_finish64() {
        let mut x = 0x1234_5678_9abc_def0_0fed_cba9_8765_4321u128;
        for _ in 0..1000 {
            x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835) ^ (x >> 61);
            assert_eq!(finish(x) as u64, finish64(x));
        }
    }
    use rand::{Rng, SeedableRng};
    use std::collections::HashSet;

    #[test]
    fn every_single_bit_flip_changes_both_hashes() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        let mut page = vec![0u8; 4096];
        rng.fill(&mut page[..]);
        let base_fold = fold_hash(&page);
        let base_sip = sip_hash(&page);
        for bit in 0..4096 * 8 {
            page[bit / 8] ^= 1 << (bit % 8);
            assert_ne!(
                fold_hash(&page),
                base_fold,
                "flipping bit {bit} kept the fold hash"
            );
            assert_ne!(
                sip_hash(&page),
                base_sip,
                "flipping bit {bit} kept the sip hash"
            );
            page[bit / 8] ^= 1 << (bit % 8);
        }
    }

    #[test]
    fn order_of_words_and_length_matter() {
        let mut a = vec![0u8; 4096];
        a[0] = 1;
        let mut b = vec![0u8; 4096];
        b[64] = 1;
        assert_ne!(
            fold_hash(&a),
            fold_hash(&b),
            "swapping two stripes kept the hash"
        );
        assert_ne!(
            fold_hash(&[0u8; 100]),
            fold_hash(&[0u8; 101]),
            "trailing zero byte kept the hash"
        );
        assert_ne!(fold_hash(&[]), fold_hash(&[0u8; 64]));
    }

    #[test]
    fn no_collisions_among_many_similar_pages() {
        // Pages that differ in one word at one position, the common case in a
        // state space, must not collide even in the low 32 bits more often
        // than chance allows (here: never, for 200k pages and 64 bits).
        let mut seen = HashSet::new();
        let mut page = vec![0u8; 4096];
        for i in 0..200_000u64 {
            let at = (i as usize * 8) % 4096;
            page[at..at + 8].copy_from_slice(&i.to_le_bytes());
            assert!(
                seen.insert(fold_hash(&page) as u64),
                "64-bit collision at page {i}"
            );
            page[at..at + 8].copy_from_slice(&0u64.to_le_bytes());
        }
    }

    fn stream(words: &[u64]) -> u128 {
        let mut h = FoldStream::default();
        for &w in words {
            h.word(w);
        }
        h.finish128()
    }

    #[test]
    fn the_stream_hash_sees_every_bit_of_every_word() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
        let mut words: Vec<u64> = (0..40).map(|_| rng.gen()).collect();
        let base = stream(&words);
        for i in 0..words.len() {
            for bit in 0..64 {
                words[i] ^= 1 << bit;
                let h = stream(&words);
                assert_ne!(h as u64, base as u64, "word {i} bit {bit}: low half kept");
                assert_ne!(h >> 64, base >> 64, "word {i} bit {bit}: high half kept");
                words[i] ^= 1 << bit;
            }
        }
    }

    #[test]
    fn the_stream_hash_separates_short_sequences_of_small_numbers() {
        // Every sequence of up to four numbers below 40 (and the zero
        // words of a state that is mostly zero): no two share even the low
        // 64 bits, nor the high 64 bits.
        let (mut lo, mut hi) = (HashSet::new(), HashSet::new());
        let mut count = 0;
        let mut seq = Vec::new();
        fn all(seq: &mut Vec<u64>, left: usize, f: &mut dyn FnMut(&[u64])) {
            f(seq);
            if left == 0 {
                return;
            }
            for v in 0..40 {
                seq.push(v);
                all(seq, left - 1, f);
                seq.pop();
            }
        }
        all(&mut seq, 4, &mut |s| {
            let h = stream(s);
            count += 1;
            assert!(lo.insert(h as u64), "low-half collision at {s:?}");
            assert!(hi.insert((h >> 64) as u64), "high-half collision at {s:?}");
        });
        assert_eq!(count, 1 + 40 + 1_600 + 64_000 + 2_560_000);
    }

    #[test]
    fn the_stream_hash_depends_on_order_and_split() {
        assert_ne!(stream(&[1, 2]), stream(&[2, 1]));
        assert_ne!(stream(&[0]), stream(&[0, 0]));
        assert_ne!(stream(&[]), stream(&[0]));
        let bytes = |parts: &[&[u8]]| {
            let mut h = FoldStream::default();
            for p in parts {
                h.bytes(p);
            }
            h.finish128()
        };
        // A byte string's length is part of it: "ab" + "c" is not "a" + "bc".
        assert_ne!(bytes(&[b"ab", b"c"]), bytes(&[b"a", b"bc"]));
        assert_ne!(bytes(&[b"a\0"]), bytes(&[b"a"]));
        assert_ne!(bytes(&[&[7u8; 100]]), bytes(&[&[7u8; 101]]));
        let mut long = vec![0u8; 300];
        let base = bytes(&[&long]);
        long[299] = 1;
        assert_ne!(bytes(&[&long]), base);
    }

    #[test]
    fn terms_depend_on_position() {
        let h = fold_hash(b"hello");
        assert_ne!(term(0, 0, h), term(0, 1, h));
        assert_ne!(term(0, 0, h), term(1, 0, h));
        assert_ne!(finish(term(0, 0, h)) as u64, finish(term(0, 1, h)) as u64);
    }
}
