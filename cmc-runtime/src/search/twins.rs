//! The check of a declared symmetry during a search: states kept when they
//! enter the visited set, and successors merged with a kept state of
//! their orbit that is not them (*twins*), compared after the expansion
//! that generated them (see `engine::twins`).
//!
//! By default a sample: the first [`KEEP_SAMPLED`] states are kept, then
//! one in [`SAMPLE_EVERY`], and the first [`CHECK_SAMPLED`] twin pairs are
//! compared, then one in [`SAMPLE_EVERY`] (a comparison costs two
//! expansions). `--check-symmetry` ([`SymmetryCheck::All`]) keeps up to
//! [`KEEP_ALL`] states (their pages stay in memory) and compares every
//! twin of them once. `CMC_SYMMETRY_SAMPLE=off` keeps none, to price the
//! sample.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::engine::twins::asymmetry;
use crate::engine::{Engine, RawStep};
use crate::memory::{Fingerprint, StateId};
use crate::model::{Process, SymmetryCheck};

use super::searcher::Search;

const KEEP_SAMPLED: usize = 4096;
const CHECK_SAMPLED: u64 = 256;
const SAMPLE_EVERY: u64 = 64;
const KEEP_ALL: usize = 1 << 22;

/// A state kept for comparison with its twins.
struct Kept {
    /// The sum of its own components (its identity, not its orbit's).
    own: u128,
    state: StateId,
    node: u32,
    /// Its process `i` is at slot `perm[i]` of its orbit's smallest image.
    perm: Vec<usize>,
}

/// A twin waiting for the end of the expansion that generated it.
struct Pending {
    orbit: Fingerprint,
    state: StateId,
    /// Its parent's node and the step from there.
    parent: u32,
    step: RawStep,
    perm: Vec<usize>,
}

/// The symmetry check's part of a search.
pub(super) struct Twins {
    kept: HashMap<Fingerprint, Kept>,
    /// The kept states' orbits by search-tree node.
    by_node: BTreeMap<u32, Fingerprint>,
    /// States kept in all (`keep_cap` at most), and offered.
    keep_cap: usize,
    offered: u64,
    /// Whether every twin is compared, or a sample.
    all: bool,
    compared: HashSet<(Fingerprint, u128)>,
    pending: Vec<Pending>,
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
    pub(super) fn keep<P: Process>(
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
    pub(super) fn forget_from<P: Process>(&mut self, len: usize, e: &mut Engine<'_, P>) {
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
    pub(super) fn release<P: Process>(&mut self, e: &mut Engine<'_, P>) {
        for (_, k) in self.kept.drain() {
            e.release(k.state);
        }
        self.by_node.clear();
        for p in self.pending.drain(..) {
            e.release(p.state);
        }
    }
}

impl<P: Process> Search<'_, '_, P> {
    /// Cuts the search tree back to its first `len` nodes (a depth-first
    /// search's finished subtrees), forgetting the states kept there.
    pub(super) fn truncate_tree(&mut self, len: usize) {
        self.engine.truncate_tree(len);
        if let Some(twins) = &mut self.twins {
            twins.forget_from(len, self.engine);
        }
    }

    /// The loaded successor of `parent` by `step`, whose orbit `orbit` was
    /// visited already (`captured`: the successor, if captured): if it is
    /// a twin of a kept state, it is kept for comparison after the
    /// expansion.
    pub(super) fn note_twin(
        &mut self,
        parent: u32,
        step: &RawStep,
        orbit: Fingerprint,
        captured: Option<StateId>,
    ) {
        let Some(twins) = &mut self.twins else {
            return;
        };
        let e = &mut *self.engine;
        let Some(c) = e.last_canonical() else {
            return;
        };
        let Some(kept) = twins.kept.get(&orbit) else {
            return;
        };
        if kept.own == c.own {
            return;
        }
        twins.merged += 1;
        let sampled =
            twins.all || twins.merged <= CHECK_SAMPLED || twins.merged % SAMPLE_EVERY == 0;
        if !sampled || !twins.compared.insert((orbit, c.own)) {
            return;
        }
        let perm = c.perm.clone();
        let state = match captured {
            Some(s) => {
                e.retain(s);
                s
            }
            None => {
                let s = e.capture();
                e.tag_computed(s);
                s
            }
        };
        twins.pending.push(Pending {
            orbit,
            state,
            parent,
            step: step.clone(),
            perm,
        });
    }

    /// Compares the twins found by the last expansion with their kept
    /// states; a difference is a violation of the declared symmetry.
    pub(super) fn check_twins(&mut self) {
        let Some(twins) = &mut self.twins else {
            return;
        };
        let pending = std::mem::take(&mut twins.pending);
        for p in pending {
            let twins = self.twins.as_mut().expect("twins are on");
            let Some(kept) = twins.kept.get(&p.orbit) else {
                self.engine.release(p.state);
                continue;
            };
            twins.checked += 1;
            // s's process i is at slot kept.perm[i] of the smallest image,
            // t's process j at slot p.perm[j]: i is j where they meet.
            let inverse = crate::engine::symmetry::inverse(&p.perm);
            let perm: Vec<usize> = kept.perm.iter().map(|&slot| inverse[slot]).collect();
            let (s, s_node) = (kept.state, kept.node);
            let differ = self
                .engine
                .twins_differ(s, s_node, p.state, p.parent, &perm);
            self.engine.release(p.state);
            if let Some(message) = differ {
                let e = &*self.engine;
                let reached = format!(
                    "{}. The image was reached by `{}` of {} from another state; the counts \
                     of this search cannot be trusted (the trace leads to the state)",
                    message,
                    e.handler_name(p.step.event),
                    e.actor_name(p.step.event.actor)
                );
                let steps = self.engine.path(s_node);
                let mut twin = self.engine.path(p.parent);
                twin.push(p.step.clone());
                self.twin_path = crate::engine::runs_of(&twin);
                self.report(steps, asymmetry(reached));
                if !self.engine.model().keep_going {
                    self.halted = true;
                }
            }
            if self.stop_requested() {
                break;
            }
        }
    }
}
