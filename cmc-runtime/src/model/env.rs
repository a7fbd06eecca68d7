//! The environment: the network's in-flight messages and the processes'
//! pending timers. It lives in the environment's arena, so it is part of
//! every captured state.
//!
//! Both are kept in a canonical order, so that two histories that lead to the
//! same multiset of messages (or set of timers) produce the same bytes:
//! messages are sorted by receiver, then sender, then, on an unordered
//! network, by the message's identity key (its fingerprint from its best
//! source, see [`crate::identity`]; on a FIFO network, by arrival within
//! the link); timers by process and a stable hash of their name. Two
//! messages with equal keys are the same message.
//!
//! Canonical order is not enough for canonical *bytes*: a vector keeps stale
//! copies of removed elements in its spare capacity, and a struct moved into
//! it carries padding bytes from wherever it was built. So every mutation
//! zeroes the spare capacity, and entries are written field by field into
//! zeroed slots. (Padding inside the user's message type is the user's.
//! The search does not fingerprint these bytes anyway: it hashes the
//! environment by meaning, each message by its key; the canonical
//! bytes keep the page store small and the byte fingerprint of traces
//! stable.)

use std::fmt;
use std::ptr::addr_of_mut;

use std::hash::{Hash, Hasher};

use crate::identity::hasher::StateHasher;
use crate::identity::HashFn;
use crate::sys::scope::system_scope;

/// What travels over the model's network. Messages are copied into the
/// environment's arena when sent and into the receiver's arena when
/// delivered (so each arena owns all its objects), and shown in traces by
/// their `Debug`. They are fingerprinted, and kept in a canonical order, by
/// their best source of identity (see [`crate::identity`]): cmc's
/// `StateHash`, their `Hash`, or their canonical `Debug`, which every
/// message has; so a third-party message type that derives only `Clone` and
/// `Debug` is a message.
pub trait Message: Clone + fmt::Debug + 'static {}

impl<T: Clone + fmt::Debug + 'static> Message for T {}

/// What a send does when the network already holds its bound of messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnFull {
    /// The message is silently lost, as a congested network drops packets
    /// (the default).
    #[default]
    Drop,
    /// `send` returns `Err(SendError::Full)`: the code must handle it.
    Error,
    /// Reaching the bound is a model error reported as a violation.
    Violation,
}

/// The network of the model: a bounded multiset of in-flight messages.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct NetworkConfig {
    /// The most messages in flight at once.
    pub capacity: usize,
    /// Whether any in-flight message may be lost (an environment event).
    pub loss: bool,
    /// Whether any in-flight message may be duplicated (an environment
    /// event, within the capacity).
    pub duplication: bool,
    /// Whether each link (sender, receiver) delivers in order; otherwise any
    /// pending message can be delivered next.
    pub fifo: bool,
    /// Whether every send may fail nondeterministically (`Err(SendError::Failed)`).
    pub send_failure: bool,
    /// What a send does at the capacity.
    pub on_full: OnFull,
}

impl Default for NetworkConfig {
    fn default() -> Self {
        NetworkConfig {
            capacity: 4,
            loss: false,
            duplication: false,
            fifo: false,
            send_failure: false,
            on_full: OnFull::Drop,
        }
    }
}

impl NetworkConfig {
    /// A reliable, unordered network of capacity 4.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the capacity.
    pub fn capacity(mut self, n: usize) -> Self {
        self.capacity = n;
        self
    }

    /// Lets the environment lose messages.
    pub fn lossy(mut self, yes: bool) -> Self {
        self.loss = yes;
        self
    }

    /// Lets the environment duplicate messages.
    pub fn duplicating(mut self, yes: bool) -> Self {
        self.duplication = yes;
        self
    }

    /// Makes every link deliver in order.
    pub fn fifo(mut self, yes: bool) -> Self {
        self.fifo = yes;
        self
    }

    /// Lets every send fail nondeterministically.
    pub fn send_failure(mut self, yes: bool) -> Self {
        self.send_failure = yes;
        self
    }

    /// Sets what a send does at the capacity.
    pub fn on_full(mut self, on_full: OnFull) -> Self {
        self.on_full = on_full;
        self
    }
}

/// A message in flight.
/// `repr(C)`: the engine, which does not know `M`, reads the link and
/// the key at the start of each entry (see `engine::erased`).
#[derive(Debug)]
#[repr(C)]
pub(crate) struct InFlight<M> {
    pub(crate) to: u32,
    pub(crate) from: u32,
    /// The message's identity key (128 bits as two words, so the entry has
    /// no padding before the message).
    pub(crate) key: [u64; 2],
    pub(crate) msg: M,
}

