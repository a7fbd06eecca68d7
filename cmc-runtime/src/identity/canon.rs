//! Canonical heap fingerprints: two heaps that differ only in where objects
//! were allocated get the same fingerprint (thesis §3.4).
//!
//! **The heap graph.** Objects are the arena allocator's live blocks. A word
//! of an object (8-byte aligned within it) whose value lies inside the
//! payload of a live block of the same arena, or just past its end, is a
//! pointer (interior and one-past-the-end pointers included). A word whose value lies elsewhere in the arena's
//! reservation is *loose* (a dangling or one-past-the-end pointer, or an
//! integer that looks like one): it is hashed as its offset in the arena,
//! tagged, so it neither depends on where the arena is mapped nor is
//! confused with an integer. Only objects reachable from the root object
//! count; everything else (garbage, free blocks, the allocator's own
//! metadata) is not part of the state.
//!
//! **Canonical addresses.** The breadth-first traversal from the root,
//! following pointer fields in offset order, gives every reachable object
//! its *BFS access chain*. An object's canonical address is a hash of its
//! key, (its parent's canonical address + the field offset), so it is a
//! function of the chain alone: the same heap gets the same addresses, and
//! the same fingerprint, whenever, wherever and after whatever other heaps
//! it is computed — in another worker of a parallel search, in another
//! order of exploration, in a replay. (The thesis learns addresses in a
//! table and lets an object whose chain changed keep its old address (its
//! Fig. 3.5), which saves rehashing moved objects but makes an address
//! depend on the heaps seen before: two workers, or two orders, then split
//! one state into several.) Two objects of one heap must not share an
//! address: where two keys hash to one address, the later object in BFS
//! order takes the address of its key at the next *probe* level.
//!
//! **The fingerprint** is the sum of one 128-bit term per reachable object,
//! a hash of (canonical address, length, bytes with every pointer replaced
//! by its target's canonical address plus the interior offset, the map of
//! pointer and loose fields).
//!
//! **Incrementality.** A [`HeapGraph`] keeps the compact graph of the heap
//! it last saw: the blocks, each object's pointer fields, reverse edges,
//! canonical address and term. Given the next state it diffs the two page
//! tables, re-reads the block headers only inside changed pages, compares
//! the bytes of the blocks there with the previous state's, and rescans and
//! rehashes only objects whose bytes changed. Only when the pointer
//! structure of the reachable heap changed does it re-run the breadth-first
//! traversal, over the compact graph (no memory is read), and then rehashes
//! the objects whose canonical address changed and the objects pointing to
//! them.

use std::collections::{BTreeMap, BTreeSet};

use std::hash::{BuildHasherDefault, Hasher};

/// A multiply-rotate hasher for the graph's integer keys (offsets and
/// canonical addresses chosen by us, not by an adversary), with a final mix:
/// the keys are multiples of 16 or of 2^32, and hashbrown takes the bucket
/// from the low bits.
#[derive(Default)]
struct WordHasher(u64);

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        crate::sys::hash::fmix64(self.0)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
}

type Build = BuildHasherDefault<WordHasher>;
type HashMap<K, V> = hashbrown::HashMap<K, V, Build>;
type HashSet<K> = hashbrown::HashSet<K, Build>;

use crate::memory::heap::HEADER_SIZE;
use crate::memory::{ArenaId, Memory, StateId};
use crate::sys::PAGE;

/// Bytes of a block header in the arena heap (see `heap.rs`).
const BLOCK_HDR: usize = 16;
/// Canonical addresses are multiples of this; an object's interior offsets
/// (below 4 GiB) never reach the next one. The root object is at 0.
const STRIDE: u64 = 1 << 32;

/// How access-chain keys become canonical addresses, and what that cost
/// (see the module documentation). An address is a function of its key
/// alone, so every search, every worker of a parallel search and every
/// order of exploration gives a heap the same fingerprint.
#[derive(Debug)]
pub struct CanonTable {
    /// Keys placed so far (with repetitions).
    placed: u64,
    /// Probes taken because two live objects' keys hashed to one address.
    probes: u64,
}

