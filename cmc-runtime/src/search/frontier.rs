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

use super::spill::{Spill, StateIo};

/// A state to expand: its node of the search tree, its stored state, its
/// depth.
pub(super) struct Item {
    pub(super) node: u32,
    pub(super) state: StateId,
    pub(super) depth: usize,
}

/// A breadth-first queue: its entries in memory, `q`, and those on disk,
/// `spill`, which come after the first `head` of `q` and before the rest.
pub(super) struct Queue {
    q: VecDeque<Item>,
    head: usize,
    spill: Spill,
    /// The most entries kept in memory before the oldest of the newer
    /// ones go to disk (`usize::MAX`: never).
    keep: usize,
}

/// Entries written to disk at once, and read back at once.
pub(crate) const SEGMENT: usize = 8192;

impl Queue {
    /// Makes the first entries of `q` the head, loading the oldest segment
    /// from disk when the head is empty.
    fn refill(&mut self, io: &mut dyn StateIo) {
        if self.head > 0 {
            return;
        }
        if self.spill.is_empty() {
            self.head = self.q.len();
            return;
        }
        let items = self.spill.read(io, false);
        self.head = items.len();
        for (node, depth, state) in items.into_iter().rev() {
            self.q.push_front(Item { node, state, depth });
        }
    }

    /// Entries written to disk at once: [`SEGMENT`], or an eighth of what
    /// memory keeps when that is less.
    fn segment(&self) -> usize {
        (self.keep / 8).clamp(1, SEGMENT)
    }

    /// Sends the oldest newer entries to disk while memory holds more than
    /// `keep`.
    fn spill_over(&mut self, io: &mut dyn StateIo) {
        if self.q.len() <= self.keep {
            return;
        }
        if self.spill.is_empty() {
            // Everything is in order in memory: keep the oldest segment's
            // worth as the head; the rest is newer.
            self.head = self.head.min(self.segment()).min(self.q.len());
        }
        let segment = self.segment();
        while self.q.len() > self.keep && self.q.len() - self.head >= segment {
            let at = self.head;
            let items: Vec<Item> = self.q.drain(at..at + segment).collect();
            self.spill
                .write(io, items.into_iter().map(|i| (i.node, i.depth, i.state)));
        }
    }
}

pub(super) enum Frontier {
    Stack(Vec<Item>),
    Queue(Box<Queue>),
    /// Depth-first with each expansion's successors in a random order: the
    /// items pushed since the last pop (from `.2` on) are kept shuffled.
    Random(Vec<Item>, SmallRng, usize),
    Best(BinaryHeap<(i64, Reverse<u64>, u32)>, Vec<Option<Item>>, u64),
}

impl Frontier {
    /// An empty frontier for `strategy`; a breadth-first one keeps at
    /// most `keep` entries in memory (`None`: the default; `usize::MAX`:
    /// all), the rest on disk.
    pub(super) fn new(strategy: Strategy, seed: u64, keep: Option<usize>) -> Self {
        match strategy {
            Strategy::Bfs => Frontier::Queue(Box::new(Queue {
                q: VecDeque::new(),
                head: 0,
                spill: Spill::new(),
                keep: keep.unwrap_or_else(spill_keep),
            })),
            Strategy::Random => Frontier::Random(Vec::new(), SmallRng::seed_from_u64(seed), 0),
            Strategy::BestFirst => Frontier::Best(BinaryHeap::new(), Vec::new(), 0),
            _ => Frontier::Stack(Vec::new()),
        }
    }

    /// Adds `item`; a queue that holds more than it keeps in memory sends
    /// its oldest newer entries to disk through `io`.
    pub(super) fn push(&mut self, item: Item, priority: i64, io: &mut dyn StateIo) {
        match self {
            Frontier::Stack(v) => v.push(item),
            Frontier::Random(v, rng, batch) => {
                // An online Fisher-Yates shuffle of this expansion's batch.
                v.push(item);
                let j = rng.gen_range(*batch..v.len());
                let last = v.len() - 1;
                v.swap(j, last);
            }
            Frontier::Queue(q) => {
                if q.spill.is_empty() && q.head == q.q.len() {
                    q.head += 1;
                }
                q.q.push_back(item);
                if q.q.len() > q.keep {
                    q.spill_over(io);
                }
            }
            Frontier::Best(heap, slots, seq) => {
                let slot = slots.len() as u32;
                slots.push(Some(item));
                heap.push((priority, Reverse(*seq), slot));
                *seq += 1;
            }
        }
    }

