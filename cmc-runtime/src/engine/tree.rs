//! The search tree: for every stored state, the node it was first reached
//! from and the step that reached it, so that the path to any state can be
//! rebuilt (a counterexample's trace).
//!
//! A node costs 8 bytes: its parent and its step, 32 bits each. Steps —
//! (process, handler, random-seed variant, choices) — repeat across the
//! tree (the same handler of the same process, with the same choices, runs
//! from many states), so each distinct step is stored once and nodes name
//! it by number.
//!
//! The tree lives in an anonymous mapping that reserves no memory (only the
//! pages written cost any). For an isolated run (see [`crate::engine::isolate`])
//! the parent maps it shared before forking: the child records into it, and
//! if the child crashes, the parent reads from it the path to the state the
//! child was expanding. It is the only copy of the tree, in the child as in
//! an in-process run.

use std::sync::atomic::{AtomicU64, Ordering};

/// A node's parent when it is the root.
pub(crate) const NO_PARENT: u32 = u32::MAX;

/// The most nodes (states) a tree has room for: 4 GiB of address space.
/// Where the system refuses that much (strict overcommit), smaller trees
/// are tried, down to [`NODES_MIN`].
const NODES_MAX: usize = 1 << 29;
const NODES_MIN: usize = 1 << 20;
/// Distinct steps per node of room, and words of step data per step.
const STEPS_PER_NODE_SHIFT: u32 = 2;
const WORDS_PER_STEP: usize = 4;

/// Header words: node count, step count, step words used, full flag.
const NODE_COUNT: usize = 0;
const STEP_COUNT: usize = 1;
const STEP_WORDS: usize = 2;
const FULL: usize = 3;
const HEADER: usize = 4;

/// A recorded step, as the tree holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TreeStep {
    /// The process (`u32::MAX`: the environment).
    pub(crate) actor: u32,
    pub(crate) handler: u32,
    pub(crate) seed: u32,
    pub(crate) choices: Vec<u64>,
}

/// Where the tree's words are: a copyable handle on the mapping.
#[derive(Clone, Copy)]
struct Layout {
    words: *mut AtomicU64,
    /// Room, in nodes, steps and step words.
    nodes: usize,
    steps: usize,
    step_words: usize,
}

impl Layout {
    fn words(&self) -> usize {
        HEADER + self.nodes + self.steps + self.step_words
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        let len = self.words();
        assert!(i < len, "search tree index {i} out of bounds ({len} words)");
        // SAFETY: the mapping holds `len` zero-initialised words, mapped as
        // long as the tree that owns it lives (every handle is used only
        // while it does), and AtomicU64 has the layout of u64.
        unsafe { &*self.words.add(i) }
    }

    fn node_word(&self, node: u32) -> &AtomicU64 {
        self.word(HEADER + node as usize)
    }

    fn step_start(&self, step: u32) -> &AtomicU64 {
        self.word(HEADER + self.nodes + step as usize)
    }

    fn step_word(&self, at: usize) -> &AtomicU64 {
        self.word(HEADER + self.nodes + self.steps + at)
    }

    fn step(&self, id: u32) -> TreeStep {
        let at = self.step_start(id).load(Ordering::Relaxed) as usize;
        let w = |k: usize| self.step_word(at + k).load(Ordering::Relaxed);
        let (w0, w1) = (w(0), w(1));
        TreeStep {
            actor: (w0 >> 32) as u32,
            handler: w0 as u32,
            seed: (w1 >> 32) as u32,
            choices: (0..(w1 as u32 as usize)).map(|k| w(2 + k)).collect(),
        }
    }

    fn key_of(&self, id: u32) -> u64 {
        let at = self.step_start(id).load(Ordering::Relaxed) as usize;
        let w = |k: usize| self.step_word(at + k).load(Ordering::Relaxed);
        let (w0, w1) = (w(0), w(1));
        key(w0, w1, (0..(w1 as u32 as usize)).map(|k| w(2 + k)))
    }
}

/// The interning key of a step from its first two words and its choices.
fn key(w0: u64, w1: u64, choices: impl Iterator<Item = u64>) -> u64 {
    use std::hash::Hasher;
    let mut h = siphasher::sip::SipHasher13::new_with_keys(0x636d_6374, 0x7472_6565);
    h.write_u64(w0);
    h.write_u64(w1);
    for c in choices {
        h.write_u64(c);
    }
    h.finish()
}

