//! Looking into a model's memory without changing it: an arena's name,
//! bounds and heap (statistics, live blocks, a consistency check), what
//! the memory holds, and the pages of stored states (their differences,
//! their bytes). For reports, tests and the engine's leak check; the
//! snapshots themselves are `memory::snapshot`'s.

use crate::memory::store::{CHUNK, NO_PAGE};

use super::snapshot::*;

impl Memory {
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

    /// What the memory holds.
    pub fn stats(&self) -> MemoryStats {
        MemoryStats {
            states: self.states.live(),
            tables: self.tables.live(),
            chunks: self.chunks.live(),
            pages: self.pages.pages(),
            delta_pages: self.pages.delta_pages(),
            page_bytes: self.pages.bytes(),
            page_overhead_bytes: self.pages.overhead_bytes(),
            record_bytes: self.record_bytes(),
        }
    }

    /// Bytes of the state, table and chunk records: each slab's array, and
    /// the table list of every state and the chunk list of every table
    /// (counted to the element: the allocator's rounding is left out).
    fn record_bytes(&self) -> usize {
        let u32s = size_of::<u32>();
        let lists = (self.states.live() * self.arenas.len() + self.chunk_list_entries) * u32s;
        self.states.heap_bytes() + self.tables.heap_bytes() + self.chunks.heap_bytes() + lists
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
    pub fn page_in(
        &self,
        state: StateId,
        arena: ArenaId,
        page: usize,
    ) -> Option<std::borrow::Cow<'_, [u8]>> {
        let table = self.tables.get(self.states.get(state.0).tables[arena.0]);
        match self.page_of(table, page) {
            NO_PAGE => None,
            id => Some(self.pages.page(id)),
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
            out.extend_from_slice(&self.pages.page(self.page_of(table, i)));
        }
        assert_eq!(
            out.len(),
            table.used,
            "a state's pages do not add up to its used length"
        );
        out
    }
}
