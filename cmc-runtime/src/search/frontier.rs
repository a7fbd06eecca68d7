//! The frontier of a search: the states still to expand, in the order of
//! the strategy (a stack for depth-first, a queue for breadth-first, a
//! stack whose new entries are shuffled for random order, or a priority
//! queue for best-first).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::memory::StateId;
use crate::model::Strategy;

/// A state to expand: its node of the search tree, its stored state, its
/// depth.
pub(super) struct Item {
    pub(super) node: u32,
    pub(super) state: StateId,
    pub(super) depth: usize,
}

pub(super) enum Frontier {
    Stack(Vec<Item>),
    Queue(VecDeque<Item>),
    /// Depth-first with each expansion's successors in a random order: the
    /// items pushed since the last pop (from `.2` on) are kept shuffled.
    Random(Vec<Item>, SmallRng, usize),
    Best(BinaryHeap<(i64, Reverse<u64>, u32)>, Vec<Option<Item>>, u64),
}

impl Frontier {
    pub(super) fn new(strategy: Strategy, seed: u64) -> Self {
        match strategy {
            Strategy::Bfs => Frontier::Queue(VecDeque::new()),
            Strategy::Random => Frontier::Random(Vec::new(), SmallRng::seed_from_u64(seed), 0),
            Strategy::BestFirst => Frontier::Best(BinaryHeap::new(), Vec::new(), 0),
            _ => Frontier::Stack(Vec::new()),
        }
    }

    pub(super) fn push(&mut self, item: Item, priority: i64) {
        match self {
            Frontier::Stack(v) => v.push(item),
            Frontier::Random(v, rng, batch) => {
                // An online Fisher-Yates shuffle of this expansion's batch.
                v.push(item);
                let j = rng.gen_range(*batch..v.len());
                let last = v.len() - 1;
                v.swap(j, last);
            }
            Frontier::Queue(q) => q.push_back(item),
            Frontier::Best(heap, slots, seq) => {
                let slot = slots.len() as u32;
                slots.push(Some(item));
                heap.push((priority, Reverse(*seq), slot));
                *seq += 1;
            }
        }
    }

    pub(super) fn pop(&mut self) -> Option<Item> {
        match self {
            Frontier::Stack(v) => v.pop(),
            Frontier::Queue(q) => q.pop_front(),
            Frontier::Random(v, _, batch) => {
                let item = v.pop();
                *batch = v.len();
                item
            }
            Frontier::Best(heap, slots, _) => heap.pop().map(|(_, _, slot)| {
                slots[slot as usize]
                    .take()
                    .expect("a frontier slot is popped once")
            }),
        }
    }

    /// The oldest item of a stack (the shallowest state: the biggest piece
    /// of work to give away).
    pub(super) fn take_bottom(&mut self) -> Option<Item> {
        match self {
            Frontier::Stack(v) | Frontier::Random(v, _, _) if !v.is_empty() => {
                let item = v.remove(0);
                if let Frontier::Random(_, _, batch) = self {
                    *batch = batch.saturating_sub(1);
                }
                Some(item)
            }
            _ => None,
        }
    }

    /// The newest item of a queue.
    pub(super) fn take_back(&mut self) -> Option<Item> {
        match self {
            Frontier::Queue(q) => q.pop_back(),
            _ => None,
        }
    }

    /// The depth of the item a queue hands out next.
    pub(super) fn front_depth(&self) -> Option<usize> {
        match self {
            Frontier::Queue(q) => q.front().map(|i| i.depth),
            _ => None,
        }
    }

    /// Bytes of checker memory the frontier's entries take.
    pub(super) fn bytes(&self) -> usize {
        match self {
            Frontier::Stack(v) | Frontier::Random(v, _, _) => v.capacity() * size_of::<Item>(),
            Frontier::Queue(q) => q.capacity() * size_of::<Item>(),
            Frontier::Best(heap, slots, _) => {
                heap.capacity() * size_of::<(i64, Reverse<u64>, u32)>()
                    + slots.capacity() * size_of::<Option<Item>>()
            }
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Frontier::Stack(v) | Frontier::Random(v, _, _) => v.len(),
            Frontier::Queue(q) => q.len(),
            Frontier::Best(heap, _, _) => heap.len(),
        }
    }
}
