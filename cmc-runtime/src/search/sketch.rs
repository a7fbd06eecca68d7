//! A fixed-size estimate of the distinct states a swarm of walks saw.

use crate::memory::Fingerprint;

/// Distinct fingerprints seen, estimated in a fixed 4 KiB (HyperLogLog,
/// 4096 registers: a standard error of about 1.6 %).
pub(super) struct Sketch {
    pub(super) registers: Vec<u8>,
}

impl Sketch {
    pub(super) const BITS: u32 = 12;

    pub(super) fn new() -> Self {
        Sketch {
            registers: vec![0; 1 << Self::BITS],
        }
    }

    pub(super) fn insert(&mut self, fp: Fingerprint) {
        // Fingerprints are uniform; mix anyway, as the low half may be all
        // there is (64-bit fingerprints).
        let h = crate::sys::hash::fmix64(fp.0 as u64 ^ (fp.0 >> 64) as u64);
        let index = (h >> (64 - Self::BITS)) as usize;
        let rank = ((h << Self::BITS) | (1 << (Self::BITS - 1))).leading_zeros() as u8 + 1;
        let r = &mut self.registers[index];
        *r = (*r).max(rank);
    }

    /// The sketch of what `sketches` (registers of sketches) saw together.
    #[cfg_attr(
        not(feature = "cluster"),
        allow(dead_code, reason = "the MPI search calls it (feature `cluster`)")
    )]
    pub(super) fn union<'a>(sketches: impl IntoIterator<Item = &'a [u8]>) -> Sketch {
        let mut all = Sketch::new();
        for registers in sketches {
            assert_eq!(
                registers.len(),
                all.registers.len(),
                "sketches of the same size"
            );
            for (a, &r) in all.registers.iter_mut().zip(registers) {
                *a = (*a).max(r);
            }
        }
        all
    }

    pub(super) fn estimate(&self) -> u64 {
        let m = self.registers.len() as f64;
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let sum: f64 = self.registers.iter().map(|&r| (-f64::from(r)).exp2()).sum();
        let raw = alpha * m * m / sum;
        let zeros = self.registers.iter().filter(|&&r| r == 0).count();
        let estimate = if raw <= 2.5 * m && zeros > 0 {
            // Small counts: linear counting.
            m * (m / zeros as f64).ln()
        } else {
            raw
        };
        estimate.round() as u64
    }
}
