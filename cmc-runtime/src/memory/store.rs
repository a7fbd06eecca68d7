//! The content-addressed page store and the reference-counted slabs that
//! states are built from.
//!
//! A state is a tree with reference counts at every level:
//!
//! ```text
//! state ─→ one table per arena (used length, fingerprint sum, chunk ids)
//!             └→ chunks of CHUNK page ids
//!                   └→ pages (bytes + cached 128-bit hash), stored once
//! ```
//!
//! A successor shares every table, chunk and page its parent has unless the
//! transition changed it: an untouched arena costs one reference-count
//! increment, a touched one copies its chunk-id list and the chunks that hold
//! dirty pages. Nothing is traversed in proportion to the arena's size.

use crate::sys::PAGE;

/// Index of a page in the [`PageStore`].
pub(crate) type PageId = u32;
/// The page id of "no page" (beyond the used length).
pub(crate) const NO_PAGE: PageId = u32::MAX;
/// Page ids per chunk.
pub(crate) const CHUNK: usize = 16;

/// A slab of reference-counted values addressed by `u32` ids.
#[derive(Debug)]
pub(crate) struct Slab<T> {
    items: Vec<(Option<T>, u32)>,
    free: Vec<u32>,
}

impl<T> Slab<T> {
    pub(crate) fn new() -> Self {
        Slab {
            items: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Stores `value` with one reference and returns its id.
    pub(crate) fn insert(&mut self, value: T) -> u32 {
        if let Some(id) = self.free.pop() {
            let slot = &mut self.items[id as usize];
            assert!(slot.0.is_none(), "slab free list holds a live slot {id}");
            *slot = (Some(value), 1);
            id
        } else {
            let id = u32::try_from(self.items.len()).expect("more than 2^32 live slab items");
            assert!(id != u32::MAX, "slab id space exhausted");
            self.items.push((Some(value), 1));
            id
        }
    }

    pub(crate) fn get(&self, id: u32) -> &T {
        self.items[id as usize]
            .0
            .as_ref()
            .expect("use of a released slab item")
    }

    pub(crate) fn get_mut(&mut self, id: u32) -> &mut T {
        self.items[id as usize]
            .0
            .as_mut()
            .expect("use of a released slab item")
    }

    pub(crate) fn retain(&mut self, id: u32) {
        let slot = &mut self.items[id as usize];
        assert!(slot.0.is_some(), "retain of a released slab item {id}");
        slot.1 += 1;
    }

    /// Drops one reference; returns the value when it was the last.
    pub(crate) fn release(&mut self, id: u32) -> Option<T> {
        let slot = &mut self.items[id as usize];
        assert!(
            slot.0.is_some() && slot.1 > 0,
            "release of a released slab item {id}"
        );
        slot.1 -= 1;
        if slot.1 == 0 {
            self.free.push(id);
            slot.0.take()
        } else {
            None
        }
    }

    pub(crate) fn refs(&self, id: u32) -> u32 {
        self.items[id as usize].1
    }

    /// Whether `id` names a live item.
    pub(crate) fn is_live(&self, id: u32) -> bool {
        self.items
            .get(id as usize)
            .is_some_and(|slot| slot.0.is_some())
    }

    pub(crate) fn live(&self) -> usize {
        self.items.len() - self.free.len()
    }

    /// Bytes of checker memory the slab's own arrays take (not what its
    /// values own elsewhere).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.items.capacity() * size_of::<(Option<T>, u32)>()
            + self.free.capacity() * size_of::<u32>()
    }
}

/// What a stored page holds.
#[derive(Debug)]
enum Content {
    /// Its bytes.
    Full(Box<[u8]>),
    /// The runs in which it differs from `base`, a page it keeps stored
    /// (one reference; see [`crate::memory::delta`]), cut or extended with
    /// zeros to this page's length.
    Delta { base: PageId, runs: Box<[u8]> },
}

#[derive(Debug)]
struct PageSlot {
    content: Content,
    /// The page's length in bytes.
    len: u32,
    /// Deltas between it and a full page (0: full).
    depth: u32,
    hash: u128,
    refs: u32,
    /// The arenas the page's words point into (see
    /// `Relocation::arena_mask`), computed when the contents were first
    /// stored.
    arenas: u64,
    /// A number no other page of this store ever had (see
    /// [`PageStore::serial`]).
    serial: u64,
}

/// How many spare full-page buffers the store keeps for reuse.
const SPARE_PAGES: usize = 4096;

/// The most deltas between a page and the full page it is read from: a
/// read copies the full page and applies each delta, so this bounds its
/// cost (a page that would be deeper is stored full).
const MAX_DEPTH: u32 = 48;

/// The largest delta stored; a page that differs more from its base is
/// stored full.
const MAX_DELTA: usize = PAGE / 4;

/// Pages stored once by content, with reference counts. A page that
/// differs little from the page it replaces (its base) is stored as a
/// delta against it ([`crate::memory::delta`]).
#[derive(Debug)]
pub(crate) struct PageStore {
    slots: Vec<PageSlot>,
    free: Vec<u32>,
    index: hashbrown::HashTable<u32>,
    spare: Vec<Box<[u8]>>,
    bytes: usize,
    /// The serial of the next page stored.
    next_serial: u64,
    /// Whether new pages may be stored as deltas.
    deltas: bool,
    /// Pages stored as deltas now.
    delta_pages: usize,
    /// A page's bytes, decoded for a comparison.
    scratch: std::cell::RefCell<Box<[u8]>>,
    /// Pages decoded lately, by serial (see [`Decoded`]).
    decoded: std::cell::RefCell<Decoded>,
    /// A delta being encoded.
    encoded: Vec<u8>,
}

impl PageStore {
    pub(crate) fn new() -> Self {
        Self::with_deltas(deltas_enabled())
    }

