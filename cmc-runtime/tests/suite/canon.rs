//! Canonical heap fingerprints: equal heap graphs built through different
//! allocation histories fingerprint the same; any change to a value, a
//! pointer target or an edge changes the fingerprint; and the incremental
//! algorithm agrees with a from-scratch reference on random heaps.

use std::collections::BTreeMap;
use std::ptr::null_mut;

use cmc::canon::{reference_form, CanonTable, HeapGraph};
use cmc::memory::{ArenaId, Memory, MemoryConfig, StateId};
use cmc::ArenaConfig;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Two arenas built by two histories, fingerprinted with one table.
struct Pair {
    mem: Memory,
    arenas: [ArenaId; 2],
    graphs: Vec<HeapGraph>,
    table: CanonTable,
    state: Option<StateId>,
    roots: [*const u8; 2],
}

impl Pair {
    /// Builds one root in each arena: `build(0)` in the first, `build(1)` in
    /// the second.
    fn new<T>(build: impl Fn(usize) -> Box<T>) -> (Pair, [*mut T; 2]) {
        let mut mem = Memory::new(MemoryConfig::default());
        let a = mem.add_arena("a", ArenaConfig::default()).unwrap();
        let b = mem.add_arena("b", ArenaConfig::default()).unwrap();
        let roots = [a, b].map(|arena| {
            let _in = mem.enter(arena);
            Box::into_raw(build(if arena == a { 0 } else { 1 }))
        });
        let graphs = vec![
            HeapGraph::new(&mem, a, roots[0].cast()),
            HeapGraph::new(&mem, b, roots[1].cast()),
        ];
        let pair = Pair {
            mem,
            arenas: [a, b],
            graphs,
            table: CanonTable::new(),
            state: None,
            roots: [roots[0].cast(), roots[1].cast()],
        };
        (pair, roots)
    }

    /// Captures and returns (heap fingerprints, byte fingerprints).
    fn fingerprints(&mut self) -> ([u128; 2], [u128; 2]) {
        let s = self.mem.capture();
        if let Some(old) = self.state.replace(s) {
            self.mem.release(old);
        }
        let heap = [0, 1].map(|i| self.graphs[i].fingerprint(&mut self.mem, &mut self.table, s));
        let bytes = [0, 1].map(|i| self.mem.arena_sum(s, self.arenas[i]));
        (heap, bytes)
    }

    /// Runs `f` with allocations going to arena `i`.
    fn in_arena<R>(&self, i: usize, f: impl FnOnce() -> R) -> R {
        let _in = self.mem.enter(self.arenas[i]);
        f()
    }

    fn assert_same(&mut self, what: &str) {
        let (heap, bytes) = self.fingerprints();
        let forms = [0, 1].map(|i| reference_form(&self.mem, self.arenas[i], self.roots[i]));
        if forms[0] != forms[1] {
            let at = forms[0].iter().zip(&forms[1]).position(|(a, b)| a != b);
            panic!(
                "{what}: reference forms differ at {at:?}: {:?} vs {:?}",
                &forms[0][at.unwrap_or(0).saturating_sub(16)..][..48.min(forms[0].len())],
                &forms[1][at.unwrap_or(0).saturating_sub(16)..][..48.min(forms[1].len())]
            );
        }
        assert_ne!(
            bytes[0], bytes[1],
            "{what}: the two histories should give different bytes, or the test shows nothing"
        );
        assert_eq!(
            heap[0], heap[1],
            "{what}: equal heaps, different fingerprints"
        );
    }

    fn assert_differ(&mut self, what: &str) {
        let (heap, _) = self.fingerprints();
        assert_ne!(
            heap[0], heap[1],
            "{what}: different heaps, equal fingerprints"
        );
    }
}

/// Allocates and frees some garbage of varied sizes, so that what is
/// allocated next lands elsewhere.
fn garbage(n: usize) {
    let keep: Vec<Vec<u8>> = (0..n).map(|i| vec![7u8; 24 + 40 * (i % 5)]).collect();
    let mut keep = keep;
    for i in (0..keep.len()).step_by(2) {
        keep[i] = Vec::new();
    }
    std::mem::forget(keep);
}

