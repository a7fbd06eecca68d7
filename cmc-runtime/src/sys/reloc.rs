//! Pointers hashed as offsets: a word of a page that points into one of
//! the memory's arenas, or into a loaded module, is hashed as (arena,
//! offset) or (module, offset), so that fingerprints do not depend on where
//! things happen to be mapped (see `sys::layout`). Page contents are stored
//! unchanged; only their hashes see the relocation.

use super::hash::{fold_hash_mapped, sip_hash};

/// Which function hashes page contents.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PageHasher {
    /// A multiply-fold hash, several times faster than SipHash (the default).
    #[default]
    Fold,
    /// SipHash-1-3 with two fixed keys (128 bits): the slow, well-studied
    /// reference.
    Sip,
}

/// Marks a relocated pointer, so that a relative offset never hashes like
/// the same small integer.
const RELOCATED: u64 = 0xc3a5_c85c_97cb_3127;

/// What every word among user-space addresses outside the arenas and the
/// program hashes as under [`Relocation::identity`].
const SYSTEM_WORD: u64 = 0x3c79_ac49_2e8d_01b7;

/// What the upper half of a word that holds the stack protector's canary
/// hashes as (see [`Relocation::identity`]).
const CANARY_WORD: u64 = 0x6ca7_a27e_0000_0000;

/// This thread's stack-protector canary, as the C library keeps it (x86-64
/// Linux: at offset 0x28 of the thread control block); 0 elsewhere.
fn stack_canary() -> u64 {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let canary: u64;
        // SAFETY: on x86-64 Linux the thread pointer (fs) addresses the
        // thread control block, whose word at 0x28 is the canary; a read.
        unsafe {
            std::arch::asm!("mov {}, qword ptr fs:0x28", out(reg) canary, options(nostack, readonly, preserves_flags));
        }
        canary
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        0
    }
}

/// User-space addresses: x86-64 and AArch64 Linux map the program, the
/// system heap, thread stacks and other mappings in `[2^44, 2^48)` (the
/// arenas sit at 2^45, the program around 2^46.5, stacks below 2^47).
const SYSTEM_LOW: u64 = 1 << 44;
const SYSTEM_SPAN: u64 = (1 << 48) - (1 << 44);

/// Whether `w`, read as an address, lies in a page the process has mapped.
///
/// A word among user-space addresses is garbage (a pointer left behind
/// in padding) only when it points somewhere. A word whose high bytes are
/// left over from such a pointer and whose low bytes are a field the
/// program wrote (a `u32` and a `bool` followed by padding that kept the
/// top of an old address) lies among user-space addresses too, but points
/// nowhere: it is data, and it must hash as itself, or states that differ
/// in that field would count as one. One system call, for the rare words
/// in that range that are neither the arenas' nor the program's.
fn mapped(w: u64) -> bool {
    let page = (w as usize) & !(crate::sys::PAGE - 1);
    let mut residency = 0u8;
    // SAFETY: mincore reads no memory at `page`; it writes one byte per
    // page of the one-byte range into `residency`, and fails with ENOMEM
    // when the page is not mapped.
    unsafe { libc::mincore(page as *mut libc::c_void, 1, &mut residency) == 0 }
}

/// The arenas whose pointers are hashed as (arena index, offset).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Relocation {
    /// `[low, low + span)` covers every arena: a quick rejection test.
    low: u64,
    span: u64,
    /// The same for the loaded modules (see `sys::layout`), whose
    /// pointers hash as (module, offset).
    module_low: u64,
    module_span: u64,
    /// Whether every other word in the range of user-space addresses hashes
    /// as [`SYSTEM_WORD`], and the stack protector's canary is masked.
    system: bool,
    /// The upper half of this process's stack-protector canary (0: none).
    canary: u64,
    /// (base, length, index) of each arena, sorted by base.
    arenas: Vec<(u64, u64, u64)>,
}

impl Relocation {
    /// No relocation: every word is hashed as it is.
    pub(crate) const NONE: Relocation = Relocation {
        low: 0,
        span: 0,
        module_low: 0,
        module_span: 0,
        system: false,
        canary: 0,
        arenas: Vec::new(),
    };

    /// Only pointers into loaded modules are relocated. One-to-one: page
    /// contents are interned by this hash.
    pub(crate) fn modules() -> Relocation {
        let m = crate::sys::layout::modules();
        Relocation {
            module_low: m.low,
            module_span: m.span,
            ..Relocation::NONE
        }
    }

    /// [`Relocation::modules`], and every word that lies among user-space
    /// addresses outside the arenas and the program hashes alike: a
    /// pointer into the stack, the system heap or another mapping, which no
    /// state owns — garbage left in padding (a formatter's argument, the
    /// address of the C library's malloc arena), or a lazily initialized
    /// global's address — and whose value changes with address
    /// randomization and stack depth. One tag for all of them: a garbage
    /// word may fall in a thread's stack in one run and next to it in
    /// another. Integers that large (above 2^44) are rare outside random or
    /// hashed values. Not one-to-one: for identities only (the canonical
    /// heap's object terms), never to intern contents.
    ///
    /// The C library's functions leave their stack-protector canary on the
    /// stack, a random value of the process; a handler that later writes a
    /// byte or two of a value into such a slot leaves the rest of the canary
    /// in the padding. A word whose upper half is the canary's hashes with
    /// that half replaced by a tag (a chance of 2^-32 for another value).
    pub(crate) fn identity() -> Relocation {
        Relocation {
            system: true,
            canary: stack_canary() >> 32,
            ..Relocation::modules()
        }
    }