impl Default for CanonTable {
    fn default() -> Self {
        Self::new()
    }
}

impl CanonTable {
    /// An empty table.
    pub fn new() -> Self {
        CanonTable {
            placed: 0,
            probes: 0,
        }
    }

    /// Objects placed so far (one per reachable object per traversal).
    pub fn entries(&self) -> usize {
        self.placed as usize
    }

    /// Probes taken because two live objects' keys named the same address.
    pub fn conflicts(&self) -> usize {
        self.probes as usize
    }

    /// The canonical address of an object reached through the pointer field
    /// at canonical address `key`: a hash of the key (level 0), or, when an
    /// earlier object of this traversal has that address (`taken`), of the
    /// key and the next level. A multiple of the stride, never the root's 0.
    fn place(&mut self, key: u64, taken: impl Fn(u64) -> bool) -> u64 {
        self.placed += 1;
        let address = |level: u64| {
            let h =
                crate::sys::hash::fmix64(key ^ level.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ SALT);
            (h >> 32).max(1) << 32
        };
        let mut level = 0;
        let mut at = address(0);
        while taken(at) {
            level += 1;
            self.probes += 1;
            at = address(level);
        }
        at
    }
}

/// Mixed into every canonical address, so that a key of 0 does not hash to
/// a small value.
const SALT: u64 = 0x636d_635f_6361_6e6f;

/// A pointer field: the word at `field` points `interior` bytes into the
/// object whose payload starts at arena offset `target`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Edge {
    field: usize,
    target: usize,
    interior: usize,
}

#[derive(Debug, Default)]
struct Obj {
    len: usize,
    edges: Vec<Edge>,
    /// Loose words as (field, offset of the value in the arena).
    loose: Vec<(usize, usize)>,
    /// Pointer fields of other objects (or this one) that point here, as
    /// (holder payload offset, field).
    ins: Vec<(usize, usize)>,
    /// Reachable from the root in the last traversal.
    reachable: bool,
    /// Canonical address, depth and tree edge (holder, field) in the
    /// breadth-first tree (valid while reachable).
    reloc: u64,
    depth: u32,
    parent: (usize, usize),
    /// The object's term, and whether it is in the sum.
    term: u128,
    counted: bool,
    /// The traversal that last visited the object.
    seen: u64,
}

/// Counters of the work a [`HeapGraph`] has done, for tests and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CanonStats {
    /// Fingerprints computed.
    pub syncs: u64,
    /// Objects whose words were re-read for pointers.
    pub rescanned: u64,
    /// Object terms computed.
    pub rehashed: u64,
    /// Breadth-first traversals of the compact graph.
    pub traversals: u64,
}

/// The compact heap graph of one arena, kept in step with the states it is
/// asked to fingerprint (see the module documentation).
#[derive(Debug)]
pub struct HeapGraph {
    arena: ArenaId,
    /// Payload offset of the root object.
    root: usize,
    /// The state the graph describes (one reference is held).
    synced: Option<StateId>,
    /// Every block (live or free) as header offset → (size, live).
    blocks: BTreeMap<usize, (usize, bool)>,
    objs: HashMap<usize, Obj>,
    /// Loose words as (value offset, holder), to find the holders whose word
    /// becomes a pointer when a block is allocated there.
    loose: BTreeSet<(usize, usize)>,
    /// Reachable objects in breadth-first order.
    reach: Vec<usize>,
    /// Canonical address → (traversal, object), for conflict detection.
    taken: HashMap<u64, (u64, usize)>,
    epoch: u64,
    sum: u128,
    stats: CanonStats,
    scratch: Vec<u8>,
}

/// The objects to revisit after the blocks were brought up to date.
#[derive(Default)]
struct Work {
    rescan: HashSet<usize>,
    /// Objects that appeared in this update.
    added: HashSet<usize>,
    rehash: HashSet<usize>,
    structure: bool,
}