struct ListNode {
    value: u64,
    next: Option<Box<ListNode>>,
}

#[test]
fn linked_list() {
    let n = 12u64;
    let (mut p, roots) = Pair::new(|history| {
        let mut head: Option<Box<ListNode>> = None;
        if history == 0 {
            for v in (0..n).rev() {
                head = Some(Box::new(ListNode {
                    value: v,
                    next: head,
                }));
            }
        } else {
            // Allocate the nodes front to back, with garbage between them,
            // then link them back to front.
            let mut nodes: Vec<Box<ListNode>> = Vec::new();
            for v in 0..n {
                garbage(3);
                nodes.push(Box::new(ListNode {
                    value: v,
                    next: None,
                }));
            }
            while let Some(mut node) = nodes.pop() {
                node.next = head;
                head = Some(node);
            }
        }
        Box::new(head)
    });
    p.assert_same("linked list");
    let nth = |root: *mut Option<Box<ListNode>>, k: usize| -> *mut ListNode {
        // SAFETY: the list is live and has more than k nodes.
        let mut at: &mut ListNode = unsafe { (*root).as_deref_mut().unwrap() };
        for _ in 0..k {
            at = at.next.as_deref_mut().unwrap();
        }
        at
    };
    // One value.
    // SAFETY: node 5 of the second list is live.
    unsafe { (*nth(roots[1], 5)).value = 99 };
    p.assert_differ("linked list, one value changed");
    // SAFETY: as above.
    unsafe { (*nth(roots[1], 5)).value = 5 };
    p.assert_same("linked list, value changed back");
    // One edge: drop the tail after node 9 in the second list only.
    let tail = p.in_arena(1, || {
        // SAFETY: node 9 is live.
        unsafe { (*nth(roots[1], 9)).next.take() }
    });
    p.assert_differ("linked list, one edge removed");
    // SAFETY: node 9 is live; the tail goes back where it was.
    unsafe { (*nth(roots[1], 9)).next = tail };
    p.assert_same("linked list, edge restored");
}

struct Tree {
    key: u64,
    left: Option<Box<Tree>>,
    right: Option<Box<Tree>>,
}

/// A balanced tree over keys lo..hi, allocating nodes in pre-order
/// (history 0) or post-order with garbage (history 1).
fn tree(lo: u64, hi: u64, history: usize) -> Option<Box<Tree>> {
    if lo >= hi {
        return None;
    }
    let mid = (lo + hi) / 2;
    if history == 0 {
        let mut node = Box::new(Tree {
            key: mid,
            left: None,
            right: None,
        });
        node.left = tree(lo, mid, history);
        node.right = tree(mid + 1, hi, history);
        Some(node)
    } else {
        let right = tree(mid + 1, hi, history);
        garbage(2);
        let left = tree(lo, mid, history);
        Some(Box::new(Tree {
            key: mid,
            left,
            right,
        }))
    }
}

#[test]
fn binary_tree() {
    let (mut p, roots) = Pair::new(|history| Box::new(tree(0, 31, history)));
    p.assert_same("binary tree");
    // SAFETY: the trees are live; only the second changes.
    let root1 = unsafe { (*roots[1]).as_deref_mut().unwrap() };
    root1.left.as_deref_mut().unwrap().key = 1000;
    p.assert_differ("binary tree, one key changed");
    root1.left.as_deref_mut().unwrap().key = 7;
    p.assert_same("binary tree, key restored");
    // One pointer target: swap the two subtrees of the root's left child.
    let l = root1.left.as_deref_mut().unwrap();
    std::mem::swap(&mut l.left, &mut l.right);
    p.assert_differ("binary tree, subtrees swapped");
    let l = root1.left.as_deref_mut().unwrap();
    std::mem::swap(&mut l.left, &mut l.right);
    p.assert_same("binary tree, subtrees swapped back");
}

