//! Capturing a state: which pages of which arenas a transition changed
//! (from the write faults or by comparison), each changed page hashed and
//! interned in the page store, a new table per changed arena, the
//! fingerprint sum updated by the changed pages' terms.

use crate::memory::store::{PageId, PageStore, CHUNK, NO_PAGE};
use crate::memory::tracking;
use crate::sys::hash;
use crate::sys::PAGE;
use std::sync::atomic::Ordering;

use super::snapshot::*;

impl Memory {
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

    pub(super) fn find_changes(&mut self, touched: Option<&[ArenaId]>) -> &[bool] {
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
                // SAFETY: page i is below the used length, so committed and
                // readable; the length stays inside the page.
                let now =
                    unsafe { std::slice::from_raw_parts(base.add(i * PAGE), page_len(used, i)) };
                !self.pages.equals(self.page_of(table, i), now)
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
    pub(super) fn pending_for(&self, a: usize) -> Option<&[usize]> {
        self.pending_valid().then(|| &self.pending[a][..])
    }

    /// Whether what [`Memory::changes`] found still holds: no code entered
    /// an arena since, and the same state is loaded.
    pub(super) fn pending_valid(&self) -> bool {
        matches!(&self.pending_at, Some((entries, state, _))
            if Some(*state) == self.loaded && *entries == self.entries.get())
    }

    /// The used length of arena `a`, checked against its committed memory.
    pub(super) fn checked_used(&self, a: usize) -> usize {
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
    pub(super) fn capture_arena(&mut self, a: usize, old: Option<u32>) -> u32 {
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
                if id != NO_PAGE && self.pages.equals(id, bytes) {
                    continue;
                }
            }
            let h = hasher.hash_relocated(bytes, &self.reloc);
            let before = match old {
                Some(t) => self.page_of(self.tables.get(t), i),
                None => NO_PAGE,
            };
            // Stored as a delta against the page it replaces where that
            // is small.
            let id = self
                .pages
                .intern(bytes, h, |d| self.reloc.arena_mask(d), before);
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
    pub(super) fn candidates(&self, a: usize, old: Option<u32>, out: &mut Vec<usize>) {
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
                // SAFETY: page i is below the used length, so committed and
                // readable; `len` bytes stay inside the page.
                let now = unsafe { std::slice::from_raw_parts(base.add(i * PAGE), len) };
                if !self.pages.equals(self.page_of(table, i), now) {
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
    pub(super) fn build_table(
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
        self.chunk_list_entries += chunks.len();
        self.tables.insert(Table {
            used,
            sum,
            chunks: chunks.into(),
            tag: None,
            foreign,
            key: key.finish128(),
        })
    }
}