impl HeapGraph {
    /// A graph for `arena` whose root object is the allocation at `root`
    /// (a pointer `Box::into_raw` or `alloc` returned in that arena). A root
    /// that is no allocation of the arena (a boxed zero-sized value) makes
    /// every state's heap empty.
    pub fn new(mem: &Memory, arena: ArenaId, root: *const u8) -> Self {
        let base = mem.range(arena).0;
        let root = (root as usize).wrapping_sub(base);
        HeapGraph {
            arena,
            root,
            synced: None,
            blocks: BTreeMap::new(),
            objs: HashMap::default(),
            loose: BTreeSet::new(),
            reach: Vec::new(),
            taken: HashMap::default(),
            epoch: 0,
            sum: 0,
            stats: CanonStats::default(),
            scratch: Vec::new(),
        }
    }

    /// The work done so far.
    pub fn stats(&self) -> CanonStats {
        self.stats
    }

    /// Objects reachable from the root in the last fingerprinted state.
    pub fn reachable(&self) -> usize {
        self.reach.len()
    }

    /// Drops the graph's reference to the last state it described.
    pub fn release(&mut self, mem: &mut Memory) {
        if let Some(s) = self.synced.take() {
            mem.release(s);
        }
    }

    /// The canonical fingerprint of the arena in `state`, which must be the
    /// state loaded in memory. Updates the graph from the state it last
    /// described to this one.
    pub fn fingerprint(
        &mut self,
        mem: &mut Memory,
        table: &mut CanonTable,
        state: StateId,
    ) -> u128 {
        assert_eq!(
            mem.loaded(),
            Some(state),
            "a heap graph reads the arena: the state it fingerprints must be loaded"
        );
        self.stats.syncs += 1;
        let used = mem.used(self.arena);
        let first = self.synced.is_none();
        let changed: Vec<usize> = match self.synced {
            Some(s) => mem.diff_pages(s, state, self.arena),
            None => (0..used.div_ceil(PAGE)).collect(),
        };
        if !changed.is_empty() || first {
            let mut work = Work {
                structure: first,
                ..Work::default()
            };
            self.update_blocks(mem, state, used, &changed, &mut work);
            self.update_objects(mem, &mut work);
            if work.structure {
                self.traverse(table, &mut work);
            }
            self.rehash(mem, &work);
        }
        mem.retain(state);
        if let Some(old) = self.synced.replace(state) {
            mem.release(old);
        }
        crate::sys::hash::finish(self.sum ^ 0x6865_6170)
    }