#[test]
fn vec_of_boxes() {
    let n = 40usize;
    let (mut p, roots) = Pair::new(|history| {
        let mut boxes: Vec<Option<Box<u64>>> = (0..n).map(|_| None).collect();
        let order: Vec<usize> = if history == 0 {
            (0..n).collect()
        } else {
            (0..n).rev().collect()
        };
        for i in order {
            if history == 1 {
                garbage(1);
            }
            boxes[i] = Some(Box::new(i as u64 * 3));
        }
        let mut v: Vec<Box<u64>> = Vec::with_capacity(n);
        v.extend(boxes.into_iter().map(Option::unwrap));
        Box::new(v)
    });
    p.assert_same("Vec<Box<u64>>");
    // SAFETY: the vectors are live; only the second changes.
    let v1 = unsafe { &mut *roots[1] };
    *v1[17] = 4;
    p.assert_differ("Vec<Box<u64>>, one value changed");
    *v1[17] = 51;
    p.assert_same("Vec<Box<u64>>, value restored");
    v1.swap(3, 4);
    p.assert_differ("Vec<Box<u64>>, two pointers swapped");
    v1.swap(3, 4);
    p.assert_same("Vec<Box<u64>>, pointers swapped back");
}

#[test]
fn btree_map() {
    let (mut p, roots) = Pair::new(|history| {
        let mut m = BTreeMap::new();
        for k in 0..200u32 {
            if history == 1 && k % 7 == 0 {
                garbage(2);
            }
            m.insert(k * 5, format!("value {k}"));
        }
        Box::new(m)
    });
    p.assert_same("BTreeMap");
    // SAFETY: the maps are live; only the second changes.
    let m1 = unsafe { &mut *roots[1] };
    p.in_arena(1, || m1.insert(100, "changed".to_string()));
    p.assert_differ("BTreeMap, one value changed");
    // The same construction as the original (`format!` with a literal
    // argument would build a string of another capacity).
    let k = std::hint::black_box(20);
    p.in_arena(1, || m1.insert(100, format!("value {k}")));
    p.assert_same("BTreeMap, value restored");
}

#[repr(C)]
struct GNode {
    value: u64,
    out: [*mut GNode; 2],
}

/// Four nodes: 0 → 1, 0 → 2, 1 → 3, 2 → 3 (sharing), 3 → 0 (a cycle).
fn graph(history: usize) -> Box<[*mut GNode; 1]> {
    let order: [usize; 4] = if history == 0 {
        [0, 1, 2, 3]
    } else {
        [3, 1, 2, 0]
    };
    let mut nodes = [null_mut::<GNode>(); 4];
    for i in order {
        if history == 1 {
            garbage(2);
        }
        nodes[i] = Box::into_raw(Box::new(GNode {
            value: 10 + i as u64,
            out: [null_mut(); 2],
        }));
    }
    // SAFETY: all four nodes were just allocated and are never freed.
    unsafe {
        (*nodes[0]).out = [nodes[1], nodes[2]];
        (*nodes[1]).out = [nodes[3], null_mut()];
        (*nodes[2]).out = [nodes[3], null_mut()];
        (*nodes[3]).out = [nodes[0], null_mut()];
    }
    Box::new([nodes[0]])
}

#[test]
fn graph_with_sharing_and_a_cycle() {
    let (mut p, roots) = Pair::new(graph);
    p.assert_same("graph");
    // SAFETY: every node of the second graph is live.
    let n0 = unsafe { (*roots[1])[0] };
    // SAFETY: the heaps built here stay live for the whole test and only this thread touches them.
    let (n1, n2) = unsafe { ((*n0).out[0], (*n0).out[1]) };
    // SAFETY: the heaps built here stay live for the whole test and only this thread touches them.
    let n3 = unsafe { (*n1).out[0] };
    // One pointer target: 2 → 1 instead of 2 → 3 (same shape of edges
    // elsewhere).
    // SAFETY: the heaps built here stay live for the whole test and only this thread touches them.
    unsafe { (*n2).out[0] = n1 };
    p.assert_differ("graph, one pointer retargeted");
    // SAFETY: the heaps built here stay live for the whole test and only this thread touches them.
    unsafe { (*n2).out[0] = n3 };
    p.assert_same("graph, pointer restored");
    // One edge: break the cycle.
    // SAFETY: the heaps built here stay live for the whole test and only this thread touches them.
    unsafe { (*n3).out[0] = null_mut() };
    p.assert_differ("graph, cycle edge removed");
    // SAFETY: the heaps built here stay live for the whole test and only this thread touches them.
    unsafe { (*n3).out[0] = n0 };
    p.assert_same("graph, cycle restored");
    // Sharing versus a copy: 2 → a new node equal to 3 is a different graph.
    let copy = p.in_arena(1, || {
        Box::into_raw(Box::new(GNode {
            value: 13,
            // SAFETY: n3 is live.
            out: unsafe { (*n3).out },
        }))
    });
    // SAFETY: the heaps built here stay live for the whole test and only this thread touches them.
    unsafe { (*n2).out[0] = copy };
    p.assert_differ("graph, sharing replaced by a copy");
}

