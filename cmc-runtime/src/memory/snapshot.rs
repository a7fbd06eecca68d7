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
use crate::sys::{self, PAGE};

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
pub struct StateId(pub(super) u32);

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
    /// Of `pages`, those stored as deltas against another page.
    pub delta_pages: usize,
    /// Bytes of page contents stored.
    pub page_bytes: usize,
    /// Bytes of checker memory the page store takes beyond the contents
    /// (its slots, index and spare buffers).
    pub page_overhead_bytes: usize,
    /// Bytes of checker memory the states, tables and chunks take (their
    /// slabs and the lists they own).
    pub record_bytes: usize,
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
pub(super) struct Table {
    pub(super) used: usize,
    pub(super) sum: u128,
    pub(super) chunks: Box<[u32]>,
    /// A fingerprint a client computed for exactly these contents (see
    /// [`Memory::tag`]); tables are shared between states whose arena did
    /// not change, so the tag is too.
    pub(super) tag: Option<u128>,
    /// How many of its pages hold a word that points into another arena.
    pub(super) foreign: u32,
    /// A 128-bit hash of the arena and `sum` (see [`Memory::arena_key`]).
    pub(super) key: u128,
}

#[derive(Debug)]
pub(super) struct StateData {
    pub(super) tables: Box<[u32]>,
    pub(super) fingerprint: Fingerprint,
    /// No arena holds a word that points into another arena.
    pub(super) isolated: bool,
    /// A value a client computed from this state (see
    /// [`Memory::set_state_tag`]).
    pub(super) tag: Option<u128>,
}

#[derive(Debug)]
pub(super) struct ArenaRt {
    pub(super) arena: Arena,
    pub(super) name: String,
    pub(super) tracking: Tracking,
    pub(super) mode: Mode,
    /// True while no page is write-protected (scan mode, or before the first
    /// protecting restore): every page may have been written.
    pub(super) all_writable: bool,
    /// In mprotect mode, the pages below this index were write-protected by
    /// the last restore, so writes to them fault; pages at or above it may
    /// have been written silently and must be read.
    pub(super) protected_np: usize,
    /// Exponential moving average of pages changed per transition.
    pub(super) avg_dirty: f64,
    /// In mprotect mode, the pages the last restore left writable because
    /// transitions keep writing them (see `HOT_PAGES` in `memory::restore`); they stay marked
    /// dirty, so every capture and restore reads them.
    pub(super) hot: Vec<usize>,
    /// Restores since the hot pages were last protected again.
    pub(super) hot_age: u32,
}

/// A model's arenas and the states captured from them.
///
/// Dropping the memory unmaps its arenas without running destructors of the
/// objects inside them.
#[derive(Debug)]
pub struct Memory {
    pub(super) config: MemoryConfig,
    pub(super) arenas: Vec<ArenaRt>,
    pub(super) pages: PageStore,
    pub(super) chunks: Slab<[PageId; CHUNK]>,
    pub(super) tables: Slab<Table>,
    pub(super) states: Slab<StateData>,
    /// The state memory holds (retained), if any capture happened.
    pub(super) loaded: Option<StateId>,
    /// Entries into arenas so far (by [`Memory::enter`]); a restore can
    /// skip re-comparing scan-mode arenas when no code has run in any arena
    /// since the last capture. Per memory, not global: the checker's
    /// thread is the only one that enters (a thread user code starts
    /// allocates in its creator's arena without entering), and a global
    /// count would be shared with other memories in other threads.
    pub(super) entries: std::cell::Cell<u64>,
    /// `entries` at the last capture.
    pub(super) entries_at_capture: u64,
    /// The range spanned by this memory's arenas, whose pointers are hashed
    /// as offsets so fingerprints do not depend on where arenas are mapped.
    pub(super) reloc: Relocation,
    /// `reloc` for identities (see [`Relocation::identity`]).
    pub(super) id_reloc: Relocation,
    /// Scratch lists reused across captures and restores (checker memory).
    pub(super) scratch_pages: Vec<usize>,
    /// The entries of the chunk lists of the live tables (for
    /// [`MemoryStats::record_bytes`]).
    pub(super) chunk_list_entries: usize,
    pub(super) scratch_changes: Vec<(usize, PageId)>,
    /// What [`Memory::changes`] found, per arena: the pages whose bytes
    /// differ from the loaded state (new and dropped pages included), and
    /// whether the arena differs at all.
    pub(super) pending: Vec<Vec<usize>>,
    pub(super) pending_changed: Vec<bool>,
    /// `entries` and the loaded state when `pending` was found: it holds
    /// while both are unchanged (no code entered an arena since).
    /// The arenas it compared (empty: all).
    pub(super) pending_at: Option<(u64, StateId, Vec<ArenaId>)>,
    /// A spare list for `pending_at`.
    pub(super) pending_among: Vec<ArenaId>,
    /// Tables built by imports, by a hash of their arena and pages (see
    /// `Memory::shared_table`); an entry may name a table freed since.
    pub(super) imported_tables: std::collections::HashMap<u64, u32>,
    /// Set once a thread of user code that outlived its handler may use
    /// the arenas: no state is restored into them again ([`Memory::freeze`]).
    pub(super) frozen: bool,
    /// Whether the last [`Memory::restore`] left the arenas as they are
    /// now: holding the loaded state, write tracking armed (a capture or
    /// an entry since says otherwise).
    pub(super) armed: bool,
}

pub(super) fn pages_of(used: usize) -> usize {
    used.div_ceil(PAGE)
}

pub(super) fn page_len(used: usize, page: usize) -> usize {
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
            imported_tables: std::collections::HashMap::new(),
            chunk_list_entries: 0,
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

    /// Takes the record of an arena that ran out of its reservation since the
    /// last call, if any.
    pub fn take_exhaustion(&self) -> Option<ArenaExhausted> {
        self.arenas
            .iter()
            .find_map(|a| a.arena.ctl().take_exhausted())
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

    pub(super) fn release_table(&mut self, t: u32) {
        if let Some(table) = self.tables.release(t) {
            self.chunk_list_entries -= table.chunks.len();
            for &c in table.chunks.iter() {
                self.release_chunk(c);
            }
        }
    }

    pub(super) fn release_chunk(&mut self, c: u32) {
        if let Some(chunk) = self.chunks.release(c) {
            for &p in chunk.iter().filter(|&&p| p != NO_PAGE) {
                self.pages.release(p);
            }
        }
    }

    /// The page id of page `i` of a table, or `NO_PAGE`.
    pub(super) fn page_of(&self, table: &Table, i: usize) -> PageId {
        match table.chunks.get(i / CHUNK) {
            Some(&c) => self.chunks.get(c)[i % CHUNK],
            None => NO_PAGE,
        }
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
}

impl Drop for Memory {
    fn drop(&mut self) {
        for rt in &self.arenas {
            rt.arena.ctl().tracking.store(false, Ordering::Release);
        }
    }
}
