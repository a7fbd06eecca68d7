//! Random walks ([`Strategy::Walk`](crate::model::Strategy::Walk)).
//!
//! *Plain* walks (`Model::guided_walks(false)`, `--plain-walks`): from the
//! initial state, one random enabled event at a time, with random choices,
//! until the depth bound or a state without successor; then again from the
//! initial state. Only the walk in progress is stored (its states are
//! released as it moves, its search-tree nodes truncated when the next walk
//! starts), so memory does not grow with the run.
//!
//! *Guided* walks (the default, [`Model::guided_walks`](crate::Model::guided_walks))
//! are steered by novelty, as coverage-guided fuzzers (AFL, libFuzzer) and
//! Go-Explore are, with two fixed-size memories shared by all the walks of
//! a worker (see [`super::novelty`]):
//! * the *explored* table: the fingerprints of the states walks entered,
//!   with the least depth each was entered at. A walk enters a successor
//!   only when it is novel (not entered before at that depth or
//!   shallower): the budget goes to states no walk has seen instead of the
//!   handful that every random walk passes through;
//! * the *corpus*: states where a walk stopped with successors untried.
//!   Walks start from a corpus state taken at random (its path recorded
//!   again into the search tree, so that a violation's trace starts at the
//!   initial state), or from the initial state when the corpus is empty.
//!
//! A guided walk tries the events of its state in random order (each
//! choice script in turn, as the other strategies do) and moves to the
//! first novel successor; where none is novel it steps back and tries the
//! rest of the state it came from: a depth-first walk over novel states.
//! Each walk spends a random budget of transitions (a swarm: from 2^6 to
//! 2^14), after which the states on its way that still have untried
//! successors join the corpus.
//! When the corpus is empty the bounded state space has been covered (up
//! to what the table forgot): the table is cleared and a new round starts
//! from the initial state.
//!
//! A portfolio: one transition in four goes to plain walks. Covering states
//! evenly is what finds a bug at the end of an exact sequence of events;
//! but where the space is deep and a bug is common along the paths a
//! random scheduler takes (raft's elections with a crash), plain walks meet
//! it long before an even cover does.
//!
//! Guided walks fingerprint a successor before capturing it (when the
//! engine can) and capture only a novel one that the walk goes on from; a
//! novel successor at the depth bound is checked where it lies. The
//! transition cache answers for a transition it knows, as in the other
//! strategies.
//!
//! Distinct states seen are counted by a sketch. A violation's path is
//! shortened before it is reported: where the walk came back to a state it
//! had been in, the loop is cut, then steps are dropped while the violation
//! still occurs.

use crate::engine::erased::Erased as P;
use std::collections::HashMap;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::engine::isolate;
use crate::engine::trace::{ViolationKind, ViolationRecord};
use crate::engine::{next_script, Event, RawStep, ENV};
use crate::memory::{Fingerprint, StateId};
use crate::model::DEFAULT_WALK_DEPTH;

use super::novelty::{Corpus, Explored};
use super::searcher::Search;
use super::sketch::Sketch;

/// The explored table's bytes (per worker): 2^23 slots of one word, about
/// eight million states before it starts to forget the deepest.
const EXPLORED_BYTES: usize = 64 << 20;

/// The most states the corpus holds (per worker). Each holds its state's
/// pages (shared with the other states that have them) and its path.
const CORPUS: usize = 1 << 14;

/// The most steps the corpus's paths hold in all (per worker): about 64
/// bytes each (the step, its fingerprint), 64 MiB in all.
const CORPUS_STEPS: usize = 1 << 20;

/// Guided walks leave one transition in this many to plain walks (see
/// [`Model::guided_walks`](crate::Model::guided_walks)).
const PLAIN_SHARE: u64 = 4;

/// A guided walk's budget of transitions is 2^k, k drawn from this range.
const BUDGET_LOG2: std::ops::RangeInclusive<u32> = 6..=14;

/// Where a walk is: the initial state's node (`root`), the state it is in,
/// that state's node and depth.
#[derive(Clone, Copy)]
struct Place {
    root: u32,
    state: StateId,
    node: u32,
    depth: usize,
}

/// A state of the corpus: kept (retained), with the steps and the
/// fingerprints of the path that reached it.
struct Entry {
    state: StateId,
    steps: Vec<RawStep>,
    path: Vec<Fingerprint>,
}

/// A state on a guided walk's way: retained, with what remains to try
/// from it (events with their choice scripts, `tries[next..]`).
struct Frame {
    state: StateId,
    node: u32,
    depth: usize,
    tries: Vec<(Event, Vec<usize>)>,
    next: usize,
}

