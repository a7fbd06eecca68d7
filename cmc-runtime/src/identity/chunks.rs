//! Hashes of long runs of bytes, remembered by the pages that held them.
//!
//! A process whose state is a large vector, of which a transition changes
//! one element, would otherwise be hashed whole after every transition: the
//! cost of a transition would grow with the size of the state, not with
//! what the transition changed. So a long *run* — a slice of values whose
//! hash reads their own bytes only, or a long `write` of raw bytes — is
//! hashed in chunks at fixed offsets from its start, and its hash is the
//! position-weighted sum of its chunks' hashes (the terms of
//! [`crate::sys::hash::term`]), fed to the hasher as one value.
//!
//! A chunk's hash is a function of its bytes, and the memory knows, for
//! every page it holds, whether the page still equals a stored page and
//! which (`Memory::page_serials`: a serial names a stored page's contents
//! for as long as the store lives). So a chunk's hash is remembered under
//! the serials of its pages, twice:
//!
//! * per run (its address, length and hashing function), the last hash of
//!   each chunk with the serials it was computed from: checking that a
//!   chunk is unchanged costs a comparison of two numbers;
//! * in a table by (serials, offset in the page, length, function), for a
//!   chunk that comes back in another state, or in a run that moved.
//!
//! A transition that changes one page rehashes the chunks on it and
//! compares serials for the others.
//!
//! The chunking is part of the hash: a long run hashes the same whether
//! the cache is on, off or cold, and wherever it lies in memory. Only the
//! speed depends on the cache.

use std::cell::{Cell, RefCell};
use std::hash::{BuildHasherDefault, Hasher};

use crate::memory::Memory;
use crate::sys::PAGE;

/// Bytes per chunk.
pub(crate) const CHUNK_BYTES: usize = 4096;

/// Runs shorter than this many bytes are hashed as before, in one piece
/// (chunking them would save nothing).
pub(crate) const MIN_RUN_BYTES: usize = 2 * CHUNK_BYTES;

/// Remembered hashes (chunks in the table, chunks over all runs) before
/// the cache is emptied and refilled.
const MAX_ENTRIES: usize = 1 << 20;

/// What a chunk's hash is remembered under in the table: the serials of
/// the (one or two) pages holding it, where in the first it starts, its
/// length, and which function hashed it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    serials: [u64; 2],
    offset: u32,
    len: u32,
    kind: usize,
}

/// A run: its address, its length in bytes, and the function that hashes
/// its chunks.
type RunKey = (usize, usize, usize);

/// The last hash of each chunk of a run, with the serials of its pages
/// then (0: not known).
type RunMemo = Vec<([u64; 2], u128)>;

/// A hasher for keys made of serials and addresses, which are already
/// spread out: a multiply-rotate per word.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        crate::sys::hash::fmix64(self.0)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..b.len()].copy_from_slice(b);
            self.write_u64(u64::from_le_bytes(w));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(23) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

type Build = BuildHasherDefault<KeyHasher>;

#[derive(Default)]
struct Cache {
    chunks: hashbrown::HashMap<Key, u128, Build>,
    runs: hashbrown::HashMap<RunKey, RunMemo, Build>,
    /// Chunks over all runs' memos.
    run_chunks: usize,
    /// Scratch for the serials of a run's pages.
    serials: Vec<u64>,
}