    /// The next item; a queue reads entries back from disk through `io`.
    pub(super) fn pop(&mut self, io: &mut dyn StateIo) -> Option<Item> {
        match self {
            Frontier::Stack(v) => v.pop(),
            Frontier::Queue(q) => {
                q.refill(io);
                let item = q.q.pop_front()?;
                q.head -= 1;
                Some(item)
            }
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
    pub(super) fn take_back(&mut self, io: &mut dyn StateIo) -> Option<Item> {
        let Frontier::Queue(q) = self else {
            return None;
        };
        if q.q.len() == q.head && !q.spill.is_empty() {
            // Nothing newer in memory: the newest segment is.
            let items = q.spill.read(io, true);
            q.q.extend(
                items
                    .into_iter()
                    .map(|(node, depth, state)| Item { node, state, depth }),
            );
        }
        let item = q.q.pop_back()?;
        q.head = q.head.min(q.q.len());
        Some(item)
    }

    /// The depth of the item a queue hands out next.
    pub(super) fn front_depth(&mut self, io: &mut dyn StateIo) -> Option<usize> {
        match self {
            Frontier::Queue(q) => {
                q.refill(io);
                q.q.front().map(|i| i.depth)
            }
            _ => None,
        }
    }

    /// Drops every item, releasing its state, and what is on disk.
    pub(super) fn clear(&mut self, io: &mut dyn StateIo) {
        let items: Vec<Item> = match self {
            Frontier::Stack(v) | Frontier::Random(v, _, _) => std::mem::take(v),
            Frontier::Queue(q) => {
                // Entries on disk hold no state in memory: their files go.
                q.spill = Spill::new();
                q.head = 0;
                std::mem::take(&mut q.q).into()
            }
            Frontier::Best(heap, slots, _) => {
                heap.clear();
                std::mem::take(slots).into_iter().flatten().collect()
            }
        };
        for item in items {
            io.release_state(item.state);
        }
    }

    /// Entries on disk now, bytes on disk now and at most, and entries
    /// written to disk in all.
    pub(super) fn disk(&self) -> (usize, u64, u64, u64) {
        match self {
            Frontier::Queue(q) => (
                q.spill.items,
                q.spill.bytes,
                q.spill.peak_bytes,
                q.spill.written,
            ),
            _ => (0, 0, 0, 0),
        }
    }

    /// Bytes of checker memory the frontier's entries take.
    pub(super) fn bytes(&self) -> usize {
        match self {
            Frontier::Stack(v) | Frontier::Random(v, _, _) => v.capacity() * size_of::<Item>(),
            Frontier::Queue(q) => q.q.capacity() * size_of::<Item>(),
            Frontier::Best(heap, slots, _) => {
                heap.capacity() * size_of::<(i64, Reverse<u64>, u32)>()
                    + slots.capacity() * size_of::<Option<Item>>()
            }
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Frontier::Stack(v) | Frontier::Random(v, _, _) => v.len(),
            Frontier::Queue(q) => q.q.len() + q.spill.items,
            Frontier::Best(heap, _, _) => heap.len(),
        }
    }
}

/// The most entries a breadth-first frontier keeps in memory, from
/// `CMC_SPILL`: `off` (all of them), a number, or by default
/// [`DEFAULT_KEEP`]. An unknown value is said once and the default kept.
fn spill_keep() -> usize {
    static KEEP: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *KEEP.get_or_init(|| match std::env::var("CMC_SPILL").as_deref() {
        Err(_) => DEFAULT_KEEP,
        Ok("off") => usize::MAX,
        Ok(n) => match n.parse::<usize>() {
            Ok(n) => n.max(1),
            Err(_) => {
                eprintln!("cmc: CMC_SPILL={n:?} is not off or a number of entries; keeping {DEFAULT_KEEP}");
                DEFAULT_KEEP
            }
        },
    })
}

/// The entries a breadth-first frontier keeps in memory by default.
pub(crate) const DEFAULT_KEEP: usize = 8 * SEGMENT;