/// The environment's state.
/// `repr(C)`: its layout is the same for every message and shared type
/// (see `engine::erased`).
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Env<M, S> {
    pub(crate) fifo: bool,
    pub(crate) msgs: Vec<InFlight<M>>,
    /// Pending timers as (process, stable hash of the name), sorted; two
    /// `u64`s so an entry has no padding.
    pub(crate) timers: Vec<(u64, u64)>,
    /// The model's shared variables, boxed so that they are an object of
    /// their own, the root of their canonical heap.
    pub(crate) shared: Box<S>,
    /// How a message's identity key is computed (a pointer into the
    /// program; the environment is never fingerprinted by its bytes).
    key_fn: HashFn<M>,
}

/// A hash that is the same in every run (SipHash-1-3 with fixed keys), so
/// the canonical order does not depend on the process's random seeds.
pub(crate) fn stable_hash<T: Hash + ?Sized>(value: &T) -> u64 {
    let mut h =
        siphasher::sip::SipHasher13::new_with_keys(0x636d_635f_6e65_7431, 0x636d_635f_6e65_7432);
    value.hash(&mut h);
    h.finish()
}

impl<M: Message, S> Env<M, S> {
    pub(crate) fn new(config: &NetworkConfig, shared: S, key_fn: HashFn<M>) -> Self {
        Env {
            fifo: config.fifo,
            msgs: Vec::with_capacity(config.capacity),
            timers: Vec::new(),
            shared: Box::new(shared),
            key_fn,
        }
    }

    /// The function identity keys are computed by.
    pub(crate) fn key_fn(&self) -> HashFn<M> {
        self.key_fn
    }

    /// The identity key of `msg`. Runs the message's `StateHash`, `Hash` or
    /// `Debug` (user code: it may panic) in checker memory.
    pub(crate) fn key(&self, msg: &M) -> [u64; 2] {
        let _sys = system_scope();
        let mut h = StateHasher::default();
        (self.key_fn)(msg, &mut h);
        let k = h.finish128();
        [k as u64, (k >> 64) as u64]
    }

    /// Inserts a message at its canonical place. Must run with the
    /// environment's arena entered (the vector may grow).
    pub(crate) fn insert(&mut self, from: usize, to: usize, msg: M) {
        let (from32, to32) = (from as u32, to as u32);
        let key = self.key(&msg);
        let at = if self.fifo {
            self.msgs
                .partition_point(|e| (e.to, e.from) <= (to32, from32))
        } else {
            self.msgs
                .partition_point(|e| (e.to, e.from, e.key) <= (to32, from32, key))
        };
        self.insert_at(at, from, to, key, msg);
    }

    /// Duplicates message `i`: the copy goes right after the original, so
    /// that on a FIFO link it arrives next to it, as a link that repeats a
    /// frame delivers it (and an unordered network keeps equal messages
    /// together anyway). Must run with the environment's arena entered.
    pub(crate) fn duplicate(&mut self, i: usize) {
        let (from, to, key) = (
            self.msgs[i].from as usize,
            self.msgs[i].to as usize,
            self.msgs[i].key,
        );
        let msg = self.msgs[i].msg.clone();
        self.insert_at(i + 1, from, to, key, msg);
    }

    fn insert_at(&mut self, at: usize, from: usize, to: usize, key: [u64; 2], msg: M) {
        let (from, to) = (from as u32, to as u32);
        self.msgs.reserve(1);
        zero_spare(&mut self.msgs);
        let len = self.msgs.len();
        // SAFETY: capacity exceeds `len` (reserved above); elements at..len
        // move up by one (within capacity); the freed slot is zeroed and every
        // field written before the length covers it, so the vector never
        // exposes an uninitialised element.
        unsafe {
            let base = self.msgs.as_mut_ptr();
            std::ptr::copy(base.add(at), base.add(at + 1), len - at);
            std::ptr::write_bytes(base.add(at), 0, 1);
            let slot = base.add(at);
            addr_of_mut!((*slot).to).write(to);
            addr_of_mut!((*slot).from).write(from);
            addr_of_mut!((*slot).key).write(key);
            addr_of_mut!((*slot).msg).write(msg);
            self.msgs.set_len(len + 1);
        }
    }

    /// Removes the message at `k`, leaving no stale copy behind.
    pub(crate) fn remove(&mut self, k: usize) -> InFlight<M> {
        let entry = self.msgs.remove(k);
        zero_spare(&mut self.msgs);
        entry
    }

    /// Whether entries `i` and `i - 1` are interchangeable (same link, same
    /// message by identity): delivering or losing either gives the same
    /// successor.
    fn same_as_previous(&self, i: usize) -> bool {
        i > 0 && {
            let (a, b) = (&self.msgs[i - 1], &self.msgs[i]);
            a.to == b.to && a.from == b.from && a.key == b.key
        }
    }