// ----- The randomized comparison with the reference. -----

#[repr(C)]
struct RNode {
    value: u64,
    slots: [*mut RNode; 2],
}

#[repr(C)]
struct RRoot {
    slots: [*mut RNode; 3],
    buf: Vec<u64>,
}

/// What the test knows about the heap besides its bytes: the nodes it has
/// allocated and not freed, and garbage blocks.
#[derive(Clone, Default)]
struct Book {
    nodes: Vec<*mut RNode>,
    junk: Vec<(*mut u8, usize)>,
}

fn random_op(rng: &mut SmallRng, root: *mut RRoot, book: &mut Book) {
    // SAFETY: `root` and every pointer in `book.nodes` are
    // live allocations of the entered arena; slots may hold dangling
    // pointers, which are stored but never dereferenced.
    unsafe {
        let pick_slot = |rng: &mut SmallRng, book: &Book| -> *mut *mut RNode {
            let holders = book.nodes.len() + 1;
            let h = rng.gen_range(0..holders);
            if h == book.nodes.len() {
                (*root).slots.as_mut_ptr().add(rng.gen_range(0..3))
            } else {
                let n: *mut RNode = book.nodes[h];
                (*n).slots.as_mut_ptr().add(rng.gen_range(0..2))
            }
        };
        match rng.gen_range(0..100) {
            0..=19 if book.nodes.len() < 6 => {
                let n = Box::into_raw(Box::new(RNode {
                    value: rng.gen_range(0..2),
                    slots: [null_mut(); 2],
                }));
                book.nodes.push(n);
                *pick_slot(rng, book) = n;
            }
            20..=39 => *pick_slot(rng, book) = null_mut(),
            40..=59 if !book.nodes.is_empty() => {
                let t = book.nodes[rng.gen_range(0..book.nodes.len())];
                *pick_slot(rng, book) = t;
            }
            60..=69 if !book.nodes.is_empty() => {
                let t = book.nodes[rng.gen_range(0..book.nodes.len())];
                (*t).value = rng.gen_range(0..2);
            }
            70..=79 if !book.nodes.is_empty() => {
                // Free a node; pointers to it dangle (and may later point
                // into whatever is allocated there).
                let i = rng.gen_range(0..book.nodes.len());
                drop(Box::from_raw(book.nodes.swap_remove(i)));
            }
            80..=87 if book.junk.len() < 24 => {
                let len = 16 + 16 * rng.gen_range(0..6);
                let layout = std::alloc::Layout::from_size_align(len, 8).unwrap();
                book.junk.push((std::alloc::alloc(layout), len));
            }
            88..=93 if !book.junk.is_empty() => {
                let (p, len) = book.junk.swap_remove(rng.gen_range(0..book.junk.len()));
                std::alloc::dealloc(p, std::alloc::Layout::from_size_align(len, 8).unwrap());
            }
            _ => {
                let buf = &mut (*root).buf;
                if buf.len() < 3 && rng.gen_bool(0.5) {
                    buf.push(rng.gen_range(0..2));
                } else if buf.pop().is_some() {
                    buf.shrink_to_fit();
                }
            }
        }
    }
}

