//! States as bytes, to leave memory and come back: a state is written as
//! the pages in which it differs from the state written before it (the
//! previous state of the same stream), each page as a delta against that
//! state's page where one exists; reading the stream back in order builds
//! each state from the one read before it. Siblings written one after the
//! other (a breadth-first frontier) differ in a few pages, in a few bytes
//! each, so a state costs tens to hundreds of bytes.
//!
//! Per arena: its used length, the number of pages written, then each
//! page: its index, a kind byte (full or delta) and its length-prefixed
//! bytes (LEB128 numbers throughout). A state read back has the
//! fingerprint its capture had: the same bytes hashed the same way.

use crate::memory::store::{PageId, NO_PAGE};
use crate::sys::hash;

use super::snapshot::*;

/// A page written with all its bytes.
const FULL: u8 = 0;
/// A page written as a delta against the previous state's page at the
/// same index, cut or extended with zeros to its length.
const DELTA: u8 = 1;

fn put(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn get(data: &[u8], at: &mut usize) -> usize {
    let mut n = 0usize;
    let mut shift = 0;
    loop {
        let byte = data[*at];
        *at += 1;
        n |= usize::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return n;
        }
        shift += 7;
        assert!(
            shift < usize::BITS,
            "an exported state holds a malformed number"
        );
    }
}

impl Memory {
    /// Appends `state` to `out`, as the pages in which it differs from
    /// `prev` (the state written before it in the same stream; all its
    /// pages without one). Nothing is loaded or changed.
    pub fn export(&self, state: StateId, prev: Option<StateId>, out: &mut Vec<u8>) {
        let mut encoded = Vec::new();
        let mut base = vec![0u8; crate::sys::PAGE];
        for a in 0..self.arenas.len() {
            let table = self.tables.get(self.states.get(state.0).tables[a]);
            let old = prev.map(|p| self.tables.get(self.states.get(p.0).tables[a]));
            put(out, table.used);
            let np = pages_of(table.used);
            let changed: Vec<usize> = match old {
                Some(o) if std::ptr::eq(o, table) => Vec::new(),
                Some(o) => (0..np)
                    .filter(|&i| self.page_of(table, i) != self.page_of(o, i))
                    .collect(),
                None => (0..np).collect(),
            };
            put(out, changed.len());
            for i in changed {
                let id = self.page_of(table, i);
                let was = old.map_or(NO_PAGE, |o| self.page_of(o, i));
                put(out, i);
                let len = self.pages.len_of(id);
                if was != NO_PAGE {
                    self.pages.with_page(was, |b| {
                        let n = b.len().min(len);
                        base[..n].copy_from_slice(&b[..n]);
                        base[n..len].fill(0);
                    });
                }
                self.pages.with_page(id, |page| {
                    if was != NO_PAGE
                        && super::delta::encode(&base[..len], page, len / 2, &mut encoded).is_some()
                    {
                        out.push(DELTA);
                        put(out, encoded.len());
                        out.extend_from_slice(&encoded);
                    } else {
                        out.push(FULL);
                        put(out, page.len());
                        out.extend_from_slice(page);
                    }
                });
            }
        }
    }

    /// Reads the state [`Memory::export`] wrote at `*at` in `data`,
    /// advancing `*at`: `prev` must be the state read before it in the
    /// same stream (the one it was written against). The caller owns one
    /// reference to the result; nothing is loaded.
    pub fn import(&mut self, prev: Option<StateId>, data: &[u8], at: &mut usize) -> StateId {
        let n = self.arenas.len();
        let mut tables = Vec::with_capacity(n);
        let mut changes: Vec<(usize, PageId)> = Vec::new();
        let mut page = vec![0u8; crate::sys::PAGE];
        for a in 0..n {
            let old = prev.map(|p| self.states.get(p.0).tables[a]);
            let used = get(data, at);
            let count = get(data, at);
            changes.clear();
            for _ in 0..count {
                let i = get(data, at);
                let kind = data[*at];
                *at += 1;
                let len_bytes = get(data, at);
                let bytes = &data[*at..*at + len_bytes];
                *at += len_bytes;
                let len = page_len(used, i);
                let was = old.map_or(NO_PAGE, |t| self.page_of(self.tables.get(t), i));
                let content: &[u8] = match kind {
                    FULL => {
                        assert_eq!(bytes.len(), len, "an exported page of the wrong length");
                        bytes
                    }
                    DELTA => {
                        assert!(was != NO_PAGE, "an exported delta without its base");
                        self.pages.with_page(was, |b| {
                            let m = b.len().min(len);
                            page[..m].copy_from_slice(&b[..m]);
                            page[m..len].fill(0);
                        });
                        super::delta::apply(bytes, &mut page[..len]);
                        &page[..len]
                    }
                    k => panic!("an exported page of unknown kind {k}"),
                };
                let h = self.config.hasher.hash_relocated(content, &self.reloc);
                let id = self
                    .pages
                    .intern(content, h, |d| self.reloc.arena_mask(d), was);
                changes.push((i, id));
            }
            let unchanged =
                old.is_some_and(|t| changes.is_empty() && self.tables.get(t).used == used);
            let t = match old {
                Some(t) if unchanged => {
                    self.tables.retain(t);
                    t
                }
                _ => self.shared_table(a, old, used, &changes),
            };
            tables.push(t);
        }
        let mut sum = 0u128;
        let mut isolated = true;
        for &t in &tables {
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
            tables: tables.into(),
            fingerprint: Fingerprint(fp),
            isolated,
            tag: None,
        }))
    }

    /// The table of arena `a` holding `old`'s pages with `changes` (each
    /// change's page holding one reference for it): a live table an import
    /// built before with the same pages, when there is one, else a new
    /// one. States read from a stream of unrelated states (a search across
    /// processes receives its states so) would otherwise each hold tables
    /// of their own for arenas many states share, where a capture shares
    /// its parent's.
    fn shared_table(
        &mut self,
        a: usize,
        old: Option<u32>,
        used: usize,
        changes: &[(usize, PageId)],
    ) -> u32 {
        let np = pages_of(used);
        let mut ids: Vec<PageId> = (0..np)
            .map(|i| old.map_or(NO_PAGE, |t| self.page_of(self.tables.get(t), i)))
            .collect();
        for &(i, id) in changes {
            ids[i] = id;
        }
        let key = {
            let mut h = hash::FoldStream::default();
            h.word(a as u64);
            h.word(used as u64);
            for &id in &ids {
                h.word(u64::from(id));
            }
            h.finish128() as u64
        };
        // A table's sum names its arena (the terms do), so the same pages
        // in another arena do not match.
        let sum = ids
            .iter()
            .enumerate()
            .filter(|&(_, &id)| id != NO_PAGE)
            .fold(0u128, |s, (i, &id)| {
                s.wrapping_add(hash::term(a, i, self.pages.hash(id)))
            });
        let same = |this: &Memory, t: u32| {
            this.tables.is_live(t) && {
                let table = this.tables.get(t);
                table.used == used
                    && table.sum == sum
                    && (0..np).all(|i| this.page_of(table, i) == ids[i])
            }
        };
        if let Some(&t) = self.imported_tables.get(&key) {
            if same(self, t) {
                self.tables.retain(t);
                for &(_, id) in changes {
                    self.pages.release(id);
                }
                return t;
            }
        }
        let t = self.build_table(a, old, used, changes);
        self.imported_tables.insert(key, t);
        if self.imported_tables.len() > 2 * self.tables.live() + 1024 {
            let tables = &self.tables;
            self.imported_tables.retain(|_, t| tables.is_live(*t));
        }
        t
    }
}
