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

    pub(crate) fn live(&self) -> usize {
        self.items.len() - self.free.len()
    }
}

#[derive(Debug)]
struct PageSlot {
    data: Box<[u8]>,
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

/// Pages stored once by content, with reference counts.
#[derive(Debug)]
pub(crate) struct PageStore {
    slots: Vec<PageSlot>,
    free: Vec<u32>,
    index: hashbrown::HashTable<u32>,
    spare: Vec<Box<[u8]>>,
    bytes: usize,
    /// The serial of the next page stored.
    next_serial: u64,
}

impl PageStore {
    pub(crate) fn new() -> Self {
        PageStore {
            slots: Vec::new(),
            free: Vec::new(),
            index: hashbrown::HashTable::new(),
            spare: Vec::new(),
            bytes: 0,
            next_serial: 1,
        }
    }

    /// Returns the id of the page with these contents (whose hash is `hash`),
    /// storing it if it is new, and adds one reference.
    pub(crate) fn intern(
        &mut self,
        bytes: &[u8],
        hash: u128,
        arenas: impl FnOnce(&[u8]) -> u64,
    ) -> PageId {
        assert!(bytes.len() <= PAGE, "a page of {} bytes", bytes.len());
        let slots = &self.slots;
        if let Some(&id) = self.index.find(hash as u64, |&id| {
            let s = &slots[id as usize];
            s.hash == hash && *s.data == *bytes
        }) {
            self.slots[id as usize].refs += 1;
            return id;
        }
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
        self.bytes += data.len();
        let slot = PageSlot {
            arenas: arenas(&data),
            data,
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

    pub(crate) fn retain(&mut self, id: PageId) {
        let slot = &mut self.slots[id as usize];
        assert!(slot.refs > 0, "retain of a freed page {id}");
        slot.refs += 1;
    }

    pub(crate) fn release(&mut self, id: PageId) {
        let slot = &mut self.slots[id as usize];
        assert!(slot.refs > 0, "release of a freed page {id}");
        slot.refs -= 1;
        if slot.refs > 0 {
            return;
        }
        let hash = slot.hash;
        let data = std::mem::take(&mut slot.data);
        self.bytes -= data.len();
        if data.len() == PAGE && self.spare.len() < SPARE_PAGES {
            self.spare.push(data);
        }
        let entry = self
            .index
            .find_entry(hash as u64, |&x| x == id)
            .unwrap_or_else(|_| panic!("page {id} missing from the page index"));
        entry.remove();
        self.free.push(id);
    }

    pub(crate) fn data(&self, id: PageId) -> &[u8] {
        let slot = &self.slots[id as usize];
        debug_assert!(slot.refs > 0, "read of a freed page {id}");
        &slot.data
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

    /// Bytes of page contents stored.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    #[cfg(test)]
    pub(crate) fn refs(&self, id: PageId) -> u32 {
        self.slots[id as usize].refs
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
        let ia = store.intern(&a, ha, |_| 0);
        let ia2 = store.intern(&a, ha, |_| 0);
        let ib = store.intern(&b, hb, |_| 0);
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
        let ic = store.intern(&a, ha, |_| 0);
        assert_eq!(store.refs(ic), 1);
        assert_eq!(store.data(ic), &a[..]);
        assert_eq!(store.data(ib), &b[..]);
    }

    #[test]
    fn equal_hashes_with_different_contents_stay_distinct() {
        // The store compares contents, not only hashes: a forced collision
        // must not merge two pages.
        let mut store = PageStore::new();
        let x = store.intern(b"first", 42, |_| 0);
        let y = store.intern(b"second", 42, |_| 0);
        assert_ne!(x, y);
        assert_eq!(store.data(x), b"first");
        assert_eq!(store.data(y), b"second");
        store.release(x);
        assert_eq!(store.intern(b"second", 42, |_| 0), y);
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