    /// Re-reads block headers inside the changed pages and records which
    /// objects appeared, disappeared or changed.
    fn update_blocks(
        &mut self,
        mem: &Memory,
        state: StateId,
        used: usize,
        changed: &[usize],
        work: &mut Work,
    ) {
        let base = mem.range(self.arena).0;
        let old_state = self.synced;
        // Maximal runs of changed pages, as byte ranges.
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for &p in changed {
            match runs.last_mut() {
                Some((_, e)) if *e == p * PAGE => *e += PAGE,
                _ => runs.push((p * PAGE, p * PAGE + PAGE)),
            }
        }
        let touches = |h: usize, size: usize| -> bool {
            let (first, last) = (h / PAGE, (h + size - 1) / PAGE);
            let k = changed.partition_point(|&p| p < first);
            k < changed.len() && changed[k] <= last
        };
        let mut added: Vec<(usize, usize, bool)> = Vec::new();
        let mut removed: Vec<(usize, usize, bool)> = Vec::new();
        let mut dirty: Vec<usize> = Vec::new();
        let mut pos = HEADER_SIZE;
        let mut i = 0;
        while i < runs.len() {
            let (s, _) = runs[i];
            if pos >= used || pos >= runs[i].1 {
                i += 1;
                continue;
            }
            // The last old boundary at or before the run starts a walk that
            // is valid in the new memory (its header, and every header
            // between the previous walk's end and it, lie in unchanged
            // pages).
            let start = self
                .blocks
                .range(..=s)
                .next_back()
                .map_or(HEADER_SIZE, |(&h, _)| h)
                .max(pos);
            let mut at = start;
            let mut walked = Vec::new();
            loop {
                while i + 1 < runs.len() && runs[i + 1].0 < at {
                    i += 1;
                }
                if at >= used || (at >= runs[i].1 && self.blocks.contains_key(&at)) {
                    break;
                }
                // SAFETY: `at` is a block boundary below the used length, so
                // its 16-byte header is committed arena memory.
                let word = unsafe { ((base + at + 8) as *const usize).read() };
                let (size, live) = (word & !1, word & 1 == 1);
                assert!(
                    size >= 32 && size % 16 == 0 && at + size <= used,
                    "{}: corrupted block header at offset {at} (size word {word:#x}): \
                     code wrote outside its objects",
                    mem.arena_name(self.arena)
                );
                walked.push((at, size, live));
                at += size;
            }
            let end = if at >= used { usize::MAX } else { at };
            // Merge the walked blocks with the old ones of the same span.
            let old: Vec<(usize, usize, bool)> = self
                .blocks
                .range(start..end)
                .map(|(&h, &(size, live))| (h, size, live))
                .collect();
            let (mut a, mut b) = (0, 0);
            while a < old.len() || b < walked.len() {
                match (old.get(a), walked.get(b)) {
                    (Some(&o), Some(&n)) if o == n => {
                        if n.2 && touches(n.0, n.1) {
                            dirty.push(n.0 + BLOCK_HDR);
                        }
                        a += 1;
                        b += 1;
                    }
                    (Some(&o), Some(&n)) if o.0 <= n.0 => {
                        removed.push(o);
                        a += 1;
                        if o.0 == n.0 {
                            added.push(n);
                            b += 1;
                        }
                    }
                    (Some(&o), None) => {
                        removed.push(o);
                        a += 1;
                    }
                    (_, Some(&n)) => {
                        added.push(n);
                        b += 1;
                    }
                    (None, None) => unreachable!(),
                }
            }
            pos = at;
            i += 1;
        }
        // Blocks beyond the new end (the heap shrank past every run).
        let tail: Vec<(usize, usize, bool)> = self
            .blocks
            .range(used.max(pos)..)
            .map(|(&h, &(size, live))| (h, size, live))
            .collect();
        removed.extend(tail);

        for &(h, _, live) in &removed {
            self.blocks.remove(&h);
            if live {
                self.remove_object(h + BLOCK_HDR, work);
            }
        }
        for &(h, size, live) in &added {
            self.blocks.insert(h, (size, live));
        }
        for &(h, size, live) in &added {
            if live {
                let payload = h + BLOCK_HDR;
                self.objs.insert(
                    payload,
                    Obj {
                        len: size - BLOCK_HDR,
                        ..Obj::default()
                    },
                );
                work.rescan.insert(payload);
                work.added.insert(payload);
                // Loose words that now point into this object (or just past it).
                let holders: Vec<usize> = self
                    .loose
                    .range((payload, 0)..=(payload + size - BLOCK_HDR, usize::MAX))
                    .map(|&(_, holder)| holder)
                    .collect();
                work.rescan.extend(holders);
            }
        }
        // Old blocks whose bytes may have changed: compare with the previous
        // state's pages, so that a write to one object of a page does not
        // rescan its neighbours.
        for payload in dirty {
            let len = self.objs[&payload].len;
            let same = old_state.is_some_and(|old| {
                let mut at = payload;
                let end = payload + len;
                while at < end {
                    let page = at / PAGE;
                    let upto = end.min((page + 1) * PAGE);
                    let (Some(was), Some(now)) = (
                        mem.page_in(old, self.arena, page),
                        mem.page_in(state, self.arena, page),
                    ) else {
                        return false;
                    };
                    let (lo, hi) = (at - page * PAGE, upto - page * PAGE);
                    if was.len() < hi || now.len() < hi || was[lo..hi] != now[lo..hi] {
                        return false;
                    }
                    at = upto;
                }
                true
            });
            if !same {
                work.rescan.insert(payload);
            }
        }
    }