/// The search tree (see the module documentation).
pub(crate) struct Tree {
    at: Layout,
    /// Whether dropping this tree unmaps the mapping (false for a view of
    /// a mapping another tree owns).
    owned: bool,
    /// Step ids by content, for interning: local to the process that
    /// records (a view starts with an empty index and may store a step
    /// again, which costs room but never changes a path).
    index: hashbrown::HashTable<u32>,
}

// SAFETY: the mapping is plain memory reached through atomics; the index
// is owned. A tree moves between threads with its owner.
unsafe impl Send for Tree {}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree")
            .field("nodes", &self.len())
            .field("room", &self.at.nodes)
            .finish()
    }
}

impl Tree {
    /// A new, empty tree in a mapping of its own, `shared` with the
    /// processes this one forks or private.
    pub(crate) fn new(shared: bool) -> std::io::Result<Tree> {
        let mut nodes = NODES_MAX;
        loop {
            let steps = nodes >> STEPS_PER_NODE_SHIFT;
            let step_words = steps * WORDS_PER_STEP;
            let at = Layout {
                words: std::ptr::null_mut(),
                nodes,
                steps,
                step_words,
            };
            let len = at.words() * 8;
            // An anonymous mapping of our own, zero-filled; it stays mapped
            // until the owning tree is dropped.
            match crate::sys::map_zeroed(len, shared) {
                Ok(p) => {
                    return Ok(Tree {
                        at: Layout {
                            words: p.cast(),
                            ..at
                        },
                        owned: true,
                        index: hashbrown::HashTable::new(),
                    })
                }
                Err(e) if nodes <= NODES_MIN => return Err(e),
                Err(_) => nodes /= 8,
            }
        }
    }

    /// A tree that records into the same mapping as `self`, with an index
    /// of its own.
    ///
    /// # Safety
    /// `self` (the owner of the mapping) must outlive the view.
    pub(crate) unsafe fn view(&self) -> Tree {
        Tree {
            at: self.at,
            owned: false,
            index: hashbrown::HashTable::new(),
        }
    }

    fn word(&self, i: usize) -> &AtomicU64 {
        self.at.word(i)
    }

    /// The number of nodes recorded.
    pub(crate) fn len(&self) -> usize {
        self.word(NODE_COUNT).load(Ordering::Acquire) as usize
    }

    /// Whether a node could not be recorded for lack of room.
    pub(crate) fn full(&self) -> bool {
        self.word(FULL).load(Ordering::Relaxed) != 0
    }

    /// The room, in nodes.
    pub(crate) fn room(&self) -> usize {
        self.at.nodes
    }

    /// Bytes of the mapping written so far (what the tree costs in memory,
    /// to the page).
    pub(crate) fn bytes(&self) -> usize {
        let count = |i| self.word(i).load(Ordering::Relaxed) as usize;
        (HEADER + count(NODE_COUNT) + count(STEP_COUNT) + count(STEP_WORDS)) * 8
    }

    /// The id of a step, stored if it is new; `None` when there is no room.
    fn intern(&mut self, actor: u32, handler: u32, seed: u32, choices: &[usize]) -> Option<u32> {
        let w0 = u64::from(actor) << 32 | u64::from(handler);
        let w1 = u64::from(seed) << 32 | choices.len() as u64;
        let key = key(w0, w1, choices.iter().map(|&c| c as u64));
        let at = self.at;
        let same = |&id: &u32| {
            let start = at.step_start(id).load(Ordering::Relaxed) as usize;
            let w = |k: usize| at.step_word(start + k).load(Ordering::Relaxed);
            w(0) == w0
                && w(1) == w1
                && choices
                    .iter()
                    .enumerate()
                    .all(|(k, &c)| w(2 + k) == c as u64)
        };
        if let Some(&id) = self.index.find(key, same) {
            return Some(id);
        }
        let id = at.word(STEP_COUNT).load(Ordering::Relaxed) as usize;
        let start = at.word(STEP_WORDS).load(Ordering::Relaxed) as usize;
        let need = 2 + choices.len();
        if id >= at.steps || start + need > at.step_words {
            return None;
        }
        at.step_word(start).store(w0, Ordering::Relaxed);
        at.step_word(start + 1).store(w1, Ordering::Relaxed);
        for (k, &c) in choices.iter().enumerate() {
            at.step_word(start + 2 + k)
                .store(c as u64, Ordering::Relaxed);
        }
        at.step_start(id as u32)
            .store(start as u64, Ordering::Relaxed);
        at.word(STEP_WORDS)
            .store((start + need) as u64, Ordering::Release);
        at.word(STEP_COUNT).store(id as u64 + 1, Ordering::Release);
        let id = id as u32;
        self.index.insert_unique(key, id, |&s| at.key_of(s));
        Some(id)
    }