/// What one step of a walk led to.
enum Next {
    /// A successor (owned by the caller; `None` for a leaf that was not
    /// captured), its node.
    State(Option<StateId>, u32),
    /// The walk ends here (no successor, a pruned state, a full tree).
    End,
    /// A violation was reported.
    Violation,
}

/// What a transition run by a walk gave.
enum Ran {
    /// A successor (owned by the caller) with its fingerprint, the step
    /// that led to it, and the choices it offered as (value, range).
    Succ(StateId, Fingerprint, RawStep, Vec<(usize, usize)>),
    /// A successor that is not novel (guided walks; not captured), with
    /// the choices its transition offered.
    Known(Vec<(usize, usize)>),
    /// A novel successor at the depth bound (guided walks): loaded, not
    /// captured (no walk goes on from it), with its fingerprint, the step
    /// and the choices offered.
    Leaf(Fingerprint, RawStep, Vec<(usize, usize)>),
    /// A violation was reported.
    Violation,
}

impl Search<'_, '_, P> {
    /// Walks until a bound, a violation or an interruption stops the
    /// search. `root` is the initial state's node, `initial` its
    /// fingerprint.
    pub(super) fn walk(&mut self, root: u32, initial: Fingerprint) {
        let model = self.engine.model();
        // A swarm: each worker of a parallel search walks from a seed of
        // its own (the first from the model's).
        let seed = match (self.par, &self.swarm) {
            // Across processes, each worker is a member of the swarm.
            (_, Some(swarm)) => swarm.seed(model.seed),
            (Some(par), _) if par.worker > 0 => {
                model.seed ^ crate::sys::hash::fmix64(par.worker as u64)
            }
            _ => model.seed,
        };
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut sketch = Sketch::new();
        sketch.insert(initial);
        if model.guided_walks {
            self.guided_walks(root, initial, &mut rng, &mut sketch);
        } else {
            self.plain_walks(root, initial, &mut rng, &mut sketch);
        }
        self.stats.unique = sketch.estimate();
        if let Some(par) = self.par {
            par.coord.add_sketch(&sketch);
        }
        if let Some(swarm) = &mut self.swarm {
            *swarm.sketch.borrow_mut() = Some(sketch.registers.clone());
            // The others may still be walking: they stop at the next
            // meeting, which this one's stop raises.
            swarm.finish(self.stats.walks);
        }
    }

    /// Whether the walk bound stops the search before the next walk;
    /// counts the walk otherwise.
    fn next_walk(&mut self) -> bool {
        // The walk bound counts every worker's walks.
        let started = match self.par {
            Some(par) if self.swarm.is_none() => par.coord.start_walk(),
            _ => self.stats.walks,
        };
        // Across processes, each walks its share of the bound.
        let bound = self
            .engine
            .model()
            .bounds
            .max_walks
            .map(|w| match &self.swarm {
                Some(swarm) => swarm.share(w),
                None => w,
            });
        if let Some(w) = bound.filter(|&w| started >= w) {
            let w = self.engine.model().bounds.max_walks.unwrap_or(w);
            self.bounded = true;
            self.bounded_by = Some(format!("the walk bound ({w} walks) was reached"));
            return false;
        }
        self.stats.walks += 1;
        true
    }

    /// Plain walks: each from the initial state, one random step at a time.
    fn plain_walks(
        &mut self,
        root: u32,
        initial: Fingerprint,
        rng: &mut SmallRng,
        sketch: &mut Sketch,
    ) {
        while !self.stop_requested() && self.next_walk() {
            self.plain_walk(root, initial, rng, sketch);
        }
    }

    /// One plain walk, from the initial state to the depth bound, a state
    /// without successor, a violation or an interruption.
    fn plain_walk(
        &mut self,
        root: u32,
        initial: Fingerprint,
        rng: &mut SmallRng,
        sketch: &mut Sketch,
    ) {
        let depth_bound = self.depth_bound();
        let start = self.engine.initial();
        self.engine.truncate_tree(root as usize + 1);
        self.engine.retain(start);
        let (mut state, mut node, mut path) = (start, root, vec![initial]);
        for depth in 0..depth_bound {
            if self.stop_requested() {
                break;
            }
            let at = Place {
                root,
                state,
                node,
                depth,
            };
            let next = self.walk_step(rng, at, &mut path, sketch);
            self.walk_progress(sketch);
            match next {
                Next::State(succ, n) => {
                    self.engine.release(state);
                    let succ = succ.expect("a plain walk captures every successor");
                    (state, node) = (succ, n);
                }
                Next::End | Next::Violation => break,
            }
        }
        self.engine.release(state);
    }

