//! The visited set: fingerprints only (hash compaction), in open-addressing
//! tables of their own (Robin Hood linear probing): a slot is the
//! fingerprint and nothing else, 8 bytes for a 64-bit one.
//!
//! The set is split into [`SHARDS`] tables by four bits of the fingerprint
//! that no table's slot index depends on (bits 32 to 35): a table that
//! grows allocates its new array while the old one is still live, so with
//! one table the peak memory of a search would be about 1.5 times what the
//! set needs just as it grows; with sixteen, each grows on its own and the
//! peak exceeds the need by a sixteenth of that.
//!
//! A table grows by half when it is seven eighths full, so it is between
//! 58 % and 88 % full: 9.1 to 13.7 bytes per 64-bit fingerprint. (A
//! `hashbrown` set, which this replaced, doubles at seven eighths and keeps
//! a control byte per slot: between 44 % and 88 % full, 10.3 to 20.6 bytes.)
//! Robin Hood probing keeps the probe sequences short at that load: a slot
//! holds the key that is furthest from its home slot, and a lookup stops as
//! soon as it meets a key closer to home than it would be.

use std::hash::Hasher;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::memory::{Fingerprint, FingerprintWidth};

/// A hasher that passes a fingerprint through, for `hashbrown` maps keyed
/// by fingerprints (the sleep sets').
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
            self.0 = crate::sys::hash::fmix64(self.0 ^ u64::from_le_bytes(w));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn write_u128(&mut self, n: u128) {
        self.0 = n as u64 ^ (n >> 64) as u64;
    }
}

/// Tables the set is split into.
pub const SHARDS: usize = 16;

fn shard(fp: u64) -> usize {
    (fp >> 32) as usize % SHARDS
}

/// Asks the processor to load the cache line of `p` (a hint: it reads
/// nothing the program sees and never faults, whatever the address).
#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch instruction has no effect on memory or on the
    // program's state and cannot fault on any address; SSE is part of
    // every x86-64 processor.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p.cast::<i8>(), std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// A fingerprint as a table keeps it: 0 marks an empty slot (the key 0
/// itself is kept apart, in [`Table::zero`]).
trait Key: Copy + Eq + Default {
    /// Bytes of a slot.
    const BYTES: usize;
    /// 64 bits that spread the key over the table (its low word: bits 32 to
    /// 35 choose the shard, the slot depends on the high bits of this
    /// word's product with the capacity).
    fn spread(self) -> u64;
}

impl Key for u64 {
    const BYTES: usize = 8;
    fn spread(self) -> u64 {
        self
    }
}

impl Key for u128 {
    const BYTES: usize = 16;
    fn spread(self) -> u64 {
        self as u64
    }
}

/// A table's slots, zeroed (all empty), in a mapping of their own: a
/// table that grows gives its old slots back to the system at once (the C
/// library's heap would keep large freed blocks, and with them a peak of
/// every table the set outgrew).
struct Slots<K> {
    ptr: std::ptr::NonNull<K>,
    len: usize,
}

impl<K: Key> Slots<K> {
    /// `len` empty slots.
    fn new(len: usize) -> Self {
        if len == 0 {
            return Slots {
                ptr: std::ptr::NonNull::dangling(),
                len: 0,
            };
        }
        let bytes = len * K::BYTES;
        // A fresh anonymous private mapping, which the kernel fills with
        // zeros (empty slots: the key 0).
        let p = injected_map_failure()
            .map_or_else(|| crate::sys::map_zeroed(bytes, false), Err)
            .unwrap_or_else(|e| {
                crate::sys::process::checker_failure(&format!(
                    "cannot map {bytes} bytes for the visited set: {e}"
                ))
            });
        Slots {
            ptr: std::ptr::NonNull::new(p.cast()).expect("mmap returned null"),
            len,
        }
    }
}