    /// The step `id`.
    pub(crate) fn step(&self, id: u32) -> TreeStep {
        self.at.step(id)
    }

    /// Records a node reached from `parent` ([`NO_PARENT`] for the root) by
    /// a step; returns its id, or `None` when the tree is full (then it
    /// remembers that it was).
    pub(crate) fn push(
        &mut self,
        parent: u32,
        actor: u32,
        handler: u32,
        seed: u32,
        choices: &[usize],
    ) -> Option<u32> {
        let id = self.len();
        let step = if id < self.at.nodes {
            self.intern(actor, handler, seed, choices)
        } else {
            None
        };
        let Some(step) = step else {
            self.word(FULL).store(1, Ordering::Relaxed);
            return None;
        };
        assert!(
            parent == NO_PARENT || (parent as usize) < id,
            "node {id}'s parent {parent} is not an earlier node"
        );
        let id = id as u32;
        self.at
            .node_word(id)
            .store(u64::from(parent) << 32 | u64::from(step), Ordering::Relaxed);
        self.word(NODE_COUNT)
            .store(u64::from(id) + 1, Ordering::Release);
        Some(id)
    }

    /// Forgets every node from `len` on (their steps stay interned). A
    /// depth-first search calls it with one past the node it pops: every
    /// node recorded after that one belongs to a subtree it has finished,
    /// and the nodes it still needs (the path to the popped node, and the
    /// pending siblings on that path) all come before.
    pub(crate) fn truncate(&mut self, len: usize) {
        let count = self.len();
        assert!(len <= count, "truncating a tree of {count} nodes to {len}");
        self.word(NODE_COUNT).store(len as u64, Ordering::Release);
    }

    /// The node on the way from the root to `node` that is a child of
    /// the root (`node` itself when its parent is the root); `None` for
    /// the root, or a node not recorded.
    pub(crate) fn top(&self, mut node: u32) -> Option<u32> {
        let count = self.len();
        let mut below = None;
        loop {
            if node as usize >= count {
                return None;
            }
            let parent = (self.at.node_word(node).load(Ordering::Relaxed) >> 32) as u32;
            if parent == NO_PARENT {
                return below;
            }
            below = Some(node);
            node = parent;
        }
    }

    /// The parent of `node` and the step that reached it from there;
    /// `None` for the root, or a node not recorded.
    pub(crate) fn parent_and_step(&self, node: u32) -> Option<(u32, TreeStep)> {
        if node as usize >= self.len() {
            return None;
        }
        let w = self.at.node_word(node).load(Ordering::Relaxed);
        let (parent, step) = ((w >> 32) as u32, w as u32);
        (parent != NO_PARENT).then(|| (parent, self.step(step)))
    }