    /// A store that keeps every page full (`deltas` false) or stores pages
    /// as deltas where they are small.
    pub(crate) fn with_deltas(deltas: bool) -> Self {
        PageStore {
            slots: Vec::new(),
            free: Vec::new(),
            index: hashbrown::HashTable::new(),
            spare: Vec::new(),
            bytes: 0,
            next_serial: 1,
            deltas,
            delta_pages: 0,
            scratch: std::cell::RefCell::new(vec![0; PAGE].into_boxed_slice()),
            decoded: std::cell::RefCell::new(Decoded::default()),
            encoded: Vec::with_capacity(MAX_DELTA + 16),
        }
    }

    /// Returns the id of the page with these contents (whose hash is `hash`),
    /// storing it if it is new, and adds one reference. `base` is a stored
    /// page the new one likely differs little from (the page it replaces),
    /// or [`NO_PAGE`].
    pub(crate) fn intern(
        &mut self,
        bytes: &[u8],
        hash: u128,
        arenas: impl FnOnce(&[u8]) -> u64,
        base: PageId,
    ) -> PageId {
        assert!(bytes.len() <= PAGE, "a page of {} bytes", bytes.len());
        let found = self.index.find(hash as u64, |&id| {
            self.slots[id as usize].hash == hash && self.equals(id, bytes)
        });
        if let Some(&id) = found {
            self.slots[id as usize].refs += 1;
            return id;
        }
        let (content, depth) = match self.delta_against(base, bytes) {
            Some(runs) => {
                self.retain(base);
                self.delta_pages += 1;
                let depth = self.slots[base as usize].depth + 1;
                (Content::Delta { base, runs }, depth)
            }
            None => {
                let data: Box<[u8]> = match self.spare.pop() {
                    Some(mut buf) if bytes.len() == PAGE => {
                        buf.copy_from_slice(bytes);
                        buf
                    }
                    other => {
                        if let Some(buf) = other {
                            self.spare.push(buf);
                        }
                        bytes.into()
                    }
                };
                (Content::Full(data), 0)
            }
        };
        self.bytes += content_bytes(&content);
        let slot = PageSlot {
            arenas: arenas(bytes),
            content,
            len: bytes.len() as u32,
            depth,
            hash,
            refs: 1,
            serial: self.next_serial,
        };
        self.next_serial += 1;
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = slot;
                id
            }
            None => {
                let id = u32::try_from(self.slots.len()).expect("more than 2^32 distinct pages");
                assert!(id != NO_PAGE, "page id space exhausted");
                self.slots.push(slot);
                id
            }
        };
        let slots = &self.slots;
        self.index
            .insert_unique(hash as u64, id, |&id| slots[id as usize].hash as u64);
        id
    }

    /// `bytes` as a delta against page `base`, if it may be stored so and
    /// the delta is small.
    fn delta_against(&mut self, base: PageId, bytes: &[u8]) -> Option<Box<[u8]>> {
        if !self.deltas || base == NO_PAGE {
            return None;
        }
        let b = &self.slots[base as usize];
        assert!(b.refs > 0, "a delta against a freed page {base}");
        if b.depth >= MAX_DEPTH {
            return None;
        }
        let mut encoded = std::mem::take(&mut self.encoded);
        let fits = self.with_page(base, |base_bytes| {
            if base_bytes.len() >= bytes.len() {
                super::delta::encode(&base_bytes[..bytes.len()], bytes, MAX_DELTA, &mut encoded)
            } else {
                // The base, extended with zeros to the page's length.
                let mut scratch = self.scratch.borrow_mut();
                scratch[..base_bytes.len()].copy_from_slice(base_bytes);
                scratch[base_bytes.len()..bytes.len()].fill(0);
                super::delta::encode(&scratch[..bytes.len()], bytes, MAX_DELTA, &mut encoded)
            }
        });
        let runs = fits.map(|()| encoded.as_slice().into());
        self.encoded = encoded;
        runs
    }

    /// Calls `f` with page `id`'s bytes: a full page's own, a delta page's
    /// decoded into the table of pages decoded lately ([`Decoded`]), where
    /// a read that follows finds them.
    pub(crate) fn with_page<R>(&self, id: PageId, f: impl FnOnce(&[u8]) -> R) -> R {
        let slot = &self.slots[id as usize];
        debug_assert!(slot.refs > 0, "read of a freed page {id}");
        if let Content::Full(data) = &slot.content {
            return f(data);
        }
        let len = slot.len as usize;
        let mut decoded = self.decoded.borrow_mut();
        let at = decoded.slot(slot.serial);
        if decoded.serials[at] != slot.serial {
            self.decode_into(id, &mut decoded, at);
        }
        f(&decoded.pages[at][..len])
    }

    /// Decodes delta page `id` into entry `at` of `decoded`: from the
    /// nearest page of its chain found there, or from the full page at
    /// its end, each delta applied in turn.
    fn decode_into(&self, id: PageId, decoded: &mut Decoded, at: usize) {
        let mut chain = [NO_PAGE; MAX_DEPTH as usize + 1];
        let mut n = 0;
        let mut p = id;
        let mut len = loop {
            let slot = &self.slots[p as usize];
            debug_assert!(slot.refs > 0, "read of a freed page {p}");
            match &slot.content {
                Content::Full(data) => {
                    let buf = &mut decoded.pages[at];
                    buf[..data.len()].copy_from_slice(data);
                    buf[data.len()..].fill(0);
                    break data.len();
                }
                // A page decoded lately (the one a transition started
                // from, a sibling's) is the start, not its whole chain.
                Content::Delta { .. } if p != id && decoded.has(slot.serial) => {
                    decoded.copy(decoded.slot(slot.serial), at);
                    break slot.len as usize;
                }
                Content::Delta { base, .. } => {
                    chain[n] = p;
                    n += 1;
                    p = *base;
                }
            }
        };
        let buf = &mut decoded.pages[at];
        for &d in chain[..n].iter().rev() {
            let slot = &self.slots[d as usize];
            let (new_len, Content::Delta { runs, .. }) = (slot.len as usize, &slot.content) else {
                unreachable!("the chain holds deltas only")
            };
            // Cut to this page's length: what lies beyond is zero.
            if new_len < len {
                buf[new_len..len].fill(0);
            }
            len = new_len;
            super::delta::apply(runs, &mut buf[..len]);
        }
        decoded.serials[at] = self.slots[id as usize].serial;
    }

    /// Writes page `id`'s bytes into `dst` (its length).
    fn decode(&self, id: PageId, dst: &mut [u8]) {
        self.with_page(id, |bytes| {
            assert_eq!(
                dst.len(),
                bytes.len(),
                "a page of {} bytes read into {}",
                bytes.len(),
                dst.len()
            );
            dst.copy_from_slice(bytes)
        })
    }

    /// Whether page `id` holds exactly `bytes`.
    pub(crate) fn equals(&self, id: PageId, bytes: &[u8]) -> bool {
        self.slots[id as usize].len as usize == bytes.len() && self.with_page(id, |p| p == bytes)
    }

    /// Writes page `id`'s bytes into `dst` (its length), which holds page
    /// `known` now, or anything if `known` is [`NO_PAGE`]: a delta against
    /// `known`, of the same length, is applied to it without copying the
    /// rest.
    pub(crate) fn write(&self, id: PageId, dst: &mut [u8], known: PageId) {
        let slot = &self.slots[id as usize];
        match &slot.content {
            Content::Delta { base, runs }
                if *base == known
                    && known != NO_PAGE
                    && self.slots[known as usize].len == slot.len =>
            {
                super::delta::apply(runs, dst)
            }
            _ => self.decode(id, dst),
        }
    }

    /// Page `id`'s bytes.
    pub(crate) fn page(&self, id: PageId) -> std::borrow::Cow<'_, [u8]> {
        match &self.slots[id as usize].content {
            Content::Full(data) => std::borrow::Cow::Borrowed(data),
            Content::Delta { .. } => std::borrow::Cow::Owned(self.with_page(id, <[u8]>::to_vec)),
        }
    }

    /// The page's length in bytes.
    pub(crate) fn len_of(&self, id: PageId) -> usize {
        self.slots[id as usize].len as usize
    }

    pub(crate) fn retain(&mut self, id: PageId) {
        let slot = &mut self.slots[id as usize];
        assert!(slot.refs > 0, "retain of a freed page {id}");
        slot.refs += 1;
    }

    pub(crate) fn release(&mut self, id: PageId) {
        let mut id = id;
        loop {
            let slot = &mut self.slots[id as usize];
            assert!(slot.refs > 0, "release of a freed page {id}");
            slot.refs -= 1;
            if slot.refs > 0 {
                return;
            }
            let hash = slot.hash;
            let content = std::mem::replace(&mut slot.content, Content::Full(Box::default()));
            self.bytes -= content_bytes(&content);
            let entry = self
                .index
                .find_entry(hash as u64, |&x| x == id)
                .unwrap_or_else(|_| panic!("page {id} missing from the page index"));
            entry.remove();
            self.free.push(id);
            match content {
                Content::Full(data) => {
                    if data.len() == PAGE && self.spare.len() < SPARE_PAGES {
                        self.spare.push(data);
                    }
                    return;
                }
                // The base loses the reference this page held.
                Content::Delta { base, .. } => {
                    self.delta_pages -= 1;
                    id = base;
                }
            }
        }
    }

    pub(crate) fn hash(&self, id: PageId) -> u128 {
        self.slots[id as usize].hash
    }

    /// A number that names the page's contents for as long as the store
    /// lives: unlike its id, which a page stored after this one is freed
    /// may reuse, no two pages ever have the same serial. What is computed
    /// from a page's bytes can be remembered under it.
    pub(crate) fn serial(&self, id: PageId) -> u64 {
        self.slots[id as usize].serial
    }

    /// The arenas the page points into (bit k: arena k, 63 and up share
    /// bit 63).
    pub(crate) fn arenas(&self, id: PageId) -> u64 {
        self.slots[id as usize].arenas
    }

    /// Distinct pages stored.
    pub(crate) fn pages(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Of [`PageStore::pages`], those stored as deltas.
    pub(crate) fn delta_pages(&self) -> usize {
        self.delta_pages
    }

    /// Bytes of page contents stored (deltas counted by their size).
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes of checker memory the store takes beyond the contents: its
    /// slots, its index, its free list and its spare page buffers.
    pub(crate) fn overhead_bytes(&self) -> usize {
        self.slots.capacity() * size_of::<PageSlot>()
            + self.free.capacity() * size_of::<u32>()
            // A hashbrown table: a u32 and a control byte per bucket.
            + self.index.capacity() * (size_of::<u32>() + 1)
            + self.spare.iter().map(|b| b.len()).sum::<usize>()
            + self.spare.capacity() * size_of::<Box<[u8]>>()
    }

    #[cfg(test)]
    pub(crate) fn refs(&self, id: PageId) -> u32 {
        self.slots[id as usize].refs
    }
}

