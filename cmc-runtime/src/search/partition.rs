//! The parts of a search across processes that a search holds (see
//! `search::cluster`): the engine that carries it ([`Collective`]), the
//! owner of a state, a process's part of the visited set, and its side of
//! the exchanges.

use std::rc::Rc;

use crate::engine::trace::ViolationRecord;
use crate::engine::RawStep;
use crate::identity::visited::Visited;
use crate::memory::{Fingerprint, FingerprintWidth, StateId};

/// What a search across processes needs of the engine that carries it:
/// collective operations, in which every process takes part in the same
/// order.
#[cfg_attr(
    not(feature = "cluster"),
    allow(dead_code, reason = "its engine is a feature")
)]
pub(crate) trait Collective {
    /// This process's index, from 0.
    fn rank(&self) -> usize;
    /// The number of processes.
    fn size(&self) -> usize;
    /// Sends `out[r]` to process `r` (`out[rank]` is empty) and returns
    /// what each process sent to this one.
    fn exchange(&self, out: &[Vec<u8>]) -> Vec<Vec<u8>>;
    /// The element-wise sums of `values` over all processes.
    fn sum(&self, values: &[u64]) -> Vec<u64>;
    /// Every process's `bytes`, by rank, at every process.
    fn all_gather(&self, bytes: &[u8]) -> Vec<Vec<u8>>;
}

/// Slots of the table of fingerprints a process already sent (16 bytes
/// each): at first, and at most. It grows with the states the process
/// owns, a slot for every four, from 1 MiB to 64 MiB: a process sends
/// about as many states as it owns, and most of those it would send again
/// are the recent ones.
const SENT_SLOTS_MIN: usize = 1 << 16;
const SENT_SLOTS_MAX: usize = 1 << 22;

/// The process that owns the state with fingerprint `fp`, of `size`:
/// from bits that neither the visited set's slot nor its tag uses alone.
pub(crate) fn owner(fp: Fingerprint, size: usize) -> usize {
    let x = (fp.0 as u64) ^ ((fp.0 >> 64) as u64);
    let mixed = crate::sys::hash::fmix64(x ^ 0x9e37_79b9_7f4a_7c15);
    ((u128::from(mixed) * size as u128) >> 64) as usize
}

/// A process's part of the visited set of a search across processes: the
/// fingerprints it owns, and a direct-mapped table of those it sent to
/// their owners (a cache: a fingerprint it forgets is sent again, and its
/// owner drops it).
pub(crate) struct Partition {
    own: Visited,
    sent: Box<[u128]>,
    rank: usize,
    size: usize,
}

impl Partition {
    pub(super) fn new(width: FingerprintWidth, rank: usize, size: usize) -> Self {
        assert!(rank < size, "process {rank} of {size}");
        Partition {
            own: Visited::new(width),
            sent: vec![0u128; SENT_SLOTS_MIN].into_boxed_slice(),
            rank,
            size,
        }
    }

    pub(super) fn owns(&self, fp: Fingerprint) -> bool {
        owner(fp, self.size) == self.rank
    }

    fn slot(&self, fp: Fingerprint) -> usize {
        (crate::sys::hash::fmix64(fp.0 as u64 ^ (fp.0 >> 64) as u64) as usize)
            & (self.sent.len() - 1)
    }

    pub(super) fn contains(&self, fp: Fingerprint) -> bool {
        if self.owns(fp) {
            self.own.contains(fp)
        } else {
            self.sent[self.slot(fp)] == fp.0
        }
    }

    /// Adds `fp`: true when it is new to this process (owned: new to the
    /// search; not owned: not sent yet, and now to be sent).
    pub(super) fn insert(&mut self, fp: Fingerprint) -> bool {
        if self.owns(fp) {
            let new = self.own.insert(fp);
            if new && self.own.len() > 4 * self.sent.len() && self.sent.len() < SENT_SLOTS_MAX {
                // A cache: what it held is forgotten (sent again at worst).
                self.sent = vec![0u128; self.sent.len() * 2].into_boxed_slice();
            }
            return new;
        }
        let slot = self.slot(fp);
        if self.sent[slot] == fp.0 {
            return false;
        }
        self.sent[slot] = fp.0;
        true
    }

