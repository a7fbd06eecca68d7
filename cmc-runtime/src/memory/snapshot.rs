//! The memory of a model: its arenas, and the states captured from them.
//!
//! This is the layer the search engine stands on; it is public so that
//! benchmarks, tests and hand-written harnesses can drive it directly.
//!
//! ```text
//! let mut mem = Memory::new(MemoryConfig::default());
//! let p = mem.add_arena("process 0", ArenaConfig::default())?;
//! { let _in = mem.enter(p); /* build the process's state */ }
//! let s0 = mem.capture();            // all arenas → a state (pages shared)
//! mem.restore(s0);                   // only differing pages are written
//! { let _in = mem.enter(p); /* run a transition */ }
//! let s1 = mem.capture();            // only written pages are read
//! mem.fingerprint(s1);               // O(written pages) to compute
//! ```
//!
//! **Contract.** Arena memory may be modified only between a `restore` (or
//! the arena's creation) and the next `capture`, by code running inside
//! [`Memory::enter`]. A restore that follows modifications without a capture
//! in between discards them, as long as they were made inside `enter`.

use std::fmt;
use std::io;
use std::sync::atomic::Ordering;

use crate::memory::arena::{Arena, ArenaConfig, ArenaExhausted, Tracking};
use crate::memory::store::{PageId, PageStore, Slab, CHUNK, NO_PAGE};
use crate::memory::tracking;
use crate::sys::hash;
use crate::sys::reloc::{PageHasher, Relocation};
use crate::sys::scope::Entered;
use crate::sys::{self, Prot, PAGE};

/// How many bits of a state's fingerprint the visited set keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum FingerprintWidth {
    /// 64 bits (the default): with n states the chance that any two collide
    /// is about n²/2⁶⁵ — one in 37 000 for 10⁷ states.
    #[default]
    Bits64,
    /// 128 bits: collisions are out of reach for any feasible search.
    Bits128,
}

/// Configuration of a [`Memory`].
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct MemoryConfig {
    /// Fingerprint width.
    pub width: FingerprintWidth,
    /// The page hash.
    pub hasher: PageHasher,
    /// [`Memory::changes_among`] compares every arena and panics when one
    /// it was told could not change did (a test of the callers' reasoning;
    /// on when the environment variable `CMC_VERIFY_TOUCHED` is `1`).
    pub verify_touched: bool,
}

impl MemoryConfig {
    /// The defaults: 64-bit fingerprints, the fold page hash.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the fingerprint width.
    pub fn width(mut self, width: FingerprintWidth) -> Self {
        self.width = width;
        self
    }

    /// Sets [`MemoryConfig::verify_touched`].
    pub fn verify_touched(mut self, on: bool) -> Self {
        self.verify_touched = on;
        self
    }

    /// Sets the page hash.
    pub fn hasher(mut self, hasher: PageHasher) -> Self {
        self.hasher = hasher;
        self
    }
}

/// The fingerprint of a state (64 or 128 significant bits).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint(pub u128);

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 >> 64 == 0 {
            write!(f, "{:016x}", self.0)
        } else {
            write!(f, "{:032x}", self.0)
        }
    }
}

/// An arena of a [`Memory`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArenaId(pub usize);

/// A captured state. It stays valid until [`Memory::release`] drops its last
/// reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateId(u32);

/// One arena's stored contents in some state (its page table), held by a
/// reference taken with [`Memory::keep_table`]: a state can be built from
/// it without running anything ([`Memory::derive`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableId(pub(crate) u32);

/// The tracking mode an arena is in now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Compare pages with the loaded state.
    Scan,
    /// Write-protect pages and record faults.
    Mprotect,
}

/// Counts of what the memory holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryStats {
    /// Live states.
    pub states: usize,
    /// Live per-arena tables.
    pub tables: usize,
    /// Live chunks of page ids.
    pub chunks: usize,
    /// Distinct pages stored.
    pub pages: usize,
    /// Bytes of page contents stored.
    pub page_bytes: usize,
}

/// The in-arena heap's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeapStats {
    /// Bytes in use from the arena base (header, blocks and free blocks
    /// below the top).
    pub used: usize,
    /// Allocated blocks.
    pub live_blocks: usize,
    /// Usable bytes of the allocated blocks.
    pub live_bytes: usize,
    /// Free blocks below the top.
    pub free_blocks: usize,
    /// Bytes of the free blocks below the top, headers included.
    pub free_bytes: usize,
}

/// One arena's part of a state.
#[derive(Debug)]
struct Table {
    used: usize,
    sum: u128,
    chunks: Box<[u32]>,
    /// A fingerprint a client computed for exactly these contents (see
    /// [`Memory::tag`]); tables are shared between states whose arena did
    /// not change, so the tag is too.
    tag: Option<u128>,
    /// How many of its pages hold a word that points into another arena.
    foreign: u32,
    /// A 128-bit hash of the arena and `sum` (see [`Memory::arena_key`]).
    key: u128,
}

#[derive(Debug)]
struct StateData {
    tables: Box<[u32]>,
    fingerprint: Fingerprint,
    /// No arena holds a word that points into another arena.
    isolated: bool,
    /// A value a client computed from this state (see
    /// [`Memory::set_state_tag`]).
    tag: Option<u128>,
}

#[derive(Debug)]
struct ArenaRt {
    arena: Arena,
    name: String,
    tracking: Tracking,
    mode: Mode,
    /// True while no page is write-protected (scan mode, or before the first
    /// protecting restore): every page may have been written.
    all_writable: bool,
    /// In mprotect mode, the pages below this index were write-protected by
    /// the last restore, so writes to them fault; pages at or above it may
    /// have been written silently and must be read.
    protected_np: usize,
    /// Exponential moving average of pages changed per transition.
    avg_dirty: f64,
    /// In mprotect mode, the pages the last restore left writable because
    /// transitions keep writing them (see [`HOT_PAGES`]); they stay marked
    /// dirty, so every capture and restore reads them.
    hot: Vec<usize>,
    /// Restores since the hot pages were last protected again.
    hot_age: u32,
}

/// The most pages of an arena in mprotect mode that a restore leaves
/// writable: pages the transition wrote (they faulted, or were writable
/// already) stay writable and marked dirty, and are compared or hashed at
/// every capture instead of faulting again: a few hundred nanoseconds a
/// page against the several microseconds of a fault and the `mprotect`
/// that re-arms it. More written pages than this, and all are protected
/// again.
const HOT_PAGES: usize = 16;

/// Restores after which the hot pages are protected again regardless, so
/// that pages transitions stopped writing leave the set (the ones they
/// still write fault once and return).
const HOT_RESTORES: u32 = 64;