/// Fault injection for the tests of cmc's own failures: with
/// `CMC_FAULT_VISITED_MAP=K`, the K-th mapping of a visited table in this
/// process (from 1) is refused, as the kernel refuses one under
/// `ulimit -v`.
fn injected_map_failure() -> Option<std::io::Error> {
    static MAPS: AtomicU64 = AtomicU64::new(0);
    let n = MAPS.fetch_add(1, Ordering::Relaxed) + 1;
    let _sys = crate::sys::scope::system_scope();
    let k: u64 = std::env::var("CMC_FAULT_VISITED_MAP").ok()?.parse().ok()?;
    (n == k).then(|| std::io::Error::from_raw_os_error(libc::ENOMEM))
}

impl<K> std::ops::Deref for Slots<K> {
    type Target = [K];
    fn deref(&self) -> &[K] {
        // SAFETY: `len` initialised (zeroed) keys at `ptr`, owned by us.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<K> std::ops::DerefMut for Slots<K> {
    fn deref_mut(&mut self) -> &mut [K] {
        // SAFETY: as for `deref`, and `&mut self` is the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<K> Drop for Slots<K> {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: our own mapping of exactly this size, not used again.
            unsafe { crate::sys::unmap(self.ptr.as_ptr().cast(), self.len * size_of::<K>()) };
        }
    }
}

impl<K> std::fmt::Debug for Slots<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Slots({})", self.len)
    }
}

// SAFETY: the slots are plain keys owned by this value alone.
unsafe impl<K: Send> Send for Slots<K> {}

/// One shard: a Robin Hood table of keys.
#[derive(Debug)]
struct Table<K> {
    slots: Slots<K>,
    /// Keys in `slots`.
    len: usize,
    /// Whether the key 0 (which marks empty slots) is in the set.
    zero: bool,
}

impl<K: Key> Default for Table<K> {
    fn default() -> Self {
        Table {
            slots: Slots::new(0),
            len: 0,
            zero: false,
        }
    }
}

/// The smallest table, in slots: a page.
const FIRST_TABLE_SLOTS: usize = 512;

impl<K: Key> Table<K> {
    /// The home slot of a key in a table of `cap` slots.
    fn home(key: K, cap: usize) -> usize {
        ((u128::from(key.spread()) * cap as u128) >> 64) as usize
    }

    /// How far `slot` is from the home of `key`, in a table of `cap`.
    fn distance(key: K, slot: usize, cap: usize) -> usize {
        let home = Self::home(key, cap);
        if slot >= home {
            slot - home
        } else {
            slot + cap - home
        }
    }

    fn contains(&self, key: K) -> bool {
        if key == K::default() {
            return self.zero;
        }
        let cap = self.slots.len();
        if cap == 0 {
            return false;
        }
        let mut at = Self::home(key, cap);
        let mut dist = 0;
        loop {
            let here = self.slots[at];
            if here == key {
                return true;
            }
            // An empty slot, or a key closer to its home than `key` would
            // be here: `key` would have taken this slot.
            if here == K::default() || Self::distance(here, at, cap) < dist {
                return false;
            }
            at += 1;
            if at == cap {
                at = 0;
            }
            dist += 1;
        }
    }

    /// Asks the processor to bring the slot where a lookup of `key`
    /// starts into its cache.
    fn prefetch(&self, key: K) {
        let cap = self.slots.len();
        if cap > 0 {
            prefetch(self.slots.as_ptr().wrapping_add(Self::home(key, cap)));
        }
    }

    /// Adds `key`; true if it was not there.
    fn insert(&mut self, key: K) -> bool {
        if key == K::default() {
            return !std::mem::replace(&mut self.zero, true);
        }
        if self.contains(key) {
            return false;
        }
        if (self.len + 1) * 10 > self.slots.len() * 9 {
            self.grow();
        }
        self.place(key);
        self.len += 1;
        true
    }