    fn remove_object(&mut self, payload: usize, work: &mut Work) {
        let Some(obj) = self.objs.remove(&payload) else {
            return;
        };
        for e in &obj.edges {
            if let Some(t) = self.objs.get_mut(&e.target) {
                t.ins.retain(|&(h, f)| !(h == payload && f == e.field));
            }
        }
        for &(_, value) in &obj.loose {
            self.loose.remove(&(value, payload));
        }
        for &(holder, _) in &obj.ins {
            if holder != payload {
                work.rescan.insert(holder);
            }
        }
        work.rescan.remove(&payload);
        work.rehash.remove(&payload);
        if obj.reachable {
            work.structure = true;
        }
        if obj.counted {
            self.sum = self.sum.wrapping_sub(obj.term);
        }
    }

    /// The payload offset of the live object containing arena offset `off`,
    /// or ending exactly there (a one-past-the-end pointer).
    fn object_at(&self, off: usize) -> Option<usize> {
        let mut before = self.blocks.range(..=off).rev();
        let (&h, &(size, live)) = before.next()?;
        if live && off >= h + BLOCK_HDR && off <= h + size {
            return Some(h + BLOCK_HDR);
        }
        if off == h {
            let (&ph, &(psize, plive)) = before.next()?;
            return (plive && ph + psize == off).then_some(ph + BLOCK_HDR);
        }
        None
    }

    /// Re-reads the pointer fields of every object in `work.rescan`.
    fn update_objects(&mut self, mem: &Memory, work: &mut Work) {
        let (base, reserve) = mem.range(self.arena);
        let rescan: Vec<usize> = work.rescan.iter().copied().collect();
        for payload in rescan {
            let Some(len) = self.objs.get(&payload).map(|o| o.len) else {
                continue;
            };
            self.stats.rescanned += 1;
            let mut edges = Vec::new();
            let mut loose = Vec::new();
            for field in (0..len / 8).map(|w| w * 8) {
                // SAFETY: the word lies inside a live block of the loaded
                // state, so it is committed; payloads are 16-byte aligned.
                let v = unsafe { ((base + payload + field) as *const usize).read() };
                let Some(off) = v.checked_sub(base).filter(|&o| o < reserve) else {
                    continue;
                };
                match self.object_at(off) {
                    Some(target) => edges.push(Edge {
                        field,
                        target,
                        interior: off - target,
                    }),
                    None => loose.push((field, off)),
                }
            }
            let obj = self.objs.get_mut(&payload).expect("rescanned object");
            let old_edges = std::mem::take(&mut obj.edges);
            let old_loose = std::mem::take(&mut obj.loose);
            let (reachable, depth) = (obj.reachable, obj.depth);
            if reachable && !work.structure {
                work.structure = self.changes_tree(payload, depth, &old_edges, &edges);
            }
            // Reverse edges change only where a field's target changed
            // (both lists are sorted by field).
            let (mut a, mut b) = (0, 0);
            while a < old_edges.len() || b < edges.len() {
                let (o, n) = (old_edges.get(a).copied(), edges.get(b).copied());
                let (gone, came) = match (o, n) {
                    (Some(o), Some(n)) if o.field == n.field => {
                        a += 1;
                        b += 1;
                        if o.target == n.target {
                            // Same pointer; but a block freed and allocated
                            // again at the same place is a new object, whose
                            // reverse edges start empty.
                            if work.added.contains(&n.target) {
                                self.objs
                                    .get_mut(&n.target)
                                    .expect("edges point at live objects")
                                    .ins
                                    .push((payload, n.field));
                            }
                            continue;
                        }
                        (Some(o), Some(n))
                    }
                    (Some(o), Some(n)) if o.field < n.field => {
                        a += 1;
                        (Some(o), None)
                    }
                    (Some(o), None) => {
                        a += 1;
                        (Some(o), None)
                    }
                    (_, n) => {
                        b += 1;
                        (None, n)
                    }
                };
                if let Some(o) = gone {
                    if let Some(t) = self.objs.get_mut(&o.target) {
                        t.ins.retain(|&(h, f)| !(h == payload && f == o.field));
                    }
                }
                if let Some(n) = came {
                    self.objs
                        .get_mut(&n.target)
                        .expect("edges point at live objects")
                        .ins
                        .push((payload, n.field));
                }
            }
            for &(_, value) in &old_loose {
                self.loose.remove(&(value, payload));
            }
            for &(_, value) in &loose {
                self.loose.insert((value, payload));
            }
            let obj = self.objs.get_mut(&payload).expect("rescanned object");
            obj.edges = edges;
            obj.loose = loose;
            if reachable {
                work.rehash.insert(payload);
            }
        }
    }