    /// The depth at which walks end (in a swarm, this member's: see
    /// `Swarm::depth_bound`).
    fn depth_bound(&self) -> usize {
        let bound = self
            .engine
            .model()
            .bounds
            .max_depth
            .unwrap_or(DEFAULT_WALK_DEPTH);
        match &self.swarm {
            Some(swarm) => swarm.depth_bound(bound),
            None => bound,
        }
    }

    /// Refreshes the estimate of distinct states when progress is due,
    /// and reports progress.
    fn walk_progress(&mut self, sketch: &Sketch) {
        if self.last_progress.elapsed() >= crate::search::progress::interval() {
            self.stats.unique = sketch.estimate();
        }
        self.maybe_report_progress();
    }

    /// Guided walks (see the module's documentation).
    fn guided_walks(
        &mut self,
        root: u32,
        initial: Fingerprint,
        rng: &mut SmallRng,
        sketch: &mut Sketch,
    ) {
        let depth_bound = self.depth_bound();
        let mut explored = Explored::new(EXPLORED_BYTES);
        self.explored_bytes = explored.bytes();
        let mut corpus: Corpus<Entry> = Corpus::new(CORPUS, CORPUS_STEPS);
        explored.enter(initial, 0);
        let start = self.engine.initial();
        let mut first = true;
        let mut plain = 0;
        let mut stack: Vec<Frame> = Vec::new();
        'walks: while !self.stop_requested() {
            if !self.next_walk() {
                break;
            }
            // A portfolio: one transition in PLAIN_SHARE goes to plain
            // walks (in a swarm, a share of each member's own).
            let share = self
                .swarm
                .as_ref()
                .map_or(PLAIN_SHARE, |s| s.plain_share(PLAIN_SHARE));
            let guided = self.stats.transitions - plain;
            if plain * (share - 1) < guided {
                let before = self.stats.transitions;
                self.plain_walk(root, initial, rng, sketch);
                plain += self.stats.transitions - before;
                continue;
            }
            self.engine.truncate_tree(root as usize + 1);
            let (state, node, mut path) = match corpus.take(rng) {
                Some(entry) => {
                    let e = &mut *self.engine;
                    let mut node = Some(root);
                    for step in &entry.steps {
                        node = node
                            .and_then(|n| e.record_node(n, step.event, &step.choices, step.seed));
                    }
                    let Some(node) = node else {
                        // The search tree is full (see `stop_requested`).
                        e.release(entry.state);
                        continue;
                    };
                    (entry.state, node, entry.path)
                }
                None => {
                    if !first {
                        // Every state within the bound was explored (but
                        // what the table forgot): again, afresh.
                        explored.clear();
                        explored.enter(initial, 0);
                    }
                    first = false;
                    self.engine.retain(start);
                    (start, root, vec![initial])
                }
            };
            let depth = path.len() - 1;
            let at = Place {
                root,
                state,
                node,
                depth,
            };
            match self.frame(rng, at, &path) {
                Some(frame) => stack.push(frame),
                None => {
                    self.engine.release(state);
                    continue;
                }
            }
            let budget = 1u64 << rng.gen_range(BUDGET_LOG2);
            let mut spent = 0;
            while let Some(top) = stack.last_mut() {
                if self.stop_requested() {
                    break 'walks;
                }
                if top.next == top.tries.len() {
                    let done = stack.pop().expect("the top frame");
                    self.forget_keys(done.state);
                    self.engine.release(done.state);
                    path.truncate(done.depth);
                    continue;
                }
                if spent == budget {
                    // The walk's budget is spent: what it left untried
                    // joins the corpus.
                    for frame in stack.drain(..) {
                        if frame.next == frame.tries.len() {
                            self.engine.release(frame.state);
                            continue;
                        }
                        let entry = Entry {
                            state: frame.state,
                            steps: self.engine.path(frame.node),
                            path: path[..=frame.depth].to_vec(),
                        };
                        let weight = entry.steps.len() + 1;
                        for old in corpus.push(entry, weight, rng) {
                            self.engine.release(old.state);
                        }
                    }
                    break;
                }
                spent += 1;
                let event = top.tries[top.next].0;
                let script = std::mem::take(&mut top.tries[top.next].1);
                top.next += 1;
                let at = Place {
                    root,
                    state: top.state,
                    node: top.node,
                    depth: top.depth,
                };
                if self.keyed != Some(at.state) {
                    let item = super::frontier::Item {
                        node: at.node,
                        state: at.state,
                        depth: at.depth,
                    };
                    self.prepare_keys(&item);
                }
                let ran = self.walk_transition(
                    rng,
                    at,
                    (event, script),
                    &path,
                    Some((&mut explored, at.depth + 1 >= depth_bound)),
                    sketch,
                );
                self.walk_progress(sketch);
                let (ranges, entered) = match ran {
                    Ran::Succ(succ, fp, step, ranges) => (ranges, Some((Some(succ), fp, step))),
                    Ran::Leaf(fp, step, ranges) => (ranges, Some((None, fp, step))),
                    Ran::Known(ranges) => (ranges, None),
                    Ran::Violation => {
                        self.release_frames(&mut stack);
                        continue 'walks;
                    }
                };
                // The next choice script of the event, tried later (at
                // a random place among what remains).
                if let Some(next) = next_script(&ranges) {
                    let top = stack.last_mut().expect("the top frame");
                    let k = rng.gen_range(top.next..=top.tries.len());
                    top.tries.insert(k, (event, next));
                }
                let Some((succ, fp, step)) = entered else {
                    continue;
                };
                let (succ, node) = match self.walk_enter(at, succ, fp, step, &mut path) {
                    Next::State(Some(succ), node) => (succ, node),
                    Next::State(None, _) => {
                        // A leaf, checked.
                        path.pop();
                        continue;
                    }
                    Next::End => continue,
                    Next::Violation => {
                        self.release_frames(&mut stack);
                        continue 'walks;
                    }
                };
                let at = Place {
                    root,
                    state: succ,
                    node,
                    depth: at.depth + 1,
                };
                let frame = if at.depth < depth_bound {
                    self.frame(rng, at, &path)
                } else {
                    None
                };
                match frame {
                    Some(frame) => stack.push(frame),
                    None => {
                        self.engine.release(succ);
                        path.truncate(at.depth);
                    }
                }
            }
        }
        self.release_frames(&mut stack);
        for entry in corpus.drain() {
            self.engine.release(entry.state);
        }
    }

    /// Releases the states of `stack` and empties it.
    fn release_frames(&mut self, stack: &mut Vec<Frame>) {
        for frame in stack.drain(..) {
            self.forget_keys(frame.state);
            self.engine.release(frame.state);
        }
    }

    /// Forgets the transition cache's key prefixes when they are
    /// `state`'s, about to be released: its id may name another state
    /// later.
    fn forget_keys(&mut self, state: StateId) {
        if self.keyed == Some(state) {
            self.keyed = None;
        }
    }

    /// The frame of a state a guided walk enters (`at`, retained by the
    /// caller, its path `path`): its enabled events in random order.
    /// `None` when there are none (a deadlock is reported unless the model
    /// allows quiescence), or when a guard failed (reported).
    fn frame(&mut self, rng: &mut SmallRng, at: Place, path: &[Fingerprint]) -> Option<Frame> {
        let mut events = self.walk_events(at, path)?;
        events.shuffle(rng);
        Some(Frame {
            state: at.state,
            node: at.node,
            depth: at.depth,
            tries: events.into_iter().map(|e| (e, Vec::new())).collect(),
            next: 0,
        })
    }

    /// The enabled events of the walk's state `at`, loaded; `None` when
    /// there are none (a deadlock is reported unless the model allows
    /// quiescence), or when a guard failed (reported).
    fn walk_events(&mut self, at: Place, path: &[Fingerprint]) -> Option<Vec<Event>> {
        let e = &mut *self.engine;
        e.load(at.state);
        e.set_node(at.node);
        let events = match e.enabled() {
            Ok(events) => events,
            Err(record) => {
                let steps = shorten(e.path(at.node), path);
                self.report_walk(at.root, steps, record);
                return None;
            }
        };
        if let Some(record) = Self::guards_again(e, &events) {
            let steps = shorten(e.path(at.node), path);
            self.report_walk(at.root, steps, record);
            return None;
        }
        if events.is_empty() {
            if !e.model().quiescence_ok {
                let steps = shorten(e.path(at.node), path);
                self.report_walk(
                    at.root,
                    steps,
                    ViolationRecord {
                        kind: ViolationKind::Deadlock,
                        property: "deadlock".into(),
                        message: "no handler is enabled in any process".into(),
                        location: None,
                    },
                );
            }
            return None;
        }
        Some(events)
    }

    /// One step of a plain walk from `at`, whose path's fingerprints so far
    /// are `path`.
    fn walk_step(
        &mut self,
        rng: &mut SmallRng,
        at: Place,
        path: &mut Vec<Fingerprint>,
        sketch: &mut Sketch,
    ) -> Next {
        let Some(events) = self.walk_events(at, path) else {
            // No successor (a deadlock, a failed guard: reported).
            return Next::End;
        };
        let event = events[rng.gen_range(0..events.len())];
        self.engine.set_pick(Some(rng.gen()));
        let ran = self.walk_transition(rng, at, (event, Vec::new()), path, None, sketch);
        self.engine.set_pick(None);
        match ran {
            Ran::Succ(succ, fp, step, _) => self.walk_enter(at, Some(succ), fp, step, path),
            Ran::Known(_) | Ran::Leaf(..) => unreachable!("a plain walk keeps every successor"),
            Ran::Violation => Next::Violation,
        }
    }

    /// Runs `event` with the choice `script` from the walk's state `at`,
    /// whose path's fingerprints are `path`: the successor, captured and
    /// fingerprinted, or the violation the run was (reported). With
    /// `guided` (guided walks: the explored table, and whether the
    /// successor is at the depth bound, where a novel one is returned
    /// uncaptured, `Ran::Leaf`), a successor that is not novel there is
    /// neither captured nor returned (`Ran::Known`): it is fingerprinted
    /// before it is captured when the engine can, and when the transition
    /// cache knows the transition's successor, the transition does not
    /// even run (as in the other strategies' expansions).
    fn walk_transition(
        &mut self,
        rng: &mut SmallRng,
        at: Place,
        (event, script): (Event, Vec<usize>),
        path: &[Fingerprint],
        guided: Option<(&mut Explored, bool)>,
        sketch: &mut Sketch,
    ) -> Ran {
        // Guided walks: the table, and whether the successor is at the
        // depth bound.
        let leaf = guided.as_ref().is_some_and(|&(_, leaf)| leaf);
        let mut explored = guided.map(|(explored, _)| explored);
        let Place {
            root, state, node, ..
        } = at;
        let seeds = self.engine.model().random_seeds as u32;
        let seed = if seeds > 1 {
            rng.gen_range(0..seeds)
        } else {
            0
        };
        let item = super::frontier::Item {
            node,
            state,
            depth: at.depth,
        };
        let key = match explored {
            Some(_) => self.cache_key(&item, event, &script, seed),
            None => None,
        };
        let pre = self.engine.state_tag(state);
        let mut entered = None;
        if let (Some(key), Some(pre), Some(cache), Some(explored)) =
            (key, pre, &self.cache, explored.as_deref_mut())
        {
            if let Some(fact) = cache.get(key) {
                let known = self.known(pre, fact);
                sketch.insert(known.fp);
                if !explored.enter(known.fp, at.depth + 1) {
                    // Known, and not novel: nothing to run.
                    self.stats.transitions += 1;
                    self.stats.generated += 1;
                    self.stats.cached += 1;
                    return Ran::Known(fact.choices());
                }
                entered = Some(known.fp);
            }
        }
        let e = &mut *self.engine;
        e.load(state);
        e.set_node(node);
        if crate::determinism::random::enabled() {
            let (base, exact) = e.seed_base_of(state);
            e.begin_expansion(state, base, exact);
        }
        let actor = if event.actor == ENV {
            u64::MAX
        } else {
            event.actor as u64
        };
        isolate::record_checking(node, actor, event.handler as u64, seed, &script);
        let mut outcome = e.run(event, script.clone(), seed, false, state);
        if outcome.taken != script
            && crate::determinism::random::enabled()
            && crate::determinism::random::drew()
        {
            // What the thread RNG draws depends on the choice script: run
            // the step again with the choices it made as its script, as a
            // replay of the trace will.
            let script = std::mem::take(&mut outcome.taken);
            e.load(state);
            isolate::record_checking(node, actor, event.handler as u64, seed, &script);
            outcome = e.run(event, script, seed, false, state);
        }
        let cacheable = key.is_some()
            && outcome.misfit.is_none()
            && !if seeds > 1 {
                outcome.drew
            } else {
                crate::determinism::random::drew()
            };
        e.end_expansion();
        self.stats.transitions += 1;
        if let Some(m) = outcome.global_error.take() {
            self.fatal = Some(crate::engine::CheckError::Model(m));
            return Ran::Violation;
        }
        let ranges = std::mem::take(&mut outcome.ranges);
        let step = RawStep {
            event,
            choices: std::mem::take(&mut outcome.taken),
            seed,
        };
        if let Some(record) = self.outcome_violation(event, &mut outcome) {
            let mut steps = self.engine.path(node);
            steps.push(step);
            let steps = shorten(steps, path);
            self.report_walk(root, steps, record);
            return Ran::Violation;
        }
        let e = &mut *self.engine;
        self.stats.generated += 1;
        if let (true, Some(explored)) = (e.lazy_capture(), explored.as_deref_mut()) {
            // Fingerprinted first: most successors are not novel, and
            // those need no capture (the next restore undoes what the
            // transition wrote).
            let fp = match e.pending_fingerprint(state, event) {
                Ok(fp) => fp,
                Err(record) => {
                    let mut steps = e.path(node);
                    steps.push(step);
                    let steps = shorten(steps, path);
                    self.report_walk(root, steps, record);
                    return Ran::Violation;
                }
            };
            if let (true, Some(key), Some(cache), Some(pre)) =
                (cacheable, key, &mut self.cache, pre)
            {
                if let Some(old) = cache.insert(key, e.pending_sum().wrapping_sub(pre), &ranges) {
                    for t in old {
                        e.drop_table(t);
                    }
                }
            }
            if entered != Some(fp) {
                sketch.insert(fp);
                if !explored.enter(fp, at.depth + 1) {
                    return Ran::Known(ranges);
                }
            }
            if leaf {
                // Checked where it lies: no capture (the next restore
                // undoes what the transition wrote).
                return Ran::Leaf(fp, step, ranges);
            }
            let succ = e.capture();
            e.tag_computed(succ);
            return Ran::Succ(succ, fp, step, ranges);
        }
        let succ = e.capture();
        let fp = match e.state_fingerprint(succ) {
            Ok(fp) => fp,
            Err(record) => {
                e.release(succ);
                let mut steps = e.path(node);
                steps.push(step);
                let steps = shorten(steps, path);
                self.report_walk(root, steps, record);
                return Ran::Violation;
            }
        };
        if e.model().check_determinism {
            // The step run again from the same state (with the same
            // randomness) must give the same successor.
            if crate::determinism::random::enabled() {
                let (base, exact) = e.seed_base_of(state);
                e.begin_expansion(state, base, exact);
            }
            let differs = Self::determinism(e, state, event, &step.choices, seed, succ, fp);
            e.end_expansion();
            if let Some(differs) = differs {
                e.release(succ);
                let property = e.handler_name(event).to_string();
                let mut steps = e.path(node);
                steps.push(step);
                let steps = shorten(steps, path);
                let (kind, message) = match differs {
                    Ok(message) => (ViolationKind::Nondeterminism, message),
                    Err(thread) => {
                        // Only a later run left a thread behind: it stops
                        // the search.
                        self.halted = true;
                        (ViolationKind::ModelError, thread)
                    }
                };
                let record = ViolationRecord {
                    kind,
                    property,
                    message,
                    location: None,
                };
                self.report_walk(root, steps, record);
                return Ran::Violation;
            }
            e.load(succ);
        }
        sketch.insert(fp);
        if let Some(explored) = explored {
            if !explored.enter(fp, at.depth + 1) {
                e.release(succ);
                return Ran::Known(ranges);
            }
        }
        Ran::Succ(succ, fp, step, ranges)
    }

    /// Moves the walk from `at` into `succ` (loaded, reached by `step`,
    /// fingerprint `fp`; `None`: not captured): records it in the search
    /// tree and on `path`, and checks its properties. The successor and its
    /// node, or the end of the walk (a pruned state, a full tree: `succ` is
    /// released), or the violation it is (reported; `succ` is released).
    fn walk_enter(
        &mut self,
        at: Place,
        succ: Option<StateId>,
        fp: Fingerprint,
        step: RawStep,
        path: &mut Vec<Fingerprint>,
    ) -> Next {
        let e = &mut *self.engine;
        if e.pruned() {
            self.stats.pruned += 1;
            if let Some(succ) = succ {
                e.release(succ);
            }
            return Next::End;
        }
        let Some(next) = e.record_node(at.node, step.event, &step.choices, step.seed) else {
            // The search tree is full (see `stop_requested`).
            if let Some(succ) = succ {
                e.release(succ);
            }
            return Next::End;
        };
        path.push(fp);
        self.stats.max_depth = self.stats.max_depth.max(at.depth + 1);
        isolate::publish(
            self.stats.unique,
            self.stats.transitions,
            self.stats.max_depth,
            self.stats.generated,
        );
        e.set_node(next);
        let verdict = e.check_state();
        if let Some(record) = Self::invariants_again(e, &verdict).or(verdict) {
            if let Some(succ) = succ {
                e.release(succ);
            }
            let steps = shorten(e.path(next), path);
            self.report_walk(at.root, steps, record);
            return Next::Violation;
        }
        Next::State(succ, next)
    }
}