    /// The steps from the root to `node`, the root's own step excluded;
    /// `None` when no such node was recorded.
    pub(crate) fn path(&self, mut node: u32) -> Option<Vec<TreeStep>> {
        let count = self.len();
        let mut steps = Vec::new();
        loop {
            if node as usize >= count {
                return None;
            }
            let w = self.at.node_word(node).load(Ordering::Relaxed);
            let (parent, step) = ((w >> 32) as u32, w as u32);
            if parent == NO_PARENT {
                break;
            }
            steps.push(self.step(step));
            node = parent;
        }
        steps.reverse();
        Some(steps)
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        let len = self.at.words() * 8;
        // SAFETY: the mapping is ours (this tree owns it) and no view of it
        // outlives its owner (`Tree::view`'s contract).
        unsafe { crate::sys::unmap(self.at.words.cast(), len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The tree against a plain vector of (parent, step) on random trees:
    /// every path is the one recorded, steps are stored once each.
    #[test]
    fn paths_are_what_was_recorded() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for shared in [false, true] {
            let mut tree = Tree::new(shared).expect("a tree maps");
            let mut reference: Vec<(u32, TreeStep)> = Vec::new();
            let root = tree.push(NO_PARENT, u32::MAX, 0, 0, &[]).expect("room");
            reference.push((
                NO_PARENT,
                TreeStep {
                    actor: u32::MAX,
                    handler: 0,
                    seed: 0,
                    choices: vec![],
                },
            ));
            assert_eq!(root, 0);
            for _ in 0..5000 {
                let parent = rng.gen_range(0..reference.len()) as u32;
                let choices: Vec<usize> = (0..rng.gen_range(0..3))
                    .map(|_| rng.gen_range(0..4))
                    .collect();
                let (actor, handler, seed) = (
                    rng.gen_range(0..3),
                    rng.gen_range(0..2),
                    rng.gen_range(0..2),
                );
                let id = tree
                    .push(parent, actor, handler, seed, &choices)
                    .expect("room");
                assert_eq!(id as usize, reference.len());
                reference.push((
                    parent,
                    TreeStep {
                        actor,
                        handler,
                        seed,
                        choices: choices.iter().map(|&c| c as u64).collect(),
                    },
                ));
            }
            for node in (0..reference.len() as u32).step_by(37) {
                let mut expected = Vec::new();
                let mut at = node;
                while reference[at as usize].0 != NO_PARENT {
                    expected.push(reference[at as usize].1.clone());
                    at = reference[at as usize].0;
                }
                expected.reverse();
                assert_eq!(tree.path(node), Some(expected), "path to node {node}");
            }
            assert_eq!(tree.path(reference.len() as u32), None);
            // 3 actors x 2 handlers x 2 seeds x (1 + 4 + 16) choice lists.
            let steps = tree.word(STEP_COUNT).load(Ordering::Relaxed);
            assert!(steps <= 3 * 2 * 2 * 21 + 1, "{steps} steps stored");
            assert!(
                tree.bytes() < reference.len() * 8 + 64 * 1024,
                "{} bytes for {} nodes",
                tree.bytes(),
                reference.len()
            );
        }
    }

    #[test]
    fn truncating_forgets_later_nodes_and_keeps_earlier_paths() {
        let mut tree = Tree::new(false).expect("a tree maps");
        let root = tree.push(NO_PARENT, u32::MAX, 0, 0, &[]).expect("room");
        let a = tree.push(root, 1, 0, 0, &[]).expect("room");
        let b = tree.push(root, 2, 0, 0, &[]).expect("room");
        let c = tree.push(b, 3, 0, 0, &[1]).expect("room");
        tree.truncate(b as usize + 1);
        assert_eq!(tree.len(), 3);
        assert_eq!(tree.path(c), None, "c was forgotten");
        let d = tree.push(a, 4, 0, 0, &[]).expect("room");
        assert_eq!(d, c, "its id is reused");
        let step = |actor| TreeStep {
            actor,
            handler: 0,
            seed: 0,
            choices: vec![],
        };
        assert_eq!(tree.path(d), Some(vec![step(1), step(4)]));
        assert_eq!(tree.path(b), Some(vec![step(2)]));
    }

    #[test]
    fn a_view_records_into_the_same_tree() {
        let mut tree = Tree::new(true).expect("a tree maps");
        let root = tree.push(NO_PARENT, u32::MAX, 0, 0, &[]).expect("room");
        // SAFETY: `tree` outlives the view.
        let mut view = unsafe { tree.view() };
        let a = view.push(root, 1, 2, 0, &[3]).expect("room");
        let b = view.push(a, 1, 2, 0, &[3]).expect("room");
        drop(view);
        let step = TreeStep {
            actor: 1,
            handler: 2,
            seed: 0,
            choices: vec![3],
        };
        assert_eq!(tree.path(b), Some(vec![step.clone(), step]));
    }

    #[test]
    fn a_shared_tree_is_read_by_the_parent_after_the_child_wrote_it() {
        let mut tree = Tree::new(true).expect("a tree maps");
        tree.push(NO_PARENT, u32::MAX, 0, 0, &[]).expect("room");
        // SAFETY: the child only records into the shared mapping and
        // leaves with _exit; the parent waits for it.
        unsafe {
            let pid = libc::fork();
            assert!(pid >= 0, "fork");
            if pid == 0 {
                let ok = tree.push(0, 4, 5, 1, &[9, 8]).is_some();
                libc::_exit(if ok { 0 } else { 1 });
            }
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        }
        assert_eq!(
            tree.path(1),
            Some(vec![TreeStep {
                actor: 4,
                handler: 5,
                seed: 1,
                choices: vec![9, 8],
            }])
        );
    }
}