    /// Whether replacing the pointer fields `old` of the reachable object
    /// `holder` (at `depth`) by `new` can change the breadth-first tree:
    /// when a removed pointer was a tree edge, or an added one reaches an
    /// object not reachable before or not strictly shallower than the
    /// holder (it could then become that object's tree edge). Pointers to
    /// shallower objects, the common case of back and cross links, leave
    /// every access chain as it was.
    fn changes_tree(&self, holder: usize, depth: u32, old: &[Edge], new: &[Edge]) -> bool {
        let tree_edge = |e: &Edge| {
            self.objs
                .get(&e.target)
                .is_some_and(|t| t.reachable && t.parent == (holder, e.field))
        };
        let harmless = |n: &Edge| {
            self.objs
                .get(&n.target)
                .is_some_and(|t| t.reachable && t.depth <= depth)
        };
        // Both lists are sorted by field: merge them.
        let (mut a, mut b) = (0, 0);
        while a < old.len() || b < new.len() {
            let (o, n) = (old.get(a), new.get(b));
            match (o, n) {
                (Some(o), Some(n)) if o.field == n.field => {
                    if o.target != n.target && (tree_edge(o) || !harmless(n)) {
                        return true;
                    }
                    a += 1;
                    b += 1;
                }
                (Some(o), Some(n)) if o.field < n.field => {
                    if tree_edge(o) {
                        return true;
                    }
                    a += 1;
                }
                (Some(o), None) => {
                    if tree_edge(o) {
                        return true;
                    }
                    a += 1;
                }
                (_, Some(n)) => {
                    if !harmless(n) {
                        return true;
                    }
                    b += 1;
                }
                (None, None) => unreachable!(),
            }
        }
        false
    }

    /// Breadth-first traversal of the compact graph from the root: assigns
    /// canonical addresses, and marks for rehashing the objects whose address
    /// changed, those pointing at them, and the newly reachable.
    fn traverse(&mut self, table: &mut CanonTable, work: &mut Work) {
        self.stats.traversals += 1;
        self.epoch += 1;
        let epoch = self.epoch;
        let previous = std::mem::take(&mut self.reach);
        let mut reach = Vec::with_capacity(previous.len() + 16);
        let mut moved: Vec<usize> = Vec::new();
        if let Some(root) = self.objs.get_mut(&self.root) {
            root.seen = epoch;
            if !root.reachable || root.reloc != 0 {
                moved.push(self.root);
            }
            root.reloc = 0;
            root.depth = 0;
            root.parent = (usize::MAX, usize::MAX);
            root.reachable = true;
            self.taken.insert(0, (epoch, self.root));
            reach.push(self.root);
        }
        let mut qi = 0;
        while qi < reach.len() {
            let parent = reach[qi];
            qi += 1;
            let (preloc, pdepth, nedges) = {
                let p = &self.objs[&parent];
                (p.reloc, p.depth, p.edges.len())
            };
            for k in 0..nedges {
                let e = self.objs[&parent].edges[k];
                let child = self.objs.get_mut(&e.target).expect("edge to a live object");
                if child.seen == epoch {
                    continue;
                }
                child.seen = epoch;
                let old = child.reachable.then_some(child.reloc);
                let key = preloc + e.field as u64;
                let taken = &self.taken;
                let at = table.place(key, |a| taken.get(&a).is_some_and(|&(ep, _)| ep == epoch));
                let child = self.objs.get_mut(&e.target).expect("edge to a live object");
                if old != Some(at) {
                    moved.push(e.target);
                }
                child.reloc = at;
                child.depth = pdepth + 1;
                child.parent = (parent, e.field);
                child.reachable = true;
                self.taken.insert(at, (epoch, e.target));
                reach.push(e.target);
            }
        }
        for p in previous {
            if let Some(o) = self.objs.get_mut(&p) {
                if o.seen != epoch {
                    o.reachable = false;
                    if o.counted {
                        self.sum = self.sum.wrapping_sub(o.term);
                        o.counted = false;
                    }
                    work.rehash.remove(&p);
                }
            }
        }
        for m in moved {
            work.rehash.insert(m);
            for &(holder, _) in &self.objs[&m].ins {
                if self.objs.get(&holder).is_some_and(|h| h.seen == epoch) {
                    work.rehash.insert(holder);
                }
            }
        }
        self.reach = reach;
        if self.taken.len() > 4 * self.reach.len() + 1024 {
            self.taken.retain(|_, &mut (ep, _)| ep == epoch);
        }
    }