    pub(super) fn prefetch(&self, fp: Fingerprint) {
        if self.owns(fp) {
            self.own.prefetch(fp);
        }
    }

    pub(super) fn memory_bytes(&self) -> usize {
        self.own.memory_bytes() + self.sent.len() * 16
    }

    /// The fingerprints this process owns.
    #[cfg(test)]
    pub(super) fn owned(&self) -> usize {
        self.own.len()
    }
}

/// What one process sends another in one round: its states, each against
/// the one before it (the first against the last of the round before:
/// the receiver keeps that one too).
#[derive(Default)]
pub(super) struct Outbox {
    pub(super) bytes: Vec<u8>,
    /// The last state written to this process (one reference held).
    pub(super) prev: Option<StateId>,
}

/// A violation or a witness found in this process, whose path starts in
/// another's: `link` names the process and the node of its tree the path
/// continues from, backwards (`None`: the path is whole).
pub(super) struct Pending {
    pub(super) link: Option<(u32, u32)>,
    pub(super) steps: Vec<RawStep>,
    pub(super) record: ViolationRecord,
    /// A witness of a `sometimes` property, not a violation.
    pub(super) witness: bool,
}

/// A search's side of a search across processes.
pub(crate) struct Part {
    pub(super) net: Rc<dyn Collective>,
    pub(super) rank: usize,
    pub(super) size: usize,
    pub(super) out: Vec<Outbox>,
    /// The last state received from each process (one reference held):
    /// the next one it sends is written against it.
    pub(super) last_in: Vec<Option<StateId>>,
    pub(super) pending: Vec<Pending>,
    /// States and bytes sent to other processes.
    pub(crate) sent_states: u64,
    pub(crate) sent_bytes: u64,
    /// States received, and of those, new.
    pub(crate) received: u64,
    /// The states the other processes had found at the last exchange.
    pub(super) others_unique: u64,
    /// Imported states whose fingerprint was computed again here.
    pub(super) checked_imports: u64,
    /// Rounds so far (the same in every process).
    pub(super) rounds: u64,
    /// Microseconds this process spent expanding since the processes last
    /// compared theirs.
    pub(super) busy_us: u64,
    /// The bytes every process had sent at the last round.
    pub(super) all_sent_bytes: u64,
    /// The slowest process at the last comparison, and its time over the
    /// mean (see `Progress::slowest`).
    pub(super) slowest: Option<(usize, f64)>,
}

impl Part {
    /// Compares the time each process spent expanding since the last
    /// comparison (a collective: every process calls it at the same
    /// round).
    pub(super) fn compare_busy(&mut self) {
        let all = self.net.all_gather(&self.busy_us.to_le_bytes());
        self.busy_us = 0;
        let busy: Vec<u64> = all
            .iter()
            .map(|b| u64::from_le_bytes(b[..8].try_into().expect("8 bytes from each process")))
            .collect();
        let mean = busy.iter().sum::<u64>() as f64 / busy.len() as f64;
        let (rank, &max) = busy
            .iter()
            .enumerate()
            .max_by_key(|&(_, b)| *b)
            .expect("at least one process");
        self.slowest = (mean > 0.0).then(|| (rank, max as f64 / mean));
    }

    #[cfg_attr(
        not(feature = "cluster"),
        allow(dead_code, reason = "its engine is a feature")
    )]
    pub(crate) fn new(net: Rc<dyn Collective>) -> Self {
        let (rank, size) = (net.rank(), net.size());
        Part {
            net,
            rank,
            size,
            out: (0..size).map(|_| Outbox::default()).collect(),
            last_in: vec![None; size],
            pending: Vec::new(),
            sent_states: 0,
            sent_bytes: 0,
            received: 0,
            others_unique: 0,
            checked_imports: 0,
            rounds: 0,
            busy_us: 0,
            all_sent_bytes: 0,
            slowest: None,
        }
    }
}
