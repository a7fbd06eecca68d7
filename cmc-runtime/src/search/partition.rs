//! The parts of a search across processes that a search holds (see
//! `search::cluster`): the engine that carries it ([`Collective`]), the
//! owner of a state, a process's part of the visited set, and its side of
//! the exchanges.

use std::rc::Rc;

use crate::engine::trace::ViolationRecord;
use crate::engine::RawStep;
use crate::identity::visited::{SharedVisited, Visited};
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
/// owner drops it). With several workers in the process (`--jobs`), the
/// fingerprints it owns are in the set its workers share, and each worker
/// has a table of its own.
pub(crate) struct Partition<'c> {
    own: Own<'c>,
    sent: Box<[u128]>,
    rank: usize,
    size: usize,
    /// A shared set that could not grow refused a fingerprint (the search
    /// stops, bounded).
    pub(super) full: bool,
}

/// Where a process keeps the fingerprints it owns.
enum Own<'c> {
    Alone(Visited),
    /// The set the workers of the process share; `counted`: this worker
    /// counts its memory (one does).
    Shared(&'c SharedVisited, bool),
}

impl<'c> Partition<'c> {
    /// The part of process `rank` of `size`, alone in its process.
    pub(super) fn new(width: FingerprintWidth, rank: usize, size: usize) -> Self {
        Self::with(Own::Alone(Visited::new(width)), rank, size)
    }

    /// The part of process `rank` of `size`, for one of its workers, who
    /// share `visited`; `counted`: this worker counts the set's memory.
    pub(super) fn shared(
        visited: &'c SharedVisited,
        counted: bool,
        rank: usize,
        size: usize,
    ) -> Self {
        Self::with(Own::Shared(visited, counted), rank, size)
    }

    fn with(own: Own<'c>, rank: usize, size: usize) -> Self {
        assert!(rank < size, "process {rank} of {size}");
        Partition {
            own,
            sent: vec![0u128; SENT_SLOTS_MIN].into_boxed_slice(),
            rank,
            size,
            full: false,
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
            match &self.own {
                Own::Alone(v) => v.contains(fp),
                Own::Shared(v, _) => v.contains(fp),
            }
        } else {
            self.sent[self.slot(fp)] == fp.0
        }
    }

    /// The fingerprints this process owns, as far as this worker knows.
    fn owned_len(&self) -> usize {
        match &self.own {
            Own::Alone(v) => v.len(),
            Own::Shared(v, _) => v.len() as usize,
        }
    }

    /// Adds `fp`: true when it is new to this process (owned: new to the
    /// search, and this worker's to expand; not owned: not sent yet by
    /// this worker, and now to be sent).
    pub(super) fn insert(&mut self, fp: Fingerprint) -> bool {
        if self.owns(fp) {
            let new = match &mut self.own {
                Own::Alone(v) => v.insert(fp),
                Own::Shared(v, _) => match v.insert(fp) {
                    Ok(new) => new,
                    Err(crate::identity::visited::Full) => {
                        self.full = true;
                        false
                    }
                },
            };
            if new && self.sent.len() < SENT_SLOTS_MAX && self.owned_len() > 4 * self.sent.len() {
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
            match &self.own {
                Own::Alone(v) => v.prefetch(fp),
                Own::Shared(v, _) => v.prefetch(fp),
            }
        }
    }

    pub(super) fn memory_bytes(&self) -> usize {
        let own = match &self.own {
            Own::Alone(v) => v.memory_bytes(),
            Own::Shared(v, true) => v.memory_bytes(),
            Own::Shared(_, false) => 0,
        };
        own + self.sent.len() * 16
    }

    /// The fingerprints this process owns.
    #[cfg(test)]
    pub(super) fn owned(&self) -> usize {
        self.owned_len()
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
    /// Its whole path was noted for `cargo cmc` (see `note_found`).
    pub(super) noted: bool,
}

/// A search's side of a search across processes. With several workers
/// in each process (`--jobs`), every worker is a member of the
/// collective of its own (see `search::relay`): `rank` and `size` count
/// workers, `per` of them in each process, and a state goes to the
/// worker of its owner's process with this worker's index.
pub(crate) struct Part {
    pub(super) net: Rc<dyn Collective>,
    pub(super) rank: usize,
    pub(super) size: usize,
    /// Workers in each process.
    pub(super) per: usize,
    pub(super) out: Vec<Outbox>,
    /// The last state received from each process (one reference held):
    /// the next one it sends is written against it.
    pub(super) last_in: Vec<Option<StateId>>,
    pub(super) pending: Vec<Pending>,
    /// States sent to other processes, and bytes: as they went
    /// (compressed), and before compression.
    pub(crate) sent_states: u64,
    pub(crate) sent_bytes: u64,
    pub(crate) raw_bytes: u64,
    /// Whether what goes to other processes is compressed
    /// (`CMC_CLUSTER_COMPRESS=0` turns it off, to measure what it saves).
    pub(super) compress: bool,
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
    /// The bytes every process had sent, the transitions all had run and
    /// the states on all their frontiers, at the last round.
    pub(super) all_sent_bytes: u64,
    pub(super) all_transitions: u64,
    pub(super) all_frontier: u64,
    /// The slowest process at the last comparison, and its time over the
    /// mean (see `Progress::slowest`).
    pub(super) slowest: Option<(usize, f64)>,
}

impl Part {
    /// This worker's process, of [`Part::processes`].
    pub(super) fn process(&self) -> usize {
        self.rank / self.per
    }

    /// The processes of the search.
    pub(super) fn processes(&self) -> usize {
        self.size / self.per
    }

    /// The member of the collective a state with fingerprint `fp` goes
    /// to: the worker with this one's index in its owner's process.
    pub(super) fn target(&self, fp: Fingerprint) -> usize {
        owner(fp, self.processes()) * self.per + self.rank % self.per
    }

    /// Compares the time each process spent expanding since the last
    /// comparison (a collective: every process calls it at the same
    /// round).
    pub(super) fn compare_busy(&mut self) {
        let all = self.net.all_gather(&self.busy_us.to_le_bytes());
        self.busy_us = 0;
        // A process's time is its workers' together.
        let busy: Vec<u64> = all
            .chunks(self.per)
            .map(|workers| {
                workers
                    .iter()
                    .map(|b| {
                        u64::from_le_bytes(b[..8].try_into().expect("8 bytes from each worker"))
                    })
                    .sum()
            })
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
    pub(crate) fn new(net: Rc<dyn Collective>, per: usize) -> Self {
        let (rank, size) = (net.rank(), net.size());
        assert!(
            per >= 1 && size % per == 0,
            "{size} members of the collective, {per} in each process"
        );
        Part {
            net,
            rank,
            size,
            per,
            out: (0..size).map(|_| Outbox::default()).collect(),
            last_in: vec![None; size],
            pending: Vec::new(),
            sent_states: 0,
            sent_bytes: 0,
            raw_bytes: 0,
            compress: std::env::var_os("CMC_CLUSTER_COMPRESS").is_none_or(|v| v != "0"),
            received: 0,
            others_unique: 0,
            checked_imports: 0,
            rounds: 0,
            busy_us: 0,
            all_sent_bytes: 0,
            all_transitions: 0,
            all_frontier: 0,
            slowest: None,
        }
    }
}