/// Pages decoded lately, each a whole page (zeros after its length), in
/// a direct-mapped table by serial: reading a delta page again costs a
/// lookup, not its chain.
#[derive(Debug)]
struct Decoded {
    /// The serial of the page each entry holds (0: none; serials start
    /// at 1).
    serials: Vec<u64>,
    pages: Vec<Box<[u8]>>,
}

/// Entries of [`Decoded`] (a power of two): 256 KiB of pages.
const DECODED: usize = 64;

impl Default for Decoded {
    fn default() -> Self {
        Decoded {
            serials: vec![0; DECODED],
            pages: (0..DECODED)
                .map(|_| vec![0u8; PAGE].into_boxed_slice())
                .collect(),
        }
    }
}

impl Decoded {
    /// The entry the page of `serial` goes in.
    fn slot(&self, serial: u64) -> usize {
        // Serials are consecutive: a multiplicative hash spreads a run of
        // them (a chain stored one transition after another).
        (serial.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize % DECODED
    }

    fn has(&self, serial: u64) -> bool {
        self.serials[self.slot(serial)] == serial
    }

    /// Copies entry `from` into entry `to` (nothing when they are one).
    fn copy(&mut self, from: usize, to: usize) {
        if from != to {
            let (src, dst) = if from < to {
                let (a, b) = self.pages.split_at_mut(to);
                (&a[from], &mut b[0])
            } else {
                let (a, b) = self.pages.split_at_mut(from);
                (&b[0], &mut a[to])
            };
            dst.copy_from_slice(src);
        }
    }
}

/// Whether pages may be stored as deltas, from `CMC_PAGE_DELTAS` (`on`,
/// the default, or `off`): a knob for the bench that measures what deltas
/// save (`benches/vs-stateright`, `memory`), not a setting for checks. An
/// unknown value is said once and the default kept.
fn deltas_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| match std::env::var("CMC_PAGE_DELTAS").as_deref() {
        Err(_) | Ok("on") => true,
        Ok("off") => false,
        Ok(other) => {
            eprintln!(
                "cmc: CMC_PAGE_DELTAS={other:?} is not on or off; pages are stored as deltas"
            );
            true
        }
    })
}