impl Search<'_, '_, P> {
    /// Reports a violation a walk found, by `steps` (loops already cut),
    /// after dropping every single step without which it still occurs.
    fn report_walk(&mut self, root: u32, steps: Vec<RawStep>, record: ViolationRecord) {
        let (steps, record) = self.minimize(root, steps, record);
        self.report(steps, record);
    }

    /// `steps` shortened while what remains still leads to `record`'s
    /// violation (its kind and property): blocks of consecutive steps are
    /// dropped, from half the trace down to single steps, each candidate
    /// run from the initial state by [`Search::leads_to`], which also skips
    /// the later steps a dropped one had made possible (the delivery of a
    /// message no longer sent, say) and stops where the violation occurs,
    /// earlier than the end or not; a candidate that leads to it in fewer
    /// steps replaces the trace. Rounds repeat until one shortens nothing.
    /// Each candidate is recorded in the search tree like a walk (a crash
    /// while one runs is reported with that candidate's path, which is
    /// where it happened). Returns the steps and the violation as the
    /// last of them shows it (its message can name values of that state).
    fn minimize(
        &mut self,
        root: u32,
        steps: Vec<RawStep>,
        record: ViolationRecord,
    ) -> (Vec<RawStep>, ViolationRecord) {
        let mut best = steps;
        let mut shown = record.clone();
        loop {
            let before = best.len();
            let mut block = (best.len() / 2).max(1);
            loop {
                let mut i = 0;
                while i + block <= best.len() {
                    if self.stop_requested_quietly() {
                        return (best, shown);
                    }
                    let mut candidate = best.clone();
                    candidate.drain(i..i + block);
                    match self.leads_to(root, &candidate, &record) {
                        Some((shorter, r)) if shorter.len() < best.len() => {
                            best = shorter;
                            shown = r;
                        }
                        // Blocks side by side, then every single step:
                        // about three runs of the trace per step in all.
                        _ => i += block,
                    }
                }
                if block == 1 {
                    break;
                }
                block = (block / 2).min(best.len() / 2).max(1);
            }
            if best.len() == before {
                return (best, shown);
            }
        }
    }