    /// Puts a key that is not in the table into it (which has room).
    fn place(&mut self, key: K) {
        let cap = self.slots.len();
        let mut key = key;
        let mut at = Self::home(key, cap);
        let mut dist = 0;
        loop {
            let here = self.slots[at];
            if here == K::default() {
                self.slots[at] = key;
                return;
            }
            let theirs = Self::distance(here, at, cap);
            if theirs < dist {
                // The resident is closer to home: it moves on instead.
                self.slots[at] = key;
                key = here;
                dist = theirs;
            }
            at += 1;
            if at == cap {
                at = 0;
            }
            dist += 1;
        }
    }

    /// Moves every key into a table a quarter larger.
    ///
    /// A key's home slot grows with the key, so a Robin Hood table holds
    /// its keys in the order of their homes, beginning where a run of
    /// keys does not continue from the end of the table (the keys before
    /// that wrapped around). Copied in that order, each key goes to its new
    /// home or, if that is taken, to the slot after the last key copied:
    /// the layout Robin Hood insertion gives sorted keys, built without
    /// probing. Keys that shared an old home may come in the wrong order
    /// for their new ones, and keys that would run past the end of the
    /// table have no slot ahead: those are placed as usual.
    fn grow(&mut self) {
        let cap = (self.slots.len() + self.slots.len() / 4).max(FIRST_TABLE_SLOTS);
        let old = std::mem::replace(&mut self.slots, Slots::new(cap));
        let old_cap = old.len();
        // The keys at the start that wrapped around from the end: each
        // sits before its home.
        let wrapped = old
            .iter()
            .enumerate()
            .take_while(|&(i, &k)| k != K::default() && Self::home(k, old_cap) > i)
            .count();
        // Every slot from the home of the last key copied in order up to
        // `next` is taken.
        let (mut next, mut last_home) = (0, 0);
        let mut late = Vec::new();
        for &key in old[wrapped..].iter().chain(&old[..wrapped]) {
            if key == K::default() {
                continue;
            }
            let home = Self::home(key, cap);
            let at = home.max(next);
            if home < last_home {
                self.place(key);
                // Its displacement chain ended in the first free slot.
                while next < cap && self.slots[next] != K::default() {
                    next += 1;
                }
            } else if at < cap {
                self.slots[at] = key;
                (next, last_home) = (at + 1, home);
            } else {
                late.push(key);
            }
        }
        for key in late {
            self.place(key);
        }
    }

    fn len(&self) -> usize {
        self.len + usize::from(self.zero)
    }

    fn memory_bytes(&self) -> usize {
        self.slots.len() * K::BYTES
    }
}

/// The set of fingerprints of visited states.
#[derive(Debug)]
pub struct Visited {
    narrow: Vec<Table<u64>>,
    wide: Vec<Table<u128>>,
    width: FingerprintWidth,
}

