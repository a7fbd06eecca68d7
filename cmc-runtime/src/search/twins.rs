//! The check of a declared symmetry during a search: states kept when they
//! enter the visited set, and successors merged with a kept state of
//! their orbit that is not them (*twins*), compared after the expansion
//! that generated them (see `engine::twins`; the search's side of it is
//! in `expand.rs`).
//!
//! By default a sample: the first [`KEEP_SAMPLED`] states are kept, then
//! one in [`SAMPLE_EVERY`], and the first [`CHECK_SAMPLED`] twin pairs are
//! compared, then one in [`SAMPLE_EVERY`] (a comparison costs two
//! expansions). `--check-symmetry` ([`SymmetryCheck::All`]) keeps up to
//! [`KEEP_ALL`] states (their pages stay in memory) and compares every
//! twin of them once. `CMC_SYMMETRY_SAMPLE=off` keeps none, to price the
//! sample.

use crate::engine::erased::Erased as P;
use std::collections::{BTreeMap, HashMap, HashSet};

use crate::engine::{Engine, RawStep};
use crate::memory::{Fingerprint, StateId};
use crate::model::SymmetryCheck;

const KEEP_SAMPLED: usize = 4096;
pub(super) const CHECK_SAMPLED: u64 = 256;
pub(super) const SAMPLE_EVERY: u64 = 64;
const KEEP_ALL: usize = 1 << 22;

/// A state kept for comparison with its twins.
pub(super) struct Kept {
    /// The sum of its own components (its identity, not its orbit's).
    pub(super) own: u128,
    pub(super) state: StateId,
    pub(super) node: u32,
    /// Its process `i` is at slot `perm[i]` of its orbit's smallest image.
    pub(super) perm: Vec<usize>,
}

/// A twin waiting for the end of the expansion that generated it.
pub(super) struct Pending {
    pub(super) orbit: Fingerprint,
    pub(super) state: StateId,
    /// Its parent's node and the step from there.
    pub(super) parent: u32,
    pub(super) step: RawStep,
    pub(super) perm: Vec<usize>,
}

/// The symmetry check's part of a search.
pub(super) struct Twins {
    pub(super) kept: HashMap<Fingerprint, Kept>,
    /// The kept states' orbits by search-tree node.
    by_node: BTreeMap<u32, Fingerprint>,
    /// States kept in all (`keep_cap` at most), and offered.
    keep_cap: usize,
    offered: u64,
    /// Whether every twin is compared, or a sample.
    pub(super) all: bool,
    pub(super) compared: HashSet<(Fingerprint, u128)>,
    pub(super) pending: Vec<Pending>,
    pub(super) merged: u64,
    pub(super) checked: u64,
}

impl Twins {
    pub(super) fn new(check: SymmetryCheck) -> Twins {
        let all = check == SymmetryCheck::All;
        // A knob for the bench that prices the sample, not a setting.
        let off = std::env::var("CMC_SYMMETRY_SAMPLE").as_deref() == Ok("off") && !all;
        Twins {
            kept: HashMap::new(),
            by_node: BTreeMap::new(),
            keep_cap: match (all, off) {
                (true, _) => KEEP_ALL,
                (_, true) => 0,
                _ => KEEP_SAMPLED * 16,
            },
            offered: 0,
            all,
            compared: HashSet::new(),
            pending: Vec::new(),
            merged: 0,
            checked: 0,
        }
    }

    /// Keeps `state`, new in the visited set as `orbit` at `node`, if the
    /// sample still takes states.
    pub(super) fn keep(
        &mut self,
        e: &mut Engine<'_, P>,
        orbit: Fingerprint,
        state: StateId,
        node: u32,
    ) {
        self.offered += 1;
        let sampled =
            self.all || self.offered <= KEEP_SAMPLED as u64 || self.offered % SAMPLE_EVERY == 0;
        if !sampled || self.kept.len() >= self.keep_cap {
            return;
        }
        let Some(c) = e.last_canonical() else {
            return;
        };
        let kept = Kept {
            own: c.own,
            state,
            node,
            perm: c.perm.clone(),
        };
        e.retain(state);
        self.by_node.insert(node, orbit);
        if let Some(old) = self.kept.insert(orbit, kept) {
            self.by_node.remove(&old.node);
            e.release(old.state);
        }
    }

    /// Forgets the states kept at search-tree nodes from `len` on (the
    /// tree was cut back: their paths are gone).
    pub(super) fn forget_from(&mut self, len: usize, e: &mut Engine<'_, P>) {
        let Ok(len) = u32::try_from(len) else {
            return;
        };
        for (_, orbit) in self.by_node.split_off(&len) {
            if let Some(k) = self.kept.remove(&orbit) {
                e.release(k.state);
            }
        }
    }

    /// Gives back every state held.
    pub(super) fn release(&mut self, e: &mut Engine<'_, P>) {
        for (_, k) in self.kept.drain() {
            e.release(k.state);
        }
        self.by_node.clear();
        for p in self.pending.drain(..) {
            e.release(p.state);
        }
    }
}