    /// Whether the search should stop now for a reason other than the
    /// violations found (an interruption, the time limit).
    fn stop_requested_quietly(&self) -> bool {
        isolate::stop_signal().is_some()
            || self
                .engine
                .model()
                .bounds
                .time_limit
                .is_some_and(|t| self.start.elapsed() >= t)
    }

    /// Runs `steps` from the initial state, skipping each step that does
    /// not fit where it comes (its event not enabled, its recorded choices
    /// not the ones it makes now), and returns the steps run up to the
    /// first state where `record`'s violation (same kind, same property)
    /// occurs, with the violation as that state shows it, or `None` when
    /// none does, when another violation occurs
    /// first, or when the run passes through a state the model prunes. The
    /// steps returned are a real path: each ran where it stands.
    fn leads_to(
        &mut self,
        root: u32,
        steps: &[RawStep],
        record: &ViolationRecord,
    ) -> Option<(Vec<RawStep>, ViolationRecord)> {
        let same = |r: &ViolationRecord| r.kind == record.kind && r.property == record.property;
        let e = &mut *self.engine;
        e.truncate_tree(root as usize + 1);
        let mut state = e.initial();
        e.retain(state);
        let mut node = root;
        let mut run: Vec<RawStep> = Vec::new();
        let mut verdict: Option<Option<ViolationRecord>> = None;
        for step in steps {
            let e = &mut *self.engine;
            e.load(state);
            e.set_node(node);
            match e.enabled() {
                Ok(events) if events.contains(&step.event) => {}
                Ok(_) => continue,
                Err(_) => {
                    // A guard failed before: reported where it happened.
                    verdict = Some(None);
                    break;
                }
            }
            if crate::determinism::random::enabled() {
                let (base, exact) = e.seed_base_of(state);
                e.begin_expansion(state, base, exact);
            }
            let actor = if step.event.actor == ENV {
                u64::MAX
            } else {
                step.event.actor as u64
            };
            isolate::record_checking(
                node,
                actor,
                step.event.handler as u64,
                step.seed,
                &step.choices,
            );
            let mut outcome = e.run(step.event, step.choices.clone(), step.seed, false, state);
            e.end_expansion();
            if outcome.misfit.is_some() || outcome.taken != step.choices {
                // The step makes other choices here than it made where it
                // was recorded (or fails on the way): it does not fit, and
                // the state is the one before it.
                let _ = e.take_exhaustion();
                continue;
            }
            if outcome.global_error.is_some() || outcome.thread_error.is_some() {
                let _ = e.take_exhaustion();
                verdict = Some(None);
                break;
            }
            if let Some(r) = self.outcome_violation(step.event, &mut outcome) {
                if same(&r) {
                    run.push(step.clone());
                    verdict = Some(Some(r));
                } else {
                    verdict = Some(None);
                }
                break;
            }
            let e = &mut *self.engine;
            let succ = e.capture();
            e.release(state);
            state = succ;
            let Some(next) = e.record_node(node, step.event, &step.choices, step.seed) else {
                verdict = Some(None);
                break;
            };
            node = next;
            e.set_node(node);
            run.push(step.clone());
            if e.pruned() {
                // The search does not look into a pruned state (nor do
                // walks): a violation there is not one of this model.
                verdict = Some(None);
                break;
            }
            let violation = match e.enabled() {
                Err(r) => Some(r),
                Ok(events) if events.is_empty() && record.kind == ViolationKind::Deadlock => {
                    verdict = Some(Some(record.clone()));
                    break;
                }
                Ok(_) => e.check_state(),
            };
            if let Some(r) = violation {
                verdict = Some(same(&r).then_some(r));
                break;
            }
        }
        self.engine.release(state);
        // No step fitted: the initial state would have to be the
        // violation, which the search checks before any walk.
        verdict.flatten().map(|r| (run, r))
    }
}