/// Cost model for `Tracking::Auto`, in nanoseconds, from the `snapshot`
/// benchmark on the reference machine (see the book's performance chapter):
/// scanning costs about 55 ns per used page (compare with the stored copy);
/// fault tracking costs about 5 µs per dirty page (the fault, plus the
/// `mprotect` that re-arms it) and about 3 µs per transition besides. The
/// break-even for one dirty page is therefore around 150 pages (600 KiB).
const SCAN_NS_PER_PAGE: f64 = 55.0;
const MPROTECT_NS_PER_DIRTY_PAGE: f64 = 5000.0;
const MPROTECT_NS_FIXED: f64 = 3000.0;

/// A model's arenas and the states captured from them.
///
/// Dropping the memory unmaps its arenas without running destructors of the
/// objects inside them.
#[derive(Debug)]
pub struct Memory {
    config: MemoryConfig,
    arenas: Vec<ArenaRt>,
    pages: PageStore,
    chunks: Slab<[PageId; CHUNK]>,
    tables: Slab<Table>,
    states: Slab<StateData>,
    /// The state memory holds (retained), if any capture happened.
    loaded: Option<StateId>,
    /// Entries into arenas so far (by [`Memory::enter`]); a restore can
    /// skip re-comparing scan-mode arenas when no code has run in any arena
    /// since the last capture. Per memory, not global: the checker's
    /// thread is the only one that enters (a thread user code starts
    /// allocates in its creator's arena without entering), and a global
    /// count would be shared with other memories in other threads.
    entries: std::cell::Cell<u64>,
    /// `entries` at the last capture.
    entries_at_capture: u64,
    /// The range spanned by this memory's arenas, whose pointers are hashed
    /// as offsets so fingerprints do not depend on where arenas are mapped.
    reloc: Relocation,
    /// `reloc` for identities (see [`Relocation::identity`]).
    id_reloc: Relocation,
    /// Scratch lists reused across captures and restores (checker memory).
    scratch_pages: Vec<usize>,
    scratch_changes: Vec<(usize, PageId)>,
    /// What [`Memory::changes`] found, per arena: the pages whose bytes
    /// differ from the loaded state (new and dropped pages included), and
    /// whether the arena differs at all.
    pending: Vec<Vec<usize>>,
    pending_changed: Vec<bool>,
    /// `entries` and the loaded state when `pending` was found: it holds
    /// while both are unchanged (no code entered an arena since).
    /// The arenas it compared (empty: all).
    pending_at: Option<(u64, StateId, Vec<ArenaId>)>,
    /// A spare list for `pending_at`.
    pending_among: Vec<ArenaId>,
    /// Set once a thread of user code that outlived its handler may use
    /// the arenas: no state is restored into them again ([`Memory::freeze`]).
    frozen: bool,
    /// Whether the last [`Memory::restore`] left the arenas as they are
    /// now: holding the loaded state, write tracking armed (a capture or
    /// an entry since says otherwise).
    armed: bool,
}

fn pages_of(used: usize) -> usize {
    used.div_ceil(PAGE)
}

fn page_len(used: usize, page: usize) -> usize {
    (used - page * PAGE).min(PAGE)
}

impl Memory {
    /// An empty memory; add arenas with [`Memory::add_arena`].
    pub fn new(mut config: MemoryConfig) -> Memory {
        config.verify_touched |= std::env::var_os("CMC_VERIFY_TOUCHED").is_some_and(|v| v == "1");
        sys::check_page_size();
        tracking::install();
        Memory {
            config,
            arenas: Vec::new(),
            pages: PageStore::new(),
            chunks: Slab::new(),
            tables: Slab::new(),
            states: Slab::new(),
            loaded: None,
            entries: std::cell::Cell::new(0),
            entries_at_capture: u64::MAX,
            reloc: Relocation::modules(),
            id_reloc: Relocation::identity(),
            scratch_pages: Vec::new(),
            scratch_changes: Vec::new(),
            pending: Vec::new(),
            pending_changed: Vec::new(),
            pending_at: None,
            pending_among: Vec::new(),
            frozen: false,
            armed: false,
        }
    }

    /// From now on the arenas are left as they are: a thread of user code
    /// that outlived its handler still reads and writes them
    /// (`crate::memory::threads`). [`Memory::restore`] asserts it is not called.
    pub(crate) fn freeze(&mut self) {
        self.frozen = true;
    }

    /// Whether [`Memory::freeze`] was called.
    pub(crate) fn frozen(&self) -> bool {
        self.frozen
    }

    /// Undoes [`Memory::freeze`] in a forked child, whose copy of the
    /// arenas no other thread uses.
    pub(crate) fn thaw_in_child(&mut self) {
        self.frozen = false;
    }

    /// Reserves a new arena. `name` is how reports refer to it ("process 2",
    /// "environment"). Arenas can be added only before the first capture.
    pub fn add_arena(
        &mut self,
        name: impl Into<String>,
        config: ArenaConfig,
    ) -> io::Result<ArenaId> {
        assert!(
            self.loaded.is_none(),
            "arenas must be added before the first capture"
        );
        let name = name.into();
        let arena = Arena::new(name.clone(), &config)?;
        self.reloc.add(
            self.arenas.len(),
            arena.ctl().base.as_ptr() as u64,
            arena.ctl().reserve as u64,
        );
        self.id_reloc.add(
            self.arenas.len(),
            arena.ctl().base.as_ptr() as u64,
            arena.ctl().reserve as u64,
        );
        let mode = match config.tracking {
            Tracking::Mprotect => Mode::Mprotect,
            _ => Mode::Scan,
        };
        self.arenas.push(ArenaRt {
            arena,
            name,
            tracking: config.tracking,
            mode,
            all_writable: true,
            protected_np: 0,
            avg_dirty: 1.0,
            hot: Vec::new(),
            hot_age: 0,
        });
        Ok(ArenaId(self.arenas.len() - 1))
    }

    /// Number of arenas.
    pub fn arena_count(&self) -> usize {
        self.arenas.len()
    }