thread_local! {
    /// The memory whose pages the hashes being computed read, while the
    /// engine computes a fingerprint (see [`with_memory`]).
    static MEMORY: Cell<*const Memory> = const { Cell::new(std::ptr::null()) };
    static CACHE: RefCell<Option<Cache>> = const { RefCell::new(None) };
    /// Chunks hashed and chunks whose hash was remembered, for tests and
    /// benchmarks.
    static COUNTS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// Runs `f` (which computes fingerprints of objects in `mem`'s arenas) with
/// the cache reading `mem`'s pages.
pub(crate) fn with_memory<R>(mem: &Memory, f: impl FnOnce() -> R) -> R {
    struct Reset(*const Memory);
    impl Drop for Reset {
        fn drop(&mut self) {
            MEMORY.with(|m| m.set(self.0));
        }
    }
    let _reset = Reset(MEMORY.with(|m| m.replace(mem)));
    f()
}

/// (Chunks hashed, chunks whose remembered hash was used) on this thread
/// so far.
pub(crate) fn counts() -> (u64, u64) {
    COUNTS.with(Cell::get)
}

fn count(hashed: u64, found: u64) {
    COUNTS.with(|c| {
        let (h, f) = c.get();
        c.set((h + hashed, f + found));
    });
}

/// The hash of the run of `len` bytes at `start`, cut in chunks of
/// `chunk_bytes` (the last one shorter); `compute(i)` hashes chunk `i` from
/// its bytes alone, and `kind` names it (a function address).
pub(crate) fn run(
    start: usize,
    len: usize,
    chunk_bytes: usize,
    kind: usize,
    mut compute: impl FnMut(usize) -> u128,
) -> u128 {
    let n = len.div_ceil(chunk_bytes);
    let mut sum = 0u128;
    let mem = MEMORY.with(Cell::get);
    // The cache lives in checker memory, whatever arena is current.
    let _sys = crate::sys::scope::system_scope();
    let cached = !mem.is_null()
        && CACHE.with(|c| {
            // A chunk's hashing may itself hash a long run (an element
            // that is a large array): that inner run goes uncached.
            let Ok(mut c) = c.try_borrow_mut() else {
                return false;
            };
            let c = c.get_or_insert_with(Cache::default);
            let mut serials = std::mem::take(&mut c.serials);
            // SAFETY: `with_memory` set the pointer from a reference that
            // outlives the call it wraps, and resets it when that call ends.
            let known = unsafe { &*mem }.page_serials(start, len, &mut serials);
            if known {
                sum = cached_run(c, &serials, (start, len, kind), chunk_bytes, &mut compute);
            }
            c.serials = serials;
            known
        });
    if cached {
        return sum;
    }
    count(n as u64, 0);
    for i in 0..n {
        sum = sum.wrapping_add(crate::sys::hash::term(0, i, compute(i)));
    }
    sum
}

/// [`run`] when the serials of the run's pages are known (`serials[k]`:
/// the `k`-th page from the run's first).
fn cached_run(
    c: &mut Cache,
    serials: &[u64],
    run: RunKey,
    chunk_bytes: usize,
    compute: &mut impl FnMut(usize) -> u128,
) -> u128 {
    let (start, len, kind) = run;
    let n = len.div_ceil(chunk_bytes);
    if c.run_chunks + n > MAX_ENTRIES && !c.runs.contains_key(&run) {
        c.runs.clear();
        c.run_chunks = 0;
    }
    if c.chunks.len() + n > MAX_ENTRIES {
        c.chunks.clear();
    }
    let memo = c.runs.entry(run).or_insert_with(|| {
        c.run_chunks += n;
        vec![([0, 0], 0); n]
    });
    let first_page = start / PAGE;
    let (mut hashed, mut found) = (0u64, 0u64);
    let mut sum = 0u128;
    for (i, slot) in memo.iter_mut().enumerate() {
        let from = start + i * chunk_bytes;
        let bytes = chunk_bytes.min(start + len - from);
        let (pa, pb) = (from / PAGE, (from + bytes - 1) / PAGE);
        let pages = [
            serials[pa - first_page],
            if pb == pa {
                u64::MAX
            } else {
                serials[pb - first_page]
            },
        ];
        let h = if pages[0] == 0 || pages[1] == 0 || pb > pa + 1 {
            // A page that may have changed (or a chunk over more than two
            // pages, an element larger than a page): hash the chunk,
            // remember nothing.
            *slot = ([0, 0], 0);
            hashed += 1;
            compute(i)
        } else if slot.0 == pages {
            found += 1;
            slot.1
        } else {
            let key = Key {
                serials: pages,
                offset: (from % PAGE) as u32,
                len: bytes as u32,
                kind,
            };
            let h = match c.chunks.get(&key) {
                Some(&h) => {
                    found += 1;
                    h
                }
                None => {
                    hashed += 1;
                    let h = compute(i);
                    c.chunks.insert(key, h);
                    h
                }
            };
            *slot = (pages, h);
            h
        };
        sum = sum.wrapping_add(crate::sys::hash::term(0, i, h));
    }
    count(hashed, found);
    sum
}

/// Feeds `bytes` (at least [`MIN_RUN_BYTES`] long) to `h` as a long run:
/// its length, then the sum of its chunks' terms.
pub(crate) fn write_run(h: &mut crate::sys::hash::FoldStream, bytes: &[u8]) {
    debug_assert!(bytes.len() >= MIN_RUN_BYTES);
    let sum = run(bytes.as_ptr() as usize, bytes.len(), CHUNK_BYTES, 0, |i| {
        let piece = &bytes[i * CHUNK_BYTES..bytes.len().min((i + 1) * CHUNK_BYTES)];
        // A chunk is shorter than a run: `StateHasher::write` would feed it
        // to the stream as these bytes.
        let mut s = crate::sys::hash::FoldStream::default();
        s.bytes(piece);
        s.finish128()
    });
    h.word(bytes.len() as u64);
    h.word(sum as u64);
    h.word((sum >> 64) as u64);
}
