//! Restoring a state: writing back only the pages that differ from what
//! the arenas hold, choosing each arena's tracking mode, and arming write
//! tracking for the next transition.

use crate::memory::arena::Tracking;
use crate::memory::store::{PageId, CHUNK, NO_PAGE};
use crate::memory::tracking;
use crate::sys::{self, Prot, PAGE};
use std::sync::atomic::Ordering;

use super::snapshot::*;

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

impl Memory {
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
    pub(super) fn forget_changes(&mut self) {
        if let Some((_, _, among)) = self.pending_at.take() {
            self.pending_among = among;
        }
    }

    /// The tracking mode for an arena of `npages` used pages: the one its
    /// configuration names, or under `Tracking::Auto` the cheaper by the
    /// cost model below, with hysteresis.
    pub(super) fn choose_mode(rt: &ArenaRt, npages: usize) -> Mode {
        // Cost model for `Tracking::Auto`, in nanoseconds, from the `snapshot`
        // benchmark on the reference machine (see the book's performance chapter):
        // scanning costs about 55 ns per used page (compare with the stored copy);
        // fault tracking costs about 5 µs per dirty page (the fault, plus the
        // `mprotect` that re-arms it) and about 3 µs per transition besides. The
        // break-even for one dirty page is therefore around 150 pages (600 KiB).
        const SCAN_NS_PER_PAGE: f64 = 55.0;
        const MPROTECT_NS_PER_DIRTY_PAGE: f64 = 5000.0;
        const MPROTECT_NS_FIXED: f64 = 3000.0;
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

    pub(super) fn restore_arena(&mut self, a: usize, from: u32, to: u32, synced: bool) {
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
                    // SAFETY: page i is below `from`'s used length, which was
                    // committed when `from` was captured (the committed
                    // length never shrinks), and `extent` keeps the slice
                    // inside page i.
                    let now = unsafe {
                        std::slice::from_raw_parts(base.add(i * PAGE), page_len(extent, i))
                    };
                    if !self.pages.equals(self.page_of(table, i), now) {
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
                // What the page holds now, when that is known: `from`'s page
                // where nothing wrote since (not suspect), of the same
                // length; a delta against it is applied alone.
                let known = if !is_suspect(i, &suspect) && i < from_np {
                    self.page_of(ft, i)
                } else {
                    NO_PAGE
                };
                let len = self.pages.len_of(tp);
                let known = if known != NO_PAGE && self.pages.len_of(known) == len {
                    known
                } else {
                    NO_PAGE
                };
                // SAFETY: `len` is at most a page; `dst` starts page i,
                // committed and writable (above).
                let page = unsafe { std::slice::from_raw_parts_mut(dst, len) };
                self.pages.write(tp, page, known);
                len
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

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn runs_coalesce_consecutive_pages() {
        assert_eq!(runs(&[]), vec![]);
        assert_eq!(runs(&[1, 2, 3, 7, 9, 10]), vec![(1, 3), (7, 1), (9, 2)]);
    }
}