    /// Indices of the messages that can be delivered to `to` next: on a FIFO
    /// network the head of each link, otherwise every pending message (one
    /// of each group of equal messages on a link).
    ///
    /// An iterator, not a vector: a handler's `recv` runs it inside user
    /// code, where a call into the C library's allocator costs a stack
    /// scrub (see `alloc`).
    pub(crate) fn deliverable_iter(&self, to: usize) -> impl Iterator<Item = usize> + '_ {
        let to = to as u32;
        let start = self.msgs.partition_point(|e| e.to < to);
        let end = self.msgs.partition_point(|e| e.to <= to);
        (start..end).filter(move |&i| {
            if self.fifo {
                i == start || self.msgs[i - 1].from != self.msgs[i].from
            } else {
                !self.same_as_previous(i)
            }
        })
    }

    pub(crate) fn has_mail(&self, to: usize) -> bool {
        let to = to as u32;
        let i = self.msgs.partition_point(|e| e.to < to);
        i < self.msgs.len() && self.msgs[i].to == to
    }

    /// Indices of in-flight messages the environment can lose or duplicate
    /// (one of each group of equal messages on a link).
    pub(crate) fn distinct(&self) -> Vec<usize> {
        (0..self.msgs.len())
            .filter(|&i| !self.same_as_previous(i))
            .collect()
    }

    pub(crate) fn timer_key(process: usize, name: &str) -> (u64, u64) {
        (process as u64, stable_hash(name))
    }

    pub(crate) fn timer_pending(&self, process: usize, name: &str) -> bool {
        self.timers
            .binary_search(&Self::timer_key(process, name))
            .is_ok()
    }

    /// Must run with the environment's arena entered.
    pub(crate) fn set_timer(&mut self, process: usize, name: &str) {
        let key = Self::timer_key(process, name);
        if let Err(at) = self.timers.binary_search(&key) {
            self.timers.insert(at, key);
            zero_spare(&mut self.timers);
        }
    }

    pub(crate) fn cancel_timer(&mut self, process: usize, name: &str) -> bool {
        match self.timers.binary_search(&Self::timer_key(process, name)) {
            Ok(at) => {
                self.timers.remove(at);
                zero_spare(&mut self.timers);
                true
            }
            Err(_) => false,
        }
    }
}

/// Zeroes a vector's spare capacity, so its bytes depend only on its
/// elements.
fn zero_spare<T>(v: &mut Vec<T>) {
    let spare = v.spare_capacity_mut();
    // SAFETY: the spare capacity is owned, writable memory of the vector;
    // zero bytes are a valid `MaybeUninit<T>`.
    unsafe { std::ptr::write_bytes(spare.as_mut_ptr(), 0, spare.len()) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(fifo: bool) -> Env<u32, ()> {
        let key: HashFn<u32> = |m, h| h.write_u32(*m);
        Env::new(&NetworkConfig::new().fifo(fifo).capacity(16), (), key)
    }

    #[test]
    fn an_unordered_network_is_a_canonical_multiset() {
        let mut a = env(false);
        let mut b = env(false);
        for (from, to, m) in [(0, 1, 5), (2, 1, 7), (0, 1, 6), (1, 0, 9)] {
            a.insert(from, to, m);
        }
        for (from, to, m) in [(1, 0, 9), (0, 1, 6), (2, 1, 7), (0, 1, 5)] {
            b.insert(from, to, m);
        }
        let key = |e: &Env<u32, ()>| {
            e.msgs
                .iter()
                .map(|m| (m.from, m.to, m.msg))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            key(&a),
            key(&b),
            "insertion order changed the canonical order"
        );
        assert_eq!(a.deliverable_iter(1).collect::<Vec<_>>().len(), 3);
        assert_eq!(a.deliverable_iter(0).collect::<Vec<_>>().len(), 1);
        assert!(a.has_mail(0) && a.has_mail(1) && !a.has_mail(2));
    }

    #[test]
    fn a_fifo_network_delivers_each_link_in_order() {
        let mut e = env(true);
        e.insert(0, 1, 30);
        e.insert(0, 1, 10);
        e.insert(2, 1, 20);
        e.insert(0, 1, 40);
        let heads: Vec<u32> = e
            .deliverable_iter(1)
            .collect::<Vec<_>>()
            .into_iter()
            .map(|i| e.msgs[i].msg)
            .collect();
        assert_eq!(
            heads,
            vec![30, 20],
            "only the head of each link is deliverable"
        );
    }

    #[test]
    fn equal_messages_on_a_link_are_one_choice() {
        let mut e = env(false);
        e.insert(0, 1, 3);
        e.insert(0, 1, 3);
        e.insert(2, 1, 3);
        assert_eq!(
            e.deliverable_iter(1).collect::<Vec<_>>().len(),
            2,
            "two equal messages from 0 and one from 2"
        );
        assert_eq!(e.distinct().len(), 2);
    }

    #[test]
    fn timers_are_a_set() {
        let mut e = env(false);
        e.set_timer(1, "retry");
        e.set_timer(1, "retry");
        e.set_timer(0, "hello");
        assert_eq!(e.timers.len(), 2);
        assert!(e.timer_pending(1, "retry") && !e.timer_pending(0, "retry"));
        assert!(e.cancel_timer(1, "retry"));
        assert!(!e.cancel_timer(1, "retry"));
    }
}