    /// Recomputes the terms of `work.rehash` and updates the sum.
    fn rehash(&mut self, mem: &Memory, work: &Work) {
        let base = mem.range(self.arena).0;
        let mut buf = std::mem::take(&mut self.scratch);
        for &p in &work.rehash {
            let Some(o) = self.objs.get(&p) else { continue };
            if !o.reachable {
                continue;
            }
            self.stats.rehashed += 1;
            // SAFETY: the object is a live block of the loaded state.
            let bytes = unsafe { std::slice::from_raw_parts((base + p) as *const u8, o.len) };
            let term = object_term(
                &mut buf,
                mem.identity_relocation(),
                o.reloc,
                bytes,
                |field_buf| {
                    for e in &o.edges {
                        let canon = self.objs[&e.target].reloc + e.interior as u64;
                        field_buf.pointer(e.field, canon);
                    }
                    for &(field, value) in &o.loose {
                        field_buf.loose(field, value);
                    }
                },
            );
            let o = self.objs.get_mut(&p).expect("object");
            if o.counted {
                self.sum = self.sum.wrapping_sub(o.term);
            }
            o.term = term;
            o.counted = true;
            self.sum = self.sum.wrapping_add(term);
        }
        self.scratch = buf;
    }
}

/// Builds the canonical image of one object for hashing.
struct Fields<'b> {
    buf: &'b mut Vec<u8>,
    start: usize,
    map: Vec<u64>,
}

impl Fields<'_> {
    fn pointer(&mut self, field: usize, canon: u64) {
        self.buf[self.start + field..self.start + field + 8].copy_from_slice(&canon.to_le_bytes());
        self.map.push((field as u64) << 1);
    }

    fn loose(&mut self, field: usize, offset: usize) {
        self.buf[self.start + field..self.start + field + 8]
            .copy_from_slice(&(offset as u64).to_le_bytes());
        self.map.push((field as u64) << 1 | 1);
    }
}

/// The term of an object at canonical address `reloc` with contents
/// `bytes`, whose pointer and loose fields `fill` rewrites.
fn object_term(
    buf: &mut Vec<u8>,
    words: &crate::sys::reloc::Relocation,
    reloc: u64,
    bytes: &[u8],
    fill: impl FnOnce(&mut Fields<'_>),
) -> u128 {
    buf.clear();
    buf.extend_from_slice(&reloc.to_le_bytes());
    let start = buf.len();
    buf.extend_from_slice(bytes);
    let mut fields = Fields {
        buf,
        start,
        map: Vec::new(),
    };
    fill(&mut fields);
    let mut map = std::mem::take(&mut fields.map);
    trim_zeros(buf, start);
    map.sort_unstable();
    for m in map {
        buf.extend_from_slice(&m.to_le_bytes());
    }
    // Words that point into the program (a vtable, a string literal) hash
    // as (module, offset), into another arena (a shared buffer) as (arena,
    // offset); words that point into the stack are garbage.
    crate::sys::reloc::fold_hash_relocated(buf, words)
}

/// Drops the zero bytes at the end of `buf` (not before `start`): the
/// allocator hands out blocks rounded up, sometimes with 16 bytes of slack
/// depending on its history, and every byte the program did not write is
/// zero; so an object's canonical contents end at its last non-zero byte.
///
/// Whole words only: a word whose high bytes are zero (a pointer, a
/// length) keeps them, so what follows it (the field map) does not shift
/// into it, and a pointer into the program stays whole, to be hashed as
/// (module, offset).
fn trim_zeros(buf: &mut Vec<u8>, start: usize) {
    let len = buf.len() - start;
    let keep = buf[start..]
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |i| (i + 1).next_multiple_of(8).min(len));
    buf.truncate(start + keep);
}