fn randomized(seed: u64, steps: usize) {
    let mut mem = Memory::new(MemoryConfig::default());
    let arena = mem.add_arena("random", ArenaConfig::default()).unwrap();
    let root = {
        let _in = mem.enter(arena);
        Box::into_raw(Box::new(RRoot {
            slots: [null_mut(); 3],
            buf: Vec::new(),
        }))
    };
    let mut graph = HeapGraph::new(&mem, arena, root.cast());
    let mut table = CanonTable::new();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut states: Vec<(StateId, Book)> = Vec::new();
    let mut book = Book::default();
    // Reference form → incremental fingerprint, and back.
    let mut by_form: std::collections::HashMap<Vec<u8>, (u128, u128)> = Default::default();
    let mut by_fp: std::collections::HashMap<u128, Vec<u8>> = Default::default();
    let (mut merged, mut distinct) = (0, 0);
    for step in 0..steps {
        if step % 9 == 8 && !states.is_empty() {
            // Go back to an earlier state and continue from there.
            let (s, b) = states[rng.gen_range(0..states.len())].clone();
            mem.restore(s);
            book = b;
        } else {
            // The book lives in checker memory: make room before entering
            // the arena, so that its vectors never grow inside it.
            book.nodes.reserve(8);
            book.junk.reserve(8);
            let _in = mem.enter(arena);
            random_op(&mut rng, root, &mut book);
        }
        let s = mem.capture();
        let fp = graph.fingerprint(&mut mem, &mut table, s);
        // A graph built from scratch over the same table must agree with
        // the incremental one (every state when CANON_DEBUG is set).
        if step % 25 == 0 || std::env::var_os("CANON_DEBUG").is_some() {
            let mut fresh = HeapGraph::new(&mem, arena, root.cast());
            let again = fresh.fingerprint(&mut mem, &mut table, s);
            fresh.release(&mut mem);
            assert_eq!(
                again, fp,
                "seed {seed} step {step}: incremental and fresh graphs differ"
            );
            // And one that has seen no other heap (as another worker of a
            // parallel search, or a search in another order, would be).
            let mut alone = HeapGraph::new(&mem, arena, root.cast());
            let again = alone.fingerprint(&mut mem, &mut CanonTable::new(), s);
            alone.release(&mut mem);
            assert_eq!(
                again, fp,
                "seed {seed} step {step}: the fingerprint depends on the heaps seen before"
            );
        }
        let form = reference_form(&mem, arena, root.cast());
        let bytes = mem.arena_sum(s, arena);
        match by_form.get(&form) {
            Some(&(f, b)) => {
                assert_eq!(
                    f, fp,
                    "seed {seed} step {step}: the reference says this heap was seen before, \
                     the incremental fingerprint differs"
                );
                if b != bytes {
                    merged += 1;
                }
            }
            None => {
                distinct += 1;
                by_form.insert(form.clone(), (fp, bytes));
            }
        }
        if let Some(f) = by_fp.get(&fp) {
            assert!(
                *f == form,
                "seed {seed} step {step}: equal incremental fingerprints for heaps \
                 the reference tells apart"
            );
        } else {
            by_fp.insert(fp, form);
        }
        states.push((s, book.clone()));
    }
    eprintln!(
        "seed {seed}: {distinct} distinct heaps, {merged} byte-different repeats merged, \
         {:?}, {} objects placed ({} probes)",
        graph.stats(),
        table.entries(),
        table.conflicts()
    );
    assert!(
        merged > steps / 20,
        "only {merged} byte-different equal heaps: the test exercises too little"
    );
    assert!(
        graph.stats().rehashed < graph.stats().syncs * 3,
        "incremental canonicalization rehashed {} objects over {} states",
        graph.stats().rehashed,
        graph.stats().syncs
    );
}

#[test]
fn incremental_agrees_with_the_reference_seed_1() {
    randomized(1, 3000);
}

#[test]
fn incremental_agrees_with_the_reference_seed_2() {
    randomized(0xc0ffee, 3000);
}

#[test]
fn incremental_agrees_with_the_reference_seed_3() {
    randomized(77, 3000);
}