/// The bytes a page's contents take.
fn content_bytes(c: &Content) -> usize {
    match c {
        Content::Full(data) => data.len(),
        Content::Delta { runs, .. } => runs.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_pages_are_stored_once_and_freed_with_their_last_reference() {
        let mut store = PageStore::new();
        let a = vec![1u8; PAGE];
        let b = vec![2u8; 100];
        let ha = crate::sys::hash::fold_hash(&a);
        let hb = crate::sys::hash::fold_hash(&b);
        let ia = store.intern(&a, ha, |_| 0, NO_PAGE);
        let ia2 = store.intern(&a, ha, |_| 0, NO_PAGE);
        let ib = store.intern(&b, hb, |_| 0, NO_PAGE);
        assert_eq!(ia, ia2);
        assert_ne!(ia, ib);
        assert_eq!(store.pages(), 2);
        assert_eq!(store.bytes(), PAGE + 100);
        assert_eq!(store.refs(ia), 2);
        store.release(ia);
        assert_eq!(store.pages(), 2);
        store.release(ia);
        assert_eq!(store.pages(), 1);
        assert_eq!(store.bytes(), 100);
        // The freed slot is reused and the index no longer finds the old page.
        let ic = store.intern(&a, ha, |_| 0, NO_PAGE);
        assert_eq!(store.refs(ic), 1);
        assert_eq!(&*store.page(ic), &a[..]);
        assert_eq!(&*store.page(ib), &b[..]);
    }

    #[test]
    fn equal_hashes_with_different_contents_stay_distinct() {
        // The store compares contents, not only hashes: a forced collision
        // must not merge two pages.
        let mut store = PageStore::new();
        let x = store.intern(b"first", 42, |_| 0, NO_PAGE);
        let y = store.intern(b"second", 42, |_| 0, NO_PAGE);
        assert_ne!(x, y);
        assert_eq!(&*store.page(x), b"first");
        assert_eq!(&*store.page(y), b"second");
        store.release(x);
        assert_eq!(store.intern(b"second", 42, |_| 0, NO_PAGE), y);
    }

    /// Random pages, each made from a live one by a few random edits and
    /// interned against it (so chains of deltas form), released in random
    /// order: every live page reads back as the reference says, equal
    /// contents share an id, and releasing everything frees everything.
    #[test]
    fn deltas_read_back_as_a_reference_says_and_free_their_bases() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        let mut rng = SmallRng::seed_from_u64(3);
        let mut store = PageStore::new();
        // The references this test holds: (id, contents).
        let mut live: Vec<(PageId, Vec<u8>)> = Vec::new();
        let first = vec![0u8; PAGE];
        let h = crate::sys::hash::fold_hash(&first);
        live.push((store.intern(&first, h, |_| 0, NO_PAGE), first));
        for round in 0..20_000 {
            if !live.is_empty() && rng.gen_bool(0.45) {
                let k = rng.gen_range(0..live.len());
                let (id, _) = live.swap_remove(k);
                store.release(id);
                continue;
            }
            let (base, mut page) = if live.is_empty() {
                (NO_PAGE, vec![0u8; PAGE])
            } else {
                let (id, bytes) = &live[rng.gen_range(0..live.len())];
                (*id, bytes.clone())
            };
            let edits = if round % 50 == 0 {
                3000
            } else {
                rng.gen_range(0..4)
            };
            for _ in 0..edits {
                let at = rng.gen_range(0..page.len().max(1));
                if let Some(b) = page.get_mut(at) {
                    *b = rng.gen_range(0..4);
                }
            }
            // A page whose length changes (the last page of a heap that
            // grew or shrank).
            if rng.gen_bool(0.2) {
                page.resize(rng.gen_range(1..=PAGE), rng.gen_range(0..2));
            }
            let h = crate::sys::hash::fold_hash(&page);
            let id = store.intern(&page, h, |_| 0, base);
            live.push((id, page));
            if round % 997 == 0 {
                for (id, bytes) in &live {
                    assert_eq!(&*store.page(*id), &bytes[..], "round {round}");
                    assert!(store.equals(*id, bytes));
                }
            }
        }
        assert!(store.delta_pages() > 0, "no page was stored as a delta");
        for (id, bytes) in &live {
            assert_eq!(&*store.page(*id), &bytes[..]);
            let mut dst = vec![0u8; bytes.len()];
            store.write(*id, &mut dst, NO_PAGE);
            assert_eq!(dst, *bytes);
        }
        // Equal contents are one page, whatever base they came with.
        for (id, bytes) in live.iter().take(50) {
            let h = crate::sys::hash::fold_hash(bytes);
            assert_eq!(store.intern(bytes, h, |_| 0, NO_PAGE), *id);
            store.release(*id);
        }
        for (id, _) in live.drain(..) {
            store.release(id);
        }
        assert_eq!(
            store.pages(),
            0,
            "pages left after every reference was released"
        );
        assert_eq!(store.bytes(), 0);
        assert_eq!(store.delta_pages(), 0);
    }

    #[test]
    fn a_delta_applies_over_its_base_alone() {
        let mut store = PageStore::new();
        let a = vec![5u8; PAGE];
        let mut b = a.clone();
        b[100] = 6;
        let ia = store.intern(&a, crate::sys::hash::fold_hash(&a), |_| 0, NO_PAGE);
        let ib = store.intern(&b, crate::sys::hash::fold_hash(&b), |_| 0, ia);
        assert_eq!(store.delta_pages(), 1);
        assert!(store.bytes() < PAGE + 16, "{} bytes", store.bytes());
        // A destination that holds the base gets only the changed byte.
        let mut dst = a.clone();
        dst[4000] = 99; // not part of the base: a write over the base keeps it
        store.write(ib, &mut dst, ia);
        assert_eq!(dst[100], 6);
        assert_eq!(dst[4000], 99);
        // The base stays stored while the delta needs it.
        store.release(ia);
        assert_eq!(store.pages(), 2);
        assert_eq!(&*store.page(ib), &b[..]);
        store.release(ib);
        assert_eq!(store.pages(), 0);
    }

    #[test]
    fn slab_counts_references() {
        let mut slab = Slab::new();
        let a = slab.insert("a");
        slab.retain(a);
        assert_eq!(slab.release(a), None);
        assert_eq!(slab.release(a), Some("a"));
        assert_eq!(slab.live(), 0);
        let b = slab.insert("b");
        assert_eq!(a, b, "freed ids are reused");
    }
}