/// Iosif's canonicalization, from scratch: a breadth-first traversal from
/// the root that places objects one after another in visiting order, and
/// the resulting canonical heap as bytes. Two heaps have the same heap
/// graph exactly when their forms are equal. This is the reference the
/// incremental [`HeapGraph`] is tested against, and the `full` line of the
/// `canon` benchmark.
pub fn reference_form(mem: &Memory, arena: ArenaId, root: *const u8) -> Vec<u8> {
    let (base, reserve) = mem.range(arena);
    let blocks: Vec<(usize, usize)> = mem
        .live_blocks(arena)
        .into_iter()
        .map(|(p, len)| (p as usize - base, len))
        .collect();
    let object_at = |off: usize| -> Option<(usize, usize)> {
        let k = blocks.partition_point(|&(p, _)| p <= off);
        let &(p, len) = blocks.get(k.checked_sub(1)?)?;
        (off <= p + len).then_some((p, len))
    };
    let mut out = Vec::new();
    let root = root as usize - base;
    let Some((r, rlen)) = object_at(root).filter(|&(p, _)| p == root) else {
        return out;
    };
    // Canonical address of each visited object: its place in the visiting
    // order (times the stride, so interior offsets stay apart).
    let mut place: HashMap<usize, u64> = HashMap::default();
    let mut order = vec![(r, rlen)];
    place.insert(r, 0);
    let mut next = STRIDE;
    let mut qi = 0;
    while qi < order.len() {
        let (p, len) = order[qi];
        qi += 1;
        for field in (0..len / 8).map(|w| w * 8) {
            // SAFETY: inside a live block of the loaded state.
            let v = unsafe { ((base + p + field) as *const usize).read() };
            if let Some((t, tlen)) = v
                .checked_sub(base)
                .filter(|&o| o < reserve)
                .and_then(object_at)
            {
                if let hashbrown::hash_map::Entry::Vacant(slot) = place.entry(t) {
                    slot.insert(next);
                    next += STRIDE;
                    order.push((t, tlen));
                }
            }
        }
    }
    let mut buf = Vec::new();
    for &(p, len) in &order {
        // SAFETY: inside a live block of the loaded state.
        let bytes = unsafe { std::slice::from_raw_parts((base + p) as *const u8, len) };
        buf.clear();
        buf.extend_from_slice(bytes);
        let mut map = Vec::new();
        for field in (0..len / 8).map(|w| w * 8) {
            let v = usize::from_le_bytes(bytes[field..field + 8].try_into().expect("a word"));
            let Some(off) = v.checked_sub(base).filter(|&o| o < reserve) else {
                continue;
            };
            let (word, tag) = match object_at(off) {
                Some((t, _)) => (place[&t] + (off - t) as u64, 0),
                None => (off as u64, 1),
            };
            buf[field..field + 8].copy_from_slice(&word.to_le_bytes());
            map.push((field as u64) << 1 | tag);
        }
        trim_zeros(&mut buf, 0);
        out.extend_from_slice(&(buf.len() as u64).to_le_bytes());
        out.extend_from_slice(&buf);
        out.extend_from_slice(&(map.len() as u64).to_le_bytes());
        for m in map {
            out.extend_from_slice(&m.to_le_bytes());
        }
    }
    out
}