    /// Makes allocations on this thread go to `arena` until the guard drops.
    pub fn enter(&self, arena: ArenaId) -> Entered<'_> {
        self.entries.set(self.entries.get().wrapping_add(1));
        // SAFETY: the arena lives as long as `self`, which the guard borrows.
        unsafe { Entered::new(self.arenas[arena.0].arena.ctl_ptr() as *const ()) }
    }

    /// The arena's name.
    pub fn arena_name(&self, arena: ArenaId) -> &str {
        &self.arenas[arena.0].name
    }

    /// Bytes of the arena in use (heap header and blocks, up to the top).
    pub fn used(&self, arena: ArenaId) -> usize {
        self.arenas[arena.0].arena.ctl().heap().used()
    }

    /// The arena's base address.
    pub fn base(&self, arena: ArenaId) -> *mut u8 {
        self.arenas[arena.0].arena.ctl().base.as_ptr()
    }

    /// The arena heap's counters, as the arena holds them now.
    pub fn heap_stats(&self, arena: ArenaId) -> HeapStats {
        let s = self.arenas[arena.0].arena.ctl().heap().stats();
        HeapStats {
            used: s.used,
            live_blocks: s.live_blocks,
            live_bytes: s.live_bytes,
            free_blocks: s.free_blocks,
            free_bytes: s.free_bytes,
        }
    }

    /// Checks the arena heap's internal consistency (boundary tags, free
    /// lists, poison in free blocks, zeros beyond the top); `Err` describes
    /// the first inconsistency. A failure means memory corruption: user code
    /// wrote outside its objects.
    pub fn check_heap(&self, arena: ArenaId) -> Result<(), String> {
        self.arenas[arena.0].arena.ctl().heap().check()
    }

    /// The allocated blocks of the arena as (address, usable length), in
    /// address order.
    pub fn live_blocks(&self, arena: ArenaId) -> Vec<(*mut u8, usize)> {
        let heap = self.arenas[arena.0].arena.ctl().heap();
        // SAFETY (for the `add` below): every block offset lies inside the
        // arena's used length.
        heap.live_blocks()
            .map(|b| (heap.base().wrapping_add(b.offset), b.len))
            .collect()
    }

    /// The allocated block containing `addr` (interior addresses included),
    /// as (block address, usable length).
    pub fn block_containing(&self, arena: ArenaId, addr: *const u8) -> Option<(*mut u8, usize)> {
        let heap = self.arenas[arena.0].arena.ctl().heap();
        let offset = (addr as usize).checked_sub(heap.base() as usize)?;
        heap.block_containing(offset)
            .map(|b| (heap.base().wrapping_add(b.offset), b.len))
    }

    /// The tracking mode the arena is in now.
    pub fn mode(&self, arena: ArenaId) -> Mode {
        self.arenas[arena.0].mode
    }

    /// Takes the record of an arena that ran out of its reservation since the
    /// last call, if any.
    pub fn take_exhaustion(&self) -> Option<ArenaExhausted> {
        self.arenas
            .iter()
            .find_map(|a| a.arena.ctl().take_exhausted())
    }

    /// What the memory holds.
    pub fn stats(&self) -> MemoryStats {
        MemoryStats {
            states: self.states.live(),
            tables: self.tables.live(),
            chunks: self.chunks.live(),
            pages: self.pages.pages(),
            page_bytes: self.pages.bytes(),
        }
    }

    /// How identities hash words: pointers into this memory's arenas as
    /// (arena, offset), into the program as (module or symbol, offset), into
    /// the stack alike.
    pub(crate) fn identity_relocation(&self) -> &Relocation {
        &self.id_reloc
    }

    /// The state's fingerprint.
    pub fn fingerprint(&self, state: StateId) -> Fingerprint {
        self.states.get(state.0).fingerprint
    }

    /// The state currently loaded in the arenas (the last one captured or
    /// restored), if any.
    pub fn loaded(&self) -> Option<StateId> {
        self.loaded
    }

    /// The loaded state, if the arenas still hold exactly it: no code
    /// entered an arena since it was captured or restored.
    pub(crate) fn loaded_exactly(&self) -> Option<StateId> {
        self.loaded
            .filter(|_| self.entries.get() == self.entries_at_capture)
    }

    /// The byte fingerprint of `arena`'s part of `state`: the sum of its
    /// page terms, the share of that arena in [`Memory::fingerprint`].
    pub fn arena_sum(&self, state: StateId, arena: ArenaId) -> u128 {
        self.tables
            .get(self.states.get(state.0).tables[arena.0])
            .sum
    }

    /// A 128-bit hash of `arena` and its contents in `state` (of its index
    /// and [`Memory::arena_sum`]), computed once per stored table: it
    /// names the arena's bytes as the sum does, and it is a hash, so keys
    /// combined from several of them by exclusive or collide no more than
    /// hashes do.
    pub fn arena_key(&self, state: StateId, arena: ArenaId) -> u128 {
        self.tables
            .get(self.states.get(state.0).tables[arena.0])
            .key
    }

    /// The tag set on `arena`'s contents in `state` by [`Memory::set_tag`],
    /// or on any other state whose arena held the very same table (an arena
    /// a transition did not change keeps its table).
    pub fn tag(&self, state: StateId, arena: ArenaId) -> Option<u128> {
        self.tables
            .get(self.states.get(state.0).tables[arena.0])
            .tag
    }

    /// Attaches a client fingerprint to `arena`'s contents in `state`. It
    /// must be a function of those contents alone.
    pub fn set_tag(&mut self, state: StateId, arena: ArenaId, tag: u128) {
        let t = self.states.get(state.0).tables[arena.0];
        self.tables.get_mut(t).tag = Some(tag);
    }

    /// The pages of `arena` whose contents differ between states `a` and
    /// `b` (a page present in only one of them differs), in increasing
    /// order. Chunks the two states share are skipped without reading them,
    /// so this costs O(pages / 64 + differing chunks × 64).
    pub fn diff_pages(&self, a: StateId, b: StateId, arena: ArenaId) -> Vec<usize> {
        let ta = self.tables.get(self.states.get(a.0).tables[arena.0]);
        let tb = self.tables.get(self.states.get(b.0).tables[arena.0]);
        let mut out = Vec::new();
        if std::ptr::eq(ta, tb) {
            return out;
        }
        let nchunks = ta.chunks.len().max(tb.chunks.len());
        for ci in 0..nchunks {
            let (ca, cb) = (ta.chunks.get(ci).copied(), tb.chunks.get(ci).copied());
            if ca == cb {
                continue;
            }
            for j in 0..CHUNK {
                let pa = ca.map_or(NO_PAGE, |c| self.chunks.get(c)[j]);
                let pb = cb.map_or(NO_PAGE, |c| self.chunks.get(c)[j]);
                if pa != pb {
                    out.push(ci * CHUNK + j);
                }
            }
        }
        out
    }

    /// The stored bytes of page `page` of `arena` in `state` (shorter than a
    /// page for the last one), or `None` beyond the state's used length.
    pub fn page_in(&self, state: StateId, arena: ArenaId, page: usize) -> Option<&[u8]> {
        let table = self.tables.get(self.states.get(state.0).tables[arena.0]);
        match self.page_of(table, page) {
            NO_PAGE => None,
            id => Some(self.pages.data(id)),
        }
    }

    /// The arena's reserved address range as (base, length in bytes).
    pub fn range(&self, arena: ArenaId) -> (usize, usize) {
        let ctl = self.arenas[arena.0].arena.ctl();
        (ctl.base.as_ptr() as usize, ctl.reserve)
    }

    /// The used length of `arena` in `state`.
    pub fn used_in(&self, state: StateId, arena: ArenaId) -> usize {
        self.tables
            .get(self.states.get(state.0).tables[arena.0])
            .used
    }

    /// The bytes of `arena` in `state`, up to its used length, read from the
    /// page store without restoring anything (for reports and tests).
    pub fn read_state(&self, state: StateId, arena: ArenaId) -> Vec<u8> {
        let table = self.tables.get(self.states.get(state.0).tables[arena.0]);
        let mut out = Vec::with_capacity(table.used);
        for i in 0..pages_of(table.used) {
            out.extend_from_slice(self.pages.data(self.page_of(table, i)));
        }
        assert_eq!(
            out.len(),
            table.used,
            "a state's pages do not add up to its used length"
        );
        out
    }

    /// Adds a reference to a state.
    pub fn retain(&mut self, state: StateId) {
        self.states.retain(state.0);
    }

    /// Drops a reference to a state; the last one frees the state and every
    /// page only it used.
    pub fn release(&mut self, state: StateId) {
        if let Some(data) = self.states.release(state.0) {
            for &t in data.tables.iter() {
                self.release_table(t);
            }
        }
    }

    fn release_table(&mut self, t: u32) {
        if let Some(table) = self.tables.release(t) {
            for &c in table.chunks.iter() {
                self.release_chunk(c);
            }
        }
    }

    fn release_chunk(&mut self, c: u32) {
        if let Some(chunk) = self.chunks.release(c) {
            for &p in chunk.iter().filter(|&&p| p != NO_PAGE) {
                self.pages.release(p);
            }
        }
    }

    /// The page id of page `i` of a table, or `NO_PAGE`.
    fn page_of(&self, table: &Table, i: usize) -> PageId {
        match table.chunks.get(i / CHUNK) {
            Some(&c) => self.chunks.get(c)[i % CHUNK],
            None => NO_PAGE,
        }
    }

    /// Captures the current contents of every arena as a state and makes it
    /// the loaded state. The caller owns one reference to the result.
    pub fn capture(&mut self) -> StateId {
        let loaded = self.loaded;
        let mut tables = Vec::with_capacity(self.arenas.len());
        let mut sum = 0u128;
        let mut isolated = true;
        for a in 0..self.arenas.len() {
            let old = loaded.map(|s| self.states.get(s.0).tables[a]);
            let t = self.capture_arena(a, old);
            let table = self.tables.get(t);
            sum = sum.wrapping_add(table.sum);
            isolated &= table.foreign == 0;
            tables.push(t);
        }
        let fp = if self.config.width == FingerprintWidth::Bits64 {
            u128::from(hash::finish64(sum))
        } else {
            hash::finish(sum)
        };
        let id = StateId(self.states.insert(StateData {
            tables: tables.into(),
            fingerprint: Fingerprint(fp),
            isolated,
            tag: None,
        }));
        self.states.retain(id.0);
        if let Some(old) = self.loaded.replace(id) {
            self.release(old);
        }
        self.entries_at_capture = self.entries.get();
        self.armed = false;
        self.forget_changes();
        id
    }

    /// Which arenas differ from the loaded state now (indexed by arena),
    /// found without storing anything: a transition whose successor turns
    /// out to be known needs no capture, and the next
    /// [`restore`](Memory::restore) or [`capture`](Memory::capture) writes
    /// or reads only the pages found here, as long as no code entered an
    /// arena in between.
    pub fn changes(&mut self) -> &[bool] {
        self.find_changes(None)
    }

    /// [`Memory::changes`], comparing only `touched`: the caller knows that
    /// no code wrote the other arenas since the loaded state was captured
    /// or restored (see [`Memory::isolated`]), and they count as unchanged.
    /// With `MemoryConfig::verify_touched` every arena is compared, and an
    /// arena outside `touched` that changed is a panic.
    pub fn changes_among(&mut self, touched: &[ArenaId]) -> &[bool] {
        if self.config.verify_touched {
            let all = self.find_changes(None).to_vec();
            for (a, &changed) in all.iter().enumerate() {
                assert!(
                    !changed || touched.contains(&ArenaId(a)),
                    "{} changed, but the caller said only {:?} could have",
                    self.arenas[a].name,
                    touched
                        .iter()
                        .map(|t| &self.arenas[t.0].name)
                        .collect::<Vec<_>>()
                );
            }
            return &self.pending_changed;
        }
        self.find_changes(Some(touched))
    }

    /// The table of `arena` in `state`, without a reference (to compare
    /// states arena by arena: equal tables, equal contents).
    pub fn table_of(&self, state: StateId, arena: ArenaId) -> TableId {
        TableId(self.states.get(state.0).tables[arena.0])
    }

    /// Takes a reference to a table, which keeps its pages stored until
    /// [`Memory::drop_table`] gives it back.
    pub fn keep_table(&mut self, table: TableId) {
        self.tables.retain(table.0);
    }

    /// Gives back a reference taken by [`Memory::keep_table`].
    pub fn drop_table(&mut self, table: TableId) {
        self.release_table(table.0);
    }

    /// A new state equal to `pre` except in the arenas of `replace`, which
    /// hold the given tables' contents instead; the caller owns one
    /// reference to it. Nothing is loaded or run: this is how a transition
    /// whose effect on those arenas is known (see the search's transition
    /// cache) makes its successor. Its fingerprint is the one a capture of
    /// the same contents would have.
    pub fn derive(&mut self, pre: StateId, replace: &[(ArenaId, TableId)]) -> StateId {
        let mut tables = self.states.get(pre.0).tables.clone();
        for &(a, t) in replace {
            tables[a.0] = t.0;
        }
        let mut sum = 0u128;
        let mut isolated = true;
        for &t in tables.iter() {
            self.tables.retain(t);
            let table = self.tables.get(t);
            sum = sum.wrapping_add(table.sum);
            isolated &= table.foreign == 0;
        }
        let fp = if self.config.width == FingerprintWidth::Bits64 {
            u128::from(hash::finish64(sum))
        } else {
            hash::finish(sum)
        };
        StateId(self.states.insert(StateData {
            tables,
            fingerprint: Fingerprint(fp),
            isolated,
            tag: None,
        }))
    }

    /// The value set on `state` by [`Memory::set_state_tag`], if any.
    pub fn state_tag(&self, state: StateId) -> Option<u128> {
        self.states.get(state.0).tag
    }

    /// Attaches a client value to `state` (a function of the whole state,
    /// such as the sum its fingerprint was finished from).
    pub fn set_state_tag(&mut self, state: StateId, tag: u128) {
        self.states.get_mut(state.0).tag = Some(tag);
    }

    /// The serials ([`PageStore::serial`]) of the stored pages that hold
    /// the bytes `addr..addr + len` of an arena, one per page the range
    /// overlaps (from the page of `addr`), put in `out`; 0 for a page that
    /// may differ from the loaded state's. A page is known to equal it when
    /// nothing ran in an arena since the loaded state was captured or
    /// restored, or when [`Memory::changes`] found it unchanged since.
    /// False (and `out` empty) when the range is not inside an arena's
    /// used memory or nothing is known.
    ///
    /// Whatever is computed from a page's bytes alone can be remembered
    /// under its serial and reused whenever the serial comes back (see
    /// `identity::chunks`).
    pub(crate) fn page_serials(&self, addr: usize, len: usize, out: &mut Vec<u64>) -> bool {
        out.clear();
        let Some(loaded) = self.loaded else {
            return false;
        };
        let Some(end) = addr.checked_add(len).filter(|_| len > 0) else {
            return false;
        };
        let Some(a) = self.arenas.iter().position(|rt| {
            let base = rt.arena.ctl().base.as_ptr() as usize;
            addr >= base && end <= base + rt.arena.ctl().heap().used()
        }) else {
            return false;
        };
        let synced = self.entries.get() == self.entries_at_capture;
        if !synced && !self.pending_valid() {
            return false;
        }
        let base = self.arenas[a].arena.ctl().base.as_ptr() as usize;
        let table = self.tables.get(self.states.get(loaded.0).tables[a]);
        let (first, last) = ((addr - base) / PAGE, (end - 1 - base) / PAGE);
        let stored = pages_of(table.used);
        // The pending list is sorted: walk it alongside.
        let pending: &[usize] = if synced { &[] } else { &self.pending[a] };
        let mut next = pending.partition_point(|&p| p < first);
        for i in first..=last {
            while next < pending.len() && pending[next] < i {
                next += 1;
            }
            let dirty = next < pending.len() && pending[next] == i;
            let id = if i < stored && !dirty {
                self.page_of(table, i)
            } else {
                NO_PAGE
            };
            out.push(if id == NO_PAGE {
                0
            } else {
                self.pages.serial(id)
            });
        }
        true
    }

    /// Whether no arena of `state` holds a word that points into another
    /// arena. Then code that runs in some arenas (entering them, and
    /// reaching objects only through their roots) can write no other
    /// arena: every pointer it can follow stays inside the arenas it
    /// started from (globals never point into arenas, see
    /// `crate::memory::globals`). A word that merely looks like a pointer counts.
    pub fn isolated(&self, state: StateId) -> bool {
        self.states.get(state.0).isolated
    }

    fn find_changes(&mut self, touched: Option<&[ArenaId]>) -> &[bool] {
        let loaded = self.loaded.expect("changes before any capture");
        let entries = self.entries.get();
        // A comparison of every arena answers any question; one of some
        // arenas only the same question.
        if let Some((e, s, among)) = &self.pending_at {
            if *e == entries && *s == loaded && (among.is_empty() || touched == Some(&among[..])) {
                return &self.pending_changed;
            }
        }
        let n = self.arenas.len();
        self.pending.resize_with(n, Vec::new);
        self.pending_changed.resize(n, false);
        let mut candidates = std::mem::take(&mut self.scratch_pages);
        for a in 0..n {
            if touched.is_some_and(|t| !t.contains(&ArenaId(a))) {
                self.pending[a].clear();
                self.pending_changed[a] = false;
                continue;
            }
            let used = self.checked_used(a);
            let old = self.states.get(loaded.0).tables[a];
            let table = self.tables.get(old);
            let (old_used, old_np, npages) = (table.used, pages_of(table.used), pages_of(used));
            let mut diff = std::mem::take(&mut self.pending[a]);
            diff.clear();
            let base = self.arenas[a].arena.ctl().base.as_ptr();
            let both = npages.min(old_np);
            let differs = |i: usize| {
                let stored = self.pages.data(self.page_of(table, i));
                // SAFETY: page i is below the used length, so committed and
                // readable; the length stays inside the page.
                let now =
                    unsafe { std::slice::from_raw_parts(base.add(i * PAGE), page_len(used, i)) };
                stored != now
            };
            if self.arenas[a].all_writable {
                // Any page may have been written: compare them all.
                diff.extend((0..both).filter(|&i| differs(i)));
            } else {
                // Only the faulted pages (and those beyond the protected
                // extent) may have been.
                candidates.clear();
                self.candidates(a, Some(old), &mut candidates);
                candidates.sort_unstable();
                candidates.dedup();
                diff.extend(
                    candidates
                        .iter()
                        .copied()
                        .filter(|&i| i < both && differs(i)),
                );
            }
            // New pages and pages the heap dropped (a restore rewrites them).
            diff.extend(both..npages.max(old_np));
            self.pending_changed[a] = !diff.is_empty() || used != old_used;
            self.pending[a] = diff;
        }
        self.scratch_pages = candidates;
        let mut among = std::mem::take(&mut self.pending_among);
        among.clear();
        among.extend_from_slice(touched.unwrap_or(&[]));
        self.pending_at = Some((entries, loaded, among));
        &self.pending_changed
    }

    /// The pages [`Memory::changes`] found in arena `a`, if that still
    /// holds.
    fn pending_for(&self, a: usize) -> Option<&[usize]> {
        self.pending_valid().then(|| &self.pending[a][..])
    }

    /// Whether what [`Memory::changes`] found still holds: no code entered
    /// an arena since, and the same state is loaded.
    fn pending_valid(&self) -> bool {
        matches!(&self.pending_at, Some((entries, state, _))
            if Some(*state) == self.loaded && *entries == self.entries.get())
    }

    /// The used length of arena `a`, checked against its committed memory.
    fn checked_used(&self, a: usize) -> usize {
        let ctl = self.arenas[a].arena.ctl();
        let used = ctl.heap().used();
        assert!(
            used <= ctl.committed.load(Ordering::Acquire),
            "{}'s heap header is corrupted (its top lies beyond the committed memory): \
             code wrote outside its objects",
            self.arenas[a].name
        );
        used
    }

    /// Captures one arena against its loaded table; returns a table id the
    /// caller owns one reference to.
    fn capture_arena(&mut self, a: usize, old: Option<u32>) -> u32 {
        let base = self.arenas[a].arena.ctl().base.as_ptr();
        let used = self.checked_used(a);
        let npages = pages_of(used);
        let hasher = self.config.hasher;

        // Which pages may differ from the loaded table: those `changes`
        // found, if no code ran since; else found now.
        let mut candidates = std::mem::take(&mut self.scratch_pages);
        candidates.clear();
        let old_used = old.map_or(0, |t| self.tables.get(t).used);
        match self.pending_for(a) {
            Some(pages) => candidates.extend(pages.iter().copied().filter(|&i| i < npages)),
            None => self.candidates(a, old, &mut candidates),
        }
        // Intern the candidates; keep the ones that really changed.
        let mut changes = std::mem::take(&mut self.scratch_changes);
        changes.clear();
        let old_table = old.map(|t| self.tables.get(t));
        for &i in &candidates {
            let len = page_len(used, i);
            // SAFETY: as above, page i is committed and `len` bytes long.
            let bytes = unsafe { std::slice::from_raw_parts(base.add(i * PAGE), len) };
            if let Some(t) = old_table {
                // A page that may have changed but did not (one written
                // back, or one left writable that the transition did not
                // touch) costs a comparison, not a hash.
                let id = self.page_of(t, i);
                if id != NO_PAGE && self.pages.data(id) == bytes {
                    continue;
                }
            }
            let h = hasher.hash_relocated(bytes, &self.reloc);
            let id = self.pages.intern(bytes, h, |d| self.reloc.arena_mask(d));
            let before = match old {
                Some(t) => self.page_of(self.tables.get(t), i),
                None => NO_PAGE,
            };
            if before == id {
                self.pages.release(id);
            } else {
                changes.push((i, id));
            }
        }
        changes.sort_unstable_by_key(|&(i, _)| i);
        changes.dedup_by_key(|&mut (i, _)| i);
        self.scratch_pages = candidates;

        if old.is_some() {
            // The initial capture reads everything and says nothing about
            // transitions, so it does not count.
            let rt = &mut self.arenas[a];
            rt.avg_dirty = 0.5 * rt.avg_dirty + 0.5 * changes.len() as f64;
        }

        let table = match old {
            Some(t) if changes.is_empty() && old_used == used => {
                self.tables.retain(t);
                t
            }
            _ => self.build_table(a, old, used, &changes),
        };
        self.scratch_changes = changes;
        table
    }

    /// The pages of arena `a` that may differ from its loaded table `old`
    /// (all of them without one), below the current used length, appended
    /// to `out`: in scan mode exactly the pages whose bytes differ (and new
    /// ones), in mprotect mode the faulted ones, those beyond the protected
    /// extent and those whose length changed.
    fn candidates(&self, a: usize, old: Option<u32>, out: &mut Vec<usize>) {
        let ctl = self.arenas[a].arena.ctl();
        let base = ctl.base.as_ptr();
        let used = ctl.heap().used();
        let npages = pages_of(used);
        let candidates = out;
        let (old_used, old_np) = match old {
            Some(t) => {
                let used = self.tables.get(t).used;
                (used, pages_of(used))
            }
            None => (0, 0),
        };
        let rt = &self.arenas[a];
        if let (Some(t), true) = (old, rt.all_writable) {
            let table = self.tables.get(t);
            for i in 0..npages.min(old_np) {
                let len = page_len(used, i);
                let stored = self.pages.data(self.page_of(table, i));
                // SAFETY: page i is below the used length, so committed and
                // readable; `len` bytes stay inside the page.
                let now = unsafe { std::slice::from_raw_parts(base.add(i * PAGE), len) };
                if stored != now {
                    candidates.push(i);
                }
            }
            candidates.extend(old_np..npages);
        } else if old.is_none() {
            candidates.extend(0..npages);
        } else {
            // Faulted pages, pages beyond the protected extent (writable
            // without a fault), and pages whose length changed.
            let tracked = rt.protected_np.min(npages);
            candidates.extend(tracking::dirty_pages(ctl).filter(|&i| i < tracked));
            candidates.extend(tracked..npages);
            if old_np > 0
                && old_np <= npages
                && page_len(used, old_np - 1) != page_len(old_used, old_np - 1)
            {
                candidates.push(old_np - 1);
            }
            if npages > 0
                && npages <= old_np
                && page_len(used, npages - 1) != page_len(old_used, npages - 1)
            {
                candidates.push(npages - 1);
            }
        }
    }

    /// Builds the successor of table `old` (or a fresh table) in which the
    /// pages in `changes` are replaced (each change already holds one page
    /// reference, which moves into the table) and pages at or beyond the new
    /// used length are dropped.
    fn build_table(
        &mut self,
        a: usize,
        old: Option<u32>,
        used: usize,
        changes: &[(usize, PageId)],
    ) -> u32 {
        let npages = pages_of(used);
        let nchunks = npages.div_ceil(CHUNK);
        let (mut sum, old_np, mut chunks, mut foreign) = match old {
            Some(t) => {
                let table = self.tables.get(t);
                let keep: Vec<u32> = table.chunks.iter().copied().take(nchunks).collect();
                (table.sum, pages_of(table.used), keep, table.foreign)
            }
            None => (0u128, 0, Vec::new(), 0),
        };
        // Whether a page of this arena points into another one.
        let own = if a < 63 { 1u64 << a } else { 0 };
        let alien = |pages: &PageStore, id: PageId| u32::from(pages.arenas(id) & !own != 0);
        for &c in &chunks {
            self.chunks.retain(c);
        }
        while chunks.len() < nchunks {
            chunks.push(self.chunks.insert([NO_PAGE; CHUNK]));
        }
        // Each chunk is copied at most once per capture: `owned` remembers the
        // last chunk index made private to this table.
        let mut owned = usize::MAX;
        let mut set = |this: &mut Memory,
                       chunks: &mut Vec<u32>,
                       sum: &mut u128,
                       foreign: &mut u32,
                       i: usize,
                       new: PageId| {
            let ci = i / CHUNK;
            if owned != ci {
                let c = chunks[ci];
                if this.chunks.refs(c) > 1 {
                    let copy = *this.chunks.get(c);
                    for &p in copy.iter().filter(|&&p| p != NO_PAGE) {
                        this.pages.retain(p);
                    }
                    this.release_chunk(c);
                    chunks[ci] = this.chunks.insert(copy);
                }
                owned = ci;
            }
            let slot = &mut this.chunks.get_mut(chunks[ci])[i % CHUNK];
            let before = std::mem::replace(slot, new);
            if before != NO_PAGE {
                *sum = sum.wrapping_sub(hash::term(a, i, this.pages.hash(before)));
                *foreign -= alien(&this.pages, before);
                this.pages.release(before);
            }
            if new != NO_PAGE {
                *sum = sum.wrapping_add(hash::term(a, i, this.pages.hash(new)));
                *foreign += alien(&this.pages, new);
            }
        };
        for &(i, id) in changes {
            set(self, &mut chunks, &mut sum, &mut foreign, i, id);
        }
        // Pages beyond the new end: dropped from kept chunks, and their
        // terms subtracted whether or not their chunk is kept.
        for i in npages..old_np {
            if i / CHUNK < nchunks {
                set(self, &mut chunks, &mut sum, &mut foreign, i, NO_PAGE);
            } else {
                let t = old.expect("old pages imply an old table");
                let before = self.page_of(self.tables.get(t), i);
                sum = sum.wrapping_sub(hash::term(a, i, self.pages.hash(before)));
                foreign -= alien(&self.pages, before);
            }
        }
        let mut key = hash::FoldStream::default();
        key.word(a as u64);
        key.word(sum as u64);
        key.word((sum >> 64) as u64);
        self.tables.insert(Table {
            used,
            sum,
            chunks: chunks.into(),
            tag: None,
            foreign,
            key: key.finish128(),
        })
    }

    /// Makes the arenas hold `state` again, writing only the pages that
    /// differ from what they hold now, and arms write tracking for the next
    /// transition.
    pub fn restore(&mut self, state: StateId) {
        assert!(
            !self.frozen,
            "cmc: a state restored into arenas that a thread of user code still uses"
        );
        let loaded = self.loaded.expect("restore before any capture");
        if loaded == state && self.armed && self.entries.get() == self.entries_at_capture {
            // Nothing ran in an arena since the state was restored.
            return;
        }
        if loaded == state && self.pending_valid() {
            // Back to the loaded state after a transition whose changes
            // are known: only arenas with changed pages, or with write
            // protection to re-arm, need anything.
            for a in 0..self.arenas.len() {
                let rt = &self.arenas[a];
                if rt.mode == Mode::Scan && rt.all_writable && self.pending[a].is_empty() {
                    continue;
                }
                let t = self.states.get(state.0).tables[a];
                self.restore_arena(a, t, t, false);
            }
            self.entries_at_capture = self.entries.get();
            self.armed = true;
            self.forget_changes();
            return;
        }
        let synced = self.entries.get() == self.entries_at_capture;
        for a in 0..self.arenas.len() {
            let from = self.states.get(loaded.0).tables[a];
            let to = self.states.get(state.0).tables[a];
            let rt = &self.arenas[a];
            if synced
                && from == to
                && rt.all_writable
                && rt.mode == Mode::Scan
                && Self::choose_mode(rt, pages_of(self.tables.get(to).used)) == Mode::Scan
            {
                // Unchanged, and nothing to arm (`restore_arena` would
                // find the same).
                continue;
            }
            self.restore_arena(a, from, to, synced);
        }
        self.states.retain(state.0);
        if let Some(old) = self.loaded.replace(state) {
            self.release(old);
        }
        // Nothing has run since this restore: memory equals the loaded state.
        self.entries_at_capture = self.entries.get();
        self.armed = true;
        self.forget_changes();
    }

    /// Drops what [`Memory::changes`] found (keeping its lists' memory).
    fn forget_changes(&mut self) {
        if let Some((_, _, among)) = self.pending_at.take() {
            self.pending_among = among;
        }
    }

    fn choose_mode(rt: &ArenaRt, npages: usize) -> Mode {
        match rt.tracking {
            Tracking::Scan => Mode::Scan,
            Tracking::Mprotect => Mode::Mprotect,
            _ => {
                let scan = npages as f64 * SCAN_NS_PER_PAGE;
                let mprotect =
                    rt.avg_dirty.max(1.0) * MPROTECT_NS_PER_DIRTY_PAGE + MPROTECT_NS_FIXED;
                // Hysteresis: switching costs a system call over the whole
                // arena, so only switch for a clear gain.
                match rt.mode {
                    Mode::Scan if scan > 1.5 * mprotect => Mode::Mprotect,
                    Mode::Mprotect if scan * 1.5 < mprotect => Mode::Scan,
                    mode => mode,
                }
            }
        }
    }

    fn restore_arena(&mut self, a: usize, from: u32, to: u32, synced: bool) {
        let rt = &self.arenas[a];
        if from == to
            && rt.all_writable
            && rt.mode == Mode::Scan
            && (synced || self.pending_for(a).is_some_and(|p| p.is_empty()))
            && Self::choose_mode(rt, pages_of(self.tables.get(to).used)) == Mode::Scan
        {
            // Memory holds `to` already, and scan mode arms nothing.
            return;
        }
        let (from_used, to_used) = (self.tables.get(from).used, self.tables.get(to).used);
        let (from_np, to_np) = (pages_of(from_used), pages_of(to_used));
        let mode = Self::choose_mode(&self.arenas[a], to_np);
        let ctl_ptr = self.arenas[a].arena.ctl_ptr();
        // SAFETY: the control block is boxed inside the arena, which `self`
        // owns and this method does not drop, so it outlives this reference
        // even while `self.arenas` is borrowed mutably below.
        let ctl = unsafe { &*ctl_ptr };
        let base = ctl.base.as_ptr();
        let committed = ctl.committed.load(Ordering::Acquire);
        let cur_used = ctl.heap().used();
        let cur_np = pages_of(cur_used);

        // Mode switches.
        let rt = &mut self.arenas[a];
        if mode != rt.mode {
            if rt.mode == Mode::Mprotect && !rt.all_writable {
                ctl.tracking.store(false, Ordering::Release);
                // SAFETY: the committed prefix of our own arena.
                unsafe { sys::protect(base, committed, Prot::ReadWrite) }
                    .unwrap_or_else(|e| panic!("cannot unprotect {}'s arena: {e}", rt.name));
                tracking::clear_dirty(ctl);
            }
            rt.all_writable = true;
            rt.hot.clear();
            rt.mode = mode;
        }
        let all_writable = rt.all_writable;

        // Pages whose memory may differ from `from` (suspect), then the
        // pages to write: suspect ones and those where `from` and `to` differ.
        let mut suspect = std::mem::take(&mut self.scratch_pages);
        suspect.clear();
        if all_writable {
            if let (false, Some(pages)) = (synced, self.pending_for(a)) {
                // `changes` compared them already.
                suspect.extend_from_slice(pages);
                suspect.extend(from_np..cur_np);
            } else if !synced {
                let table = self.tables.get(from);
                // Compare over the longer of the two extents: a heap that grew
                // inside `from`'s last page wrote past the stored length.
                // Every page of `from` is compared, also those above the
                // current top: a run that grew the heap and freed its top
                // block again wrote there (the freed bytes are poisoned, then
                // zeroed).
                let extent = from_used.max(cur_used);
                for i in 0..from_np {
                    let stored = self.pages.data(self.page_of(table, i));
                    // SAFETY: page i is below `from`'s used length, which was
                    // committed when `from` was captured (the committed
                    // length never shrinks), and `extent` keeps the slice
                    // inside page i.
                    let now = unsafe {
                        std::slice::from_raw_parts(base.add(i * PAGE), page_len(extent, i))
                    };
                    if stored != now {
                        suspect.push(i);
                    }
                }
                suspect.extend(from_np..cur_np);
            }
        } else {
            let protected_np = self.arenas[a].protected_np;
            suspect.extend(tracking::dirty_pages(ctl));
            suspect.extend(protected_np.min(from_np)..from_np.max(cur_np));
        }
        let is_suspect =
            |i: usize, suspect: &[usize]| -> bool { suspect.binary_search(&i).is_ok() };
        suspect.sort_unstable();
        suspect.dedup();

        let mut writes = std::mem::take(&mut self.scratch_changes);
        writes.clear();
        {
            let (ft, tt) = (self.tables.get(from), self.tables.get(to));
            if from != to {
                let nchunks = ft.chunks.len().max(tt.chunks.len());
                // Pages at or above both extents are NO_PAGE in both.
                let limit = from_np.max(to_np);
                const NONE: [PageId; CHUNK] = [NO_PAGE; CHUNK];
                for ci in 0..nchunks {
                    let (fc, tc) = (ft.chunks.get(ci).copied(), tt.chunks.get(ci).copied());
                    if fc == tc {
                        continue;
                    }
                    let fpages = fc.map_or(&NONE, |c| self.chunks.get(c));
                    let tpages = tc.map_or(&NONE, |c| self.chunks.get(c));
                    let end = limit.saturating_sub(ci * CHUNK).min(CHUNK);
                    for j in 0..end {
                        if fpages[j] != tpages[j] {
                            writes.push((ci * CHUNK + j, tpages[j]));
                        }
                    }
                }
            }
            for &i in &suspect {
                writes.push((i, self.page_of(tt, i)));
            }
        }
        writes.sort_unstable_by_key(|&(i, _)| i);
        writes.dedup_by_key(|&mut (i, _)| i);

        // In mprotect mode, pages about to be written must be writable.
        let protecting = mode == Mode::Mprotect;
        if protecting && !all_writable {
            let need: Vec<usize> = writes
                .iter()
                .map(|&(i, _)| i)
                .filter(|&i| !tracking::is_dirty(ctl, i))
                .collect();
            for (start, len) in runs(&need) {
                // SAFETY: pages of our arena below the committed length
                // (every written page is below max(from, to, current) used).
                unsafe { sys::protect(base.add(start * PAGE), len * PAGE, Prot::ReadWrite) }
                    .unwrap_or_else(|e| {
                        panic!(
                            "cannot unprotect pages of {}'s arena: {e}",
                            self.arenas[a].name
                        )
                    });
            }
        }

        // Write the pages.
        let ft = self.tables.get(from);
        for &(i, tp) in &writes {
            let prev_len = if is_suspect(i, &suspect) {
                // Anything below the current top (and below `from`'s, for a
                // page the tracking says nothing about); above it the heap
                // keeps every byte zero.
                let extent = cur_used.max(from_used);
                if i * PAGE < extent {
                    page_len(extent, i)
                } else {
                    0
                }
            } else if i < from_np {
                page_len(from_used, i)
            } else {
                0
            };
            // SAFETY: page i is committed (it is below the used length of
            // `from`, `to` or the current heap, all of which were committed)
            // and writable (scan mode, or unprotected just above).
            let dst = unsafe { base.add(i * PAGE) };
            let written = if tp == NO_PAGE {
                0
            } else {
                let data = self.pages.data(tp);
                // SAFETY: `data` is at most a page; `dst` starts a page.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
                data.len()
            };
            if prev_len > written {
                // SAFETY: stays within page i.
                unsafe { std::ptr::write_bytes(dst.add(written), 0, prev_len - written) };
            }
        }
        let _ = ft;

        // Re-arm tracking: every page of `to` read-only, nothing dirty.
        if protecting {
            if all_writable {
                // SAFETY: the first to_np pages are committed pages of ours.
                unsafe { sys::protect(base, to_np * PAGE, Prot::Read) }.unwrap_or_else(|e| {
                    panic!("cannot protect {}'s arena: {e}", self.arenas[a].name)
                });
            } else {
                let mut dirty: Vec<usize> =
                    tracking::dirty_pages(ctl).filter(|&i| i < to_np).collect();
                dirty.sort_unstable();
                dirty.dedup();
                // The pages transitions wrote (faulted, or hot already) stay
                // writable, unless there are too many or it is time to
                // look again.
                let rt = &mut self.arenas[a];
                let mut hot = std::mem::take(&mut rt.hot);
                hot.clear();
                rt.hot_age += 1;
                if dirty.len() <= HOT_PAGES && rt.hot_age < HOT_RESTORES {
                    hot.extend_from_slice(&dirty);
                } else {
                    rt.hot_age = 0;
                }
                let mut open = dirty;
                open.extend(writes.iter().map(|&(i, _)| i).filter(|&i| i < to_np));
                open.sort_unstable();
                open.dedup();
                open.retain(|i| hot.binary_search(i).is_err());
                self.arenas[a].hot = hot;
                for (start, len) in runs(&open) {
                    // SAFETY: pages below to_np are committed pages of ours.
                    unsafe { sys::protect(base.add(start * PAGE), len * PAGE, Prot::Read) }
                        .unwrap_or_else(|e| {
                            panic!(
                                "cannot protect pages of {}'s arena: {e}",
                                self.arenas[a].name
                            )
                        });
                }
            }
            tracking::clear_dirty(ctl);
            if all_writable {
                self.arenas[a].hot.clear();
            }
            for &i in &self.arenas[a].hot {
                // Writable, so a write there does not fault: dirty from
                // the start.
                tracking::mark_dirty(ctl, i);
            }
            ctl.tracking.store(true, Ordering::Release);
            self.arenas[a].all_writable = false;
            self.arenas[a].protected_np = to_np;
        }
        self.scratch_pages = suspect;
        self.scratch_changes = writes;
    }
}

/// Maximal runs of consecutive values in a sorted list, as (start, length).
fn runs(sorted: &[usize]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for &i in sorted {
        match out.last_mut() {
            Some((start, len)) if *start + *len == i => *len += 1,
            _ => out.push((i, 1)),
        }
    }
    out
}

impl Drop for Memory {
    fn drop(&mut self) {
        for rt in &self.arenas {
            rt.arena.ctl().tracking.store(false, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn runs_coalesce_consecutive_pages() {
        assert_eq!(runs(&[]), vec![]);
        assert_eq!(runs(&[1, 2, 3, 7, 9, 10]), vec![(1, 3), (7, 1), (9, 2)]);
    }
}