/// `steps` with the loops of the walk cut out: `path[i]` is the fingerprint
/// of the state before `steps[i]` (and, when `path` is longer, of the state
/// the last step reached). Where the walk was in the same state at `i` and
/// at a later `j`, the steps in between are dropped: from that state on, the
/// rest of the path does what it did.
fn shorten(steps: Vec<RawStep>, path: &[Fingerprint]) -> Vec<RawStep> {
    assert!(
        path.len() >= steps.len(),
        "a walk of {} steps with {} states",
        steps.len(),
        path.len()
    );
    let last: HashMap<u128, usize> = path.iter().enumerate().map(|(i, f)| (f.0, i)).collect();
    let mut out = Vec::with_capacity(steps.len());
    let mut i = 0;
    while i < steps.len() {
        let j = last[&path[i].0];
        if j > i {
            i = j;
            continue;
        }
        out.push(steps[i].clone());
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Event;

    fn step(actor: usize) -> RawStep {
        RawStep {
            event: Event { actor, handler: 0 },
            choices: vec![],
            seed: 0,
        }
    }

    #[test]
    fn loops_are_cut_and_the_rest_kept() {
        let fp = |x: u128| Fingerprint(x);
        // States 1 2 3 2 4 1 5 (the last step reaches 5): two loops.
        let path = [1, 2, 3, 2, 4, 1, 5].map(fp);
        let steps: Vec<RawStep> = (0..6).map(step).collect();
        let short = shorten(steps, &path);
        assert_eq!(
            short.iter().map(|s| s.event.actor).collect::<Vec<_>>(),
            vec![5],
            "from 1, the walk came back to 1 before its last step"
        );
        // 1 2 3 2 4 (4 steps, the last reaches 4): the loop 2 3 2 goes.
        let path = [1, 2, 3, 2, 4].map(fp);
        let short = shorten((0..4).map(step).collect(), &path);
        assert_eq!(
            short.iter().map(|s| s.event.actor).collect::<Vec<_>>(),
            vec![0, 3]
        );
        // A failing step from the last state: as many steps as states.
        let path = [1, 2, 1].map(fp);
        let short = shorten((0..3).map(step).collect(), &path);
        assert_eq!(
            short.iter().map(|s| s.event.actor).collect::<Vec<_>>(),
            vec![2]
        );
    }

    #[test]
    fn the_sketch_estimates_distinct_counts_within_a_few_percent() {
        for n in [10u64, 1000, 100_000] {
            let mut s = Sketch::new();
            for k in 0..n {
                // Each value three times: repeats must not count.
                for _ in 0..3 {
                    s.insert(Fingerprint(u128::from(crate::sys::hash::fmix64(k + 1))));
                }
            }
            let e = s.estimate() as f64;
            let err = (e - n as f64).abs() / n as f64;
            assert!(err < 0.06, "{n} distinct: estimated {e}");
        }
    }
}