    /// Adds arena number `index` at `[base, base + len)`.
    pub(crate) fn add(&mut self, index: usize, base: u64, len: u64) {
        let at = self.arenas.partition_point(|&(b, _, _)| b < base);
        self.arenas.insert(at, (base, len, index as u64));
        let low = self.arenas[0].0;
        let high = self
            .arenas
            .iter()
            .map(|&(b, l, _)| b + l)
            .max()
            .unwrap_or(low);
        self.low = low;
        self.span = high - low;
    }

    /// The arenas that aligned words of `data` point into, as a bit set
    /// (bit k: arena k; arenas from 63 on share bit 63). Conservative: an
    /// integer that happens to lie in an arena counts as a pointer.
    pub(crate) fn arena_mask(&self, data: &[u8]) -> u64 {
        let mut mask = 0u64;
        for chunk in data.chunks_exact(8) {
            let w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            if w.wrapping_sub(self.low) < self.span {
                let at = self.arenas.partition_point(|&(b, _, _)| b <= w);
                if let Some(&(b, l, index)) = at.checked_sub(1).map(|k| &self.arenas[k]) {
                    if w - b < l {
                        mask |= 1 << index.min(63);
                    }
                }
            }
        }
        mask
    }

    #[inline(always)]
    fn apply(&self, w: u64) -> u64 {
        let r = if w.wrapping_sub(self.low) < self.span {
            self.locate(w)
        } else if w.wrapping_sub(self.module_low) < self.module_span {
            crate::sys::layout::modules().relocate(w)
        } else {
            w
        };
        if r == w && self.system {
            if w.wrapping_sub(SYSTEM_LOW) < SYSTEM_SPAN && mapped(w) {
                return SYSTEM_WORD;
            }
            if self.canary != 0 && w >> 32 == self.canary {
                return (w & 0xffff_ffff) ^ CANARY_WORD;
            }
        }
        r
    }

    #[cold]
    fn locate(&self, w: u64) -> u64 {
        let i = self.arenas.partition_point(|&(b, _, _)| b <= w);
        match i.checked_sub(1).map(|i| self.arenas[i]) {
            Some((base, len, index)) if w - base < len => ((index << 40) | (w - base)) ^ RELOCATED,
            _ => w,
        }
    }
}

/// [`fold_hash`](super::hash::fold_hash) with pointers into `reloc` hashed
/// as offsets.
#[inline]
pub(crate) fn fold_hash_relocated(data: &[u8], reloc: &Relocation) -> u128 {
    fold_hash_mapped(data, |w| reloc.apply(w))
}

impl PageHasher {
    /// Hashes `data` (a whole page, or the used prefix of the last page).
    pub fn hash(self, data: &[u8]) -> u128 {
        self.hash_relocated(data, &Relocation::NONE)
    }

    /// Hashes `data` with pointers into `reloc` hashed as offsets.
    pub(crate) fn hash_relocated(self, data: &[u8], reloc: &Relocation) -> u128 {
        match self {
            PageHasher::Fold => fold_hash_relocated(data, reloc),
            PageHasher::Sip if reloc.span == 0 && reloc.module_span == 0 => sip_hash(data),
            PageHasher::Sip => {
                let mut buf = [0u8; crate::sys::PAGE];
                let buf = &mut buf[..data.len()];
                buf.copy_from_slice(data);
                for w in buf.chunks_exact_mut(8) {
                    let v = reloc.apply(u64::from_le_bytes((&*w).try_into().expect("8 bytes")));
                    w.copy_from_slice(&v.to_le_bytes());
                }
                sip_hash(buf)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relocated_pointers_hash_as_offsets() {
        let a_low = 0x2000_0000_0000u64;
        let b_low = 0x3000_0000_0000u64;
        let span = 1 << 30;
        let at = |low: u64| {
            let mut r = Relocation::default();
            r.add(0, low, span);
            r.add(1, low + 5 * span, span);
            r
        };
        let page = |low: u64| {
            let mut p = vec![0u8; 4096];
            p[8..16].copy_from_slice(&(low + 0x1234).to_le_bytes());
            p[100..108].copy_from_slice(&7u64.to_le_bytes());
            p
        };
        for hasher in [PageHasher::Fold, PageHasher::Sip] {
            let ha = hasher.hash_relocated(&page(a_low), &at(a_low));
            let hb = hasher.hash_relocated(&page(b_low), &at(b_low));
            assert_eq!(
                ha, hb,
                "{hasher:?}: the same structure at another address hashes differently"
            );
            assert_ne!(hasher.hash(&page(a_low)), hasher.hash(&page(b_low)));
            // A relocated pointer is not confused with the integer offset.
            let mut plain = vec![0u8; 4096];
            plain[8..16].copy_from_slice(&0x1234u64.to_le_bytes());
            plain[100..108].copy_from_slice(&7u64.to_le_bytes());
            assert_ne!(hasher.hash_relocated(&plain, &at(a_low)), ha);
            // The same offset in another arena is another pointer.
            let mut other = page(a_low);
            other[8..16].copy_from_slice(&(a_low + 5 * span + 0x1234).to_le_bytes());
            assert_ne!(hasher.hash_relocated(&other, &at(a_low)), ha);
            // A pointer in the last, partial stripe is relocated too.
            let short = |low: u64| {
                let mut p = vec![0u8; 40];
                p[24..32].copy_from_slice(&(low + 0x40).to_le_bytes());
                p
            };
            assert_eq!(
                hasher.hash_relocated(&short(a_low), &at(a_low)),
                hasher.hash_relocated(&short(b_low), &at(b_low)),
                "{hasher:?}: a pointer in the tail was hashed as an address"
            );
            // Arenas at other distances from each other still agree.
            let mut far = Relocation::default();
            far.add(0, b_low, span);
            far.add(1, b_low + 9 * span, span);
            assert_eq!(hasher.hash_relocated(&page(b_low), &far), ha);
        }
    }
}