impl Visited {
    /// An empty set keeping `width` bits per state.
    pub fn new(width: FingerprintWidth) -> Self {
        let wide = width == FingerprintWidth::Bits128;
        Visited {
            narrow: (0..if wide { 0 } else { SHARDS })
                .map(|_| Table::default())
                .collect(),
            wide: (0..if wide { SHARDS } else { 0 })
                .map(|_| Table::default())
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

    /// Starts bringing the memory a lookup of `fp` reads into the
    /// processor's cache, so that several lookups can wait for memory at
    /// once (a hint: it changes nothing).
    pub fn prefetch(&self, fp: Fingerprint) {
        let low = fp.0 as u64;
        match self.width {
            FingerprintWidth::Bits128 => self.wide[shard(low)].prefetch(fp.0),
            _ => self.narrow[shard(low)].prefetch(low),
        }
    }

    /// Whether the fingerprint is in the set.
    pub fn contains(&self, fp: Fingerprint) -> bool {
        let low = fp.0 as u64;
        match self.width {
            FingerprintWidth::Bits128 => self.wide[shard(low)].contains(fp.0),
            _ => self.narrow[shard(low)].contains(low),
        }
    }

    /// Number of fingerprints.
    pub fn len(&self) -> usize {
        self.narrow.iter().map(Table::len).sum::<usize>()
            + self.wide.iter().map(Table::len).sum::<usize>()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the table occupies (its allocated capacity).
    pub fn memory_bytes(&self) -> usize {
        self.narrow.iter().map(Table::memory_bytes).sum::<usize>()
            + self.wide.iter().map(Table::memory_bytes).sum::<usize>()
    }
}

/// Shards of the shared visited set: the worker processes of a parallel
/// search lock one shard per insertion, so with 256 of them two workers
/// rarely wait for each other.
const SHARED_SHARDS: usize = 256;
/// Words of a shard's header: its lock, its capacity in slots, its length,
/// and the byte offset of its table in the region.
const SHARD_WORDS: usize = 4;
/// Header words before the shards: the next free byte of the table area,
/// and the number of fingerprints in the whole set.
const SHARED_HEADER: usize = 2;
/// Slots of a shard's first table.
const FIRST_SLOTS: u64 = 512;
/// The key that stands for a fingerprint whose kept bits are all zero (0
/// marks an empty slot): the two then count as one, a collision as likely
/// as any other of hash compaction.
const ZERO_KEY: u64 = 0x9e37_79b9_7f4a_7c15;

/// The visited set of a parallel search: one set in memory shared by every
/// worker process, mapped before they are forked. Each of its
/// [`SHARED_SHARDS`] shards is an open-addressing table (linear probing)
/// under a spin lock; a shard that is three quarters full moves to a table
/// twice its size, allocated from the region's free end, and gives the
/// old table's memory back to the system. Inserting is what claims a
/// state: the worker whose insertion adds a fingerprint owns the state it
/// stands for, and expands it.
pub(crate) struct SharedVisited {
    region: crate::sys::shm::Region,
    /// Words per slot: 1 (64-bit fingerprints) or 2 (128-bit).
    slot_words: usize,
}

impl SharedVisited {
    /// An empty set keeping `width` bits per fingerprint, in a region of
    /// up to `bytes` of address space.
    pub(crate) fn new(width: FingerprintWidth, bytes: usize) -> std::io::Result<Self> {
        let region = crate::sys::shm::Region::new(bytes, 64 << 20)?;
        let tables_at =
            ((SHARED_HEADER + SHARED_SHARDS * SHARD_WORDS) * 8).next_multiple_of(crate::sys::PAGE);
        let set = SharedVisited {
            region,
            slot_words: if width == FingerprintWidth::Bits128 {
                2
            } else {
                1
            },
        };
        set.region
            .word(0)
            .store(tables_at as u64, Ordering::Relaxed);
        for s in 0..SHARED_SHARDS {
            let bytes = FIRST_SLOTS as usize * set.slot_words * 8;
            let at = set.allocate(bytes).expect("room for the first tables");
            set.shard(s, CAP).store(FIRST_SLOTS, Ordering::Relaxed);
            set.shard(s, AT).store(at as u64, Ordering::Relaxed);
        }
        Ok(set)
    }

    fn shard(&self, s: usize, field: usize) -> &AtomicU64 {
        self.region.word(SHARED_HEADER + s * SHARD_WORDS + field)
    }

    /// `bytes` from the free end of the region, page aligned; `None` when
    /// the region is exhausted.
    fn allocate(&self, bytes: usize) -> Option<usize> {
        let bytes = bytes.next_multiple_of(crate::sys::PAGE) as u64;
        let at = self.region.word(0).fetch_add(bytes, Ordering::Relaxed);
        (at + bytes <= self.region.len() as u64).then_some(at as usize)
    }

    /// The key words of a fingerprint: never all zero.
    fn key(&self, fp: Fingerprint) -> (u64, u64) {
        let (lo, hi) = (fp.0 as u64, (fp.0 >> 64) as u64);
        match self.slot_words {
            1 if lo == 0 => (ZERO_KEY, 0),
            1 => (lo, 0),
            _ if lo == 0 && hi == 0 => (ZERO_KEY, 0),
            _ => (lo, hi),
        }
    }

    /// Adds a fingerprint; `Ok(true)` if it was not there (this caller
    /// claimed the state), `Err` when the region has no room left for the
    /// set to grow.
    pub(crate) fn insert(&self, fp: Fingerprint) -> Result<bool, Full> {
        let (lo, hi) = self.key(fp);
        let s = (lo >> 32) as usize % SHARED_SHARDS;
        let _guard = crate::sys::shm::lock(self.shard(s, LOCK));
        let mut cap = self.shard(s, CAP).load(Ordering::Relaxed);
        let len = self.shard(s, LEN).load(Ordering::Relaxed);
        if (len + 1) * 4 > cap * 3 {
            cap = self.grow(s, cap).ok_or(Full)?;
        }
        let at = self.shard(s, AT).load(Ordering::Relaxed) as usize;
        let (found, slot) = self.probe(at, cap, lo, hi);
        if found {
            return Ok(false);
        }
        self.put(slot, lo, hi);
        self.shard(s, LEN).store(len + 1, Ordering::Relaxed);
        self.region.word(1).fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// Whether the fingerprint is in the set: without the shard's lock, so
    /// a fingerprint another worker is adding may be missed (the caller
    /// then inserts it, under the lock, and learns it is there), but one
    /// not in the set is never found. Why: slots are written once and never
    /// cleared, a slot's first word is never zero once written, a table a
    /// shard outgrew is never reused (it reads as zeros once discarded),
    /// and every nonzero word past a table's start in the region is a
    /// fingerprint's. A reader that sees a shard's new table (`AT`, stored
    /// with release after `CAP`) sees its capacity; one that sees the old
    /// table with the new capacity probes past its end into tables
    /// allocated after it, where a match is still a fingerprint of the
    /// set. A two-word slot read while being written shows a zero or its
    /// own second word, so it can only fail to match.
    /// [`Visited::prefetch`] for the shared set.
    pub(crate) fn prefetch(&self, fp: Fingerprint) {
        let (lo, _) = self.key(fp);
        let s = (lo >> 32) as usize % SHARED_SHARDS;
        let at = self.shard(s, AT).load(Ordering::Acquire) as usize;
        let cap = self.shard(s, CAP).load(Ordering::Relaxed);
        if cap > 0 {
            let slot = at / 8 + (lo & (cap - 1)) as usize * self.slot_words;
            prefetch(self.region.word(slot).as_ptr().cast_const());
        }
    }

    pub(crate) fn contains(&self, fp: Fingerprint) -> bool {
        let (lo, hi) = self.key(fp);
        let s = (lo >> 32) as usize % SHARED_SHARDS;
        let at = self.shard(s, AT).load(Ordering::Acquire) as usize;
        let cap = self.shard(s, CAP).load(Ordering::Relaxed);
        self.probe(at, cap, lo, hi).0
    }

    /// Finds the key in the table at byte `at` of `cap` slots: whether it
    /// is there, and its slot or the empty slot where it belongs.
    fn probe(&self, at: usize, cap: u64, lo: u64, hi: u64) -> (bool, usize) {
        let mask = cap - 1;
        let mut i = lo & mask;
        loop {
            let slot = at / 8 + i as usize * self.slot_words;
            let w0 = self.region.word(slot).load(Ordering::Relaxed);
            if w0 == 0 {
                return (false, slot);
            }
            if w0 == lo
                && (self.slot_words == 1
                    || self.region.word(slot + 1).load(Ordering::Relaxed) == hi)
            {
                return (true, slot);
            }
            i = (i + 1) & mask;
        }
    }

    fn put(&self, slot: usize, lo: u64, hi: u64) {
        self.region.word(slot).store(lo, Ordering::Relaxed);
        if self.slot_words == 2 {
            self.region.word(slot + 1).store(hi, Ordering::Relaxed);
        }
    }

    /// Moves shard `s` (locked by the caller) to a table twice the size;
    /// its new capacity, or `None` when the region is exhausted.
    fn grow(&self, s: usize, cap: u64) -> Option<u64> {
        let old_at = self.shard(s, AT).load(Ordering::Relaxed) as usize;
        let new_cap = cap * 2;
        let bytes = new_cap as usize * self.slot_words * 8;
        let new_at = self.allocate(bytes)?;
        for i in 0..cap as usize {
            let slot = old_at / 8 + i * self.slot_words;
            let lo = self.region.word(slot).load(Ordering::Relaxed);
            if lo == 0 {
                continue;
            }
            let hi = if self.slot_words == 2 {
                self.region.word(slot + 1).load(Ordering::Relaxed)
            } else {
                0
            };
            let (found, to) = self.probe(new_at, new_cap, lo, hi);
            assert!(
                !found,
                "a fingerprint is twice in a shard of the shared set"
            );
            self.put(to, lo, hi);
        }
        self.shard(s, CAP).store(new_cap, Ordering::Relaxed);
        // Release: a lock-free reader that sees the new table sees its
        // capacity and contents (see `contains`).
        self.shard(s, AT).store(new_at as u64, Ordering::Release);
        self.region
            .discard(old_at, cap as usize * self.slot_words * 8);
        Some(new_cap)
    }

    /// Number of fingerprints, all workers' together.
    pub(crate) fn len(&self) -> u64 {
        self.region.word(1).load(Ordering::Relaxed)
    }

    /// Bytes the tables occupy.
    pub(crate) fn memory_bytes(&self) -> usize {
        (0..SHARED_SHARDS)
            .map(|s| self.shard(s, CAP).load(Ordering::Relaxed) as usize * self.slot_words * 8)
            .sum()
    }
}

/// The shared visited set has no room left to grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Full;

const LOCK: usize = 0;
const CAP: usize = 1;
const LEN: usize = 2;
const AT: usize = 3;

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

    /// One table against a plain set, through many growths: random keys,
    /// keys that all want the first slot, keys that all want the last one
    /// (their run wraps around the end), and the key 0; every key inserted
    /// is found, every other one is not.
    #[test]
    fn a_robin_hood_table_answers_as_a_plain_set() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
        for kind in 0..4 {
            let mut table = Table::<u64>::default();
            let mut reference = std::collections::HashSet::new();
            for i in 0..30_000u64 {
                let key = match kind {
                    0 => rng.gen::<u64>() % 20_000 * 0x9e37_79b9_7f4a_7c15,
                    1 => rng.gen_range(0..20_000u64),
                    2 => u64::MAX - rng.gen_range(0..20_000u64),
                    _ => [0, 1, u64::MAX, rng.gen::<u64>()][(i % 4) as usize],
                };
                assert_eq!(table.insert(key), reference.insert(key), "{kind}: {key}");
                assert!(table.contains(key));
                let other = rng.gen::<u64>() | 1 << 62;
                assert_eq!(table.contains(other), reference.contains(&other));
            }
            assert_eq!(table.len(), reference.len());
            for key in &reference {
                assert!(table.contains(*key));
            }
            assert!(
                table.len * 10 <= table.slots.len() * 9,
                "at most nine tenths full"
            );
            // The Robin Hood order: along a run, a key is at most one slot
            // further from home than the key before it.
            let cap = table.slots.len();
            for i in 0..cap {
                let (a, b) = (table.slots[i], table.slots[(i + 1) % cap]);
                if b != 0 {
                    let db = Table::<u64>::distance(b, (i + 1) % cap, cap);
                    let da = if a == 0 {
                        0
                    } else {
                        Table::<u64>::distance(a, i, cap) + 1
                    };
                    assert!(db <= da, "{kind}: slot {} is out of order", i + 1);
                }
            }
        }
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
            assert!(set.memory_bytes() >= set.len() * 8);
        }
    }

    /// The shared set, filled by two processes at once with overlapping
    /// random fingerprints, claims each distinct one exactly once, as a
    /// plain set counts them.
    #[test]
    fn shared_set_claims_each_fingerprint_once_across_processes() {
        use rand::{Rng, SeedableRng};
        for width in [FingerprintWidth::Bits64, FingerprintWidth::Bits128] {
            let set = SharedVisited::new(width, 1 << 30).expect("a shared region");
            let draw = |seed: u64| {
                let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
                (0..60_000)
                    .map(|_| {
                        Fingerprint(
                            u128::from(rng.gen_range(0..100_000u32))
                                * 0x9e37_79b9_7f4a_7c15_f39c_0001,
                        )
                    })
                    .collect::<Vec<_>>()
            };
            let claims = |fps: &[Fingerprint]| {
                fps.iter().filter(|&&f| set.insert(f).unwrap()).count() as u64
            };
            let (a, b) = (draw(1), draw(2));
            // SAFETY: the child only inserts into the shared set (no
            // allocation: the fingerprints are drawn before the fork) and
            // leaves with _exit.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0, "fork failed");
            if pid == 0 {
                claims(&a);
                // SAFETY: ends the child without running the test harness.
                unsafe { libc::_exit(0) };
            }
            let mine = claims(&b);
            let mut status = 0;
            // SAFETY: waits for our own child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
            let mut reference = std::collections::HashSet::new();
            for f in a.iter().chain(&b) {
                reference.insert(f.0);
            }
            assert_eq!(set.len(), reference.len() as u64);
            assert!(mine > 0 && mine <= set.len());
            for f in &reference {
                assert!(set.contains(Fingerprint(*f)));
            }
            assert!(!set.contains(Fingerprint(7)));
            assert!(set.memory_bytes() >= reference.len() * 8);
        }
    }

    /// `contains` takes no lock: while another process inserts (and the
    /// shards grow, again and again), it never finds a fingerprint that
    /// was not inserted, and once the inserts are over it finds every one.
    #[test]
    fn shared_set_lookups_without_the_lock_never_find_what_is_not_there() {
        for width in [FingerprintWidth::Bits64, FingerprintWidth::Bits128] {
            let set = SharedVisited::new(width, 1 << 30).expect("a shared region");
            let fp =
                |k: u64| Fingerprint(u128::from(k).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_0001));
            // Even numbers are inserted, odd ones never.
            let inserted: Vec<Fingerprint> = (0..400_000).map(|k| fp(2 * k)).collect();
            let absent: Vec<Fingerprint> = (0..2_000).map(|k| fp(2 * k + 1)).collect();
            // SAFETY: the child only inserts into the shared set (nothing
            // allocated after the fork) and leaves with _exit.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0, "fork failed");
            if pid == 0 {
                for &f in &inserted {
                    set.insert(f).unwrap();
                }
                // SAFETY: ends the child without running the test harness.
                unsafe { libc::_exit(0) };
            }
            let (mut rounds, mut seen) = (0u64, 0u64);
            let status = loop {
                for &f in &absent {
                    assert!(!set.contains(f), "found a fingerprint never inserted");
                }
                seen += inserted
                    .iter()
                    .step_by(97)
                    .filter(|&&f| set.contains(f))
                    .count() as u64;
                rounds += 1;
                let mut status = 0;
                // SAFETY: polls our own child.
                if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == pid {
                    break status;
                }
            };
            assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
            assert!(rounds > 1 && seen > 0, "the lookups overlapped the inserts");
            for &f in &inserted {
                assert!(set.contains(f), "an inserted fingerprint is found");
            }
            for &f in &absent {
                assert!(!set.contains(f));
            }
        }
    }
}
