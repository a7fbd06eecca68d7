//! Random walks ([`Strategy::Walk`](crate::model::Strategy::Walk)): from the
//! initial state, one random enabled event at a time, with random choices,
//! until the depth bound or a state without successor; then again from the
//! initial state. Only the walk in progress is stored (its states are
//! released as it moves, its search-tree nodes truncated when the next walk
//! starts), so memory does not grow with the run. Distinct states seen are
//! counted by a sketch. A violation's path is shortened before it is
//! reported: where the walk came back to a state it had been in, the loop
//! is cut.
//!
//! Guided walks (the default, [`Model::guided_walks`](crate::Model::guided_walks))
//! keep a small corpus of states where a walk found something new, as
//! coverage-guided fuzzers (AFL, libFuzzer) keep inputs: a *feature* of a
//! step is the handler that led to the state with the set of handlers
//! enabled in it (and, under `--coverage`, code that ran for the first
//! time in the check). A state with a feature no walk had seen joins the
//! corpus, and three walks in four start from a corpus state, its path
//! recorded again into the search tree so that a violation's trace starts
//! at the initial state. A deep bug needs a walk to make every one of its
//! steps right; from a corpus state, only the steps past it.

use std::collections::{HashMap, HashSet};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::engine::isolate;
use crate::engine::trace::{ViolationKind, ViolationRecord};
use crate::engine::{RawStep, ENV};
use crate::memory::{Fingerprint, StateId};
use crate::model::{Process, DEFAULT_WALK_DEPTH};

use super::searcher::Search;
use super::sketch::Sketch;

/// Where a walk is: the initial state's node (`root`), the state it is in,
/// that state's node and depth, and the handler that led there.
#[derive(Clone, Copy)]
struct Place {
    root: u32,
    state: StateId,
    node: u32,
    depth: usize,
    came_by: u64,
}

/// A state of the corpus: kept (retained), with the steps and the
/// fingerprints of the path that reached it.
struct Entry {
    state: StateId,
    steps: Vec<RawStep>,
    path: Vec<Fingerprint>,
    chosen: u32,
}

/// The most states the corpus keeps: past it, a new one replaces a random
/// one.
const CORPUS: usize = 200_000;

/// The corpus of a guided walk and the features seen.
#[derive(Default)]
struct Corpus {
    entries: Vec<Entry>,
    features: HashSet<u64>,
    cells: HashMap<u64, usize>,
    /// Whether walks are guided at all.
    on: bool,
}

/// What one step of a walk led to.
enum Next {
    /// A successor (owned by the caller), its node, and the handler that
    /// led to it (a feature of the next step).
    State(StateId, u32, u64),
    /// The walk ends here (no successor, a pruned state, a full tree).
    End,
    /// A violation was reported.
    Violation,
}

impl<P: Process> Search<'_, '_, P> {
    /// Walks until a bound, a violation or an interruption stops the
    /// search. `root` is the initial state's node, `initial` its
    /// fingerprint.
    pub(super) fn walk(&mut self, root: u32, initial: Fingerprint) {
        let model = self.engine.model();
        let depth_bound = model.bounds.max_depth.unwrap_or(DEFAULT_WALK_DEPTH);
        // A swarm: each worker of a parallel search walks from a seed of
        // its own (the first from the model's).
        let seed = match self.par {
            Some(par) if par.worker > 0 => model.seed ^ crate::sys::hash::fmix64(par.worker as u64),
            _ => model.seed,
        };
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut sketch = Sketch::new();
        sketch.insert(initial);
        let mut corpus = Corpus {
            on: model.guided_walks,
            ..Corpus::default()
        };
        let start = self.engine.initial();
        'walks: while !self.stop_requested() {
            // The walk bound counts every worker's walks.
            let started = match self.par {
                Some(par) => par.coord.start_walk(),
                None => self.stats.walks,
            };
            if let Some(w) = model.bounds.max_walks.filter(|&w| started >= w) {
                self.bounded = true;
                self.bounded_by = Some(format!("the walk bound ({w} walks) was reached"));
                break;
            }
            self.stats.walks += 1;
            self.engine.truncate_tree(root as usize + 1);
            let (mut state, mut node, mut path, first) =
                match self.from_corpus(&mut rng, &mut corpus, root) {
                    Some(from) => from,
                    None => {
                        self.engine.retain(start);
                        (start, root, vec![initial], 0)
                    }
                };
            let mut came_by = u64::MAX;
            for depth in first..depth_bound {
                if self.stop_requested() {
                    self.engine.release(state);
                    break 'walks;
                }
                let at = Place {
                    root,
                    state,
                    node,
                    depth,
                    came_by,
                };
                let next = self.walk_step(&mut rng, at, &mut path, &mut sketch, &mut corpus);
                if self.last_progress.elapsed() >= crate::search::progress::interval() {
                    self.stats.unique = sketch.estimate();
                }
                self.maybe_report_progress();
                match next {
                    Next::State(succ, n, by) => {
                        self.engine.release(state);
                        (state, node, came_by) = (succ, n, by);
                    }
                    Next::End | Next::Violation => break,
                }
            }
            self.engine.release(state);
        }
        self.stats.unique = sketch.estimate();
        if let Some(par) = self.par {
            par.coord.add_sketch(&sketch);
        }
        let _ = std::fs::write("/tmp/corpus.txt", format!("corpus {} features {} tags {:?}", corpus.entries.len(), corpus.features.len(), self.engine.process_tag(start, 0)));
        for entry in corpus.entries {
            self.engine.release(entry.state);
        }
    }

    /// Where the next walk starts when it starts from the corpus (three
    /// walks in four, once the corpus has a state): a corpus state,
    /// retained for the walk, its path recorded into the search tree
    /// again; its node, fingerprints and depth.
    fn from_corpus(
        &mut self,
        rng: &mut SmallRng,
        corpus: &mut Corpus,
        root: u32,
    ) -> Option<(StateId, u32, Vec<Fingerprint>, usize)> {
        if !corpus.on || corpus.entries.is_empty() || rng.gen_range(0..8) == 0 {
            return None;
        }
        // The least chosen of 8 drawn at random.
        let n = corpus.entries.len();
        let k = (0..8)
            .map(|_| rng.gen_range(0..n))
            .min_by_key(|&k| corpus.entries[k].chosen)
            .expect("8 draws");
        corpus.entries[k].chosen += 1;
        let entry = &corpus.entries[k];
        let e = &mut *self.engine;
        let mut node = root;
        for step in &entry.steps {
            node = e.record_node(node, step.event, &step.choices, step.seed)?;
        }
        e.retain(entry.state);
        Some((entry.state, node, entry.path.clone(), entry.steps.len()))
    }

    /// One step of a walk from `at`, whose path's fingerprints so far are
    /// `path`.
    fn walk_step(
        &mut self,
        rng: &mut SmallRng,
        at: Place,
        path: &mut Vec<Fingerprint>,
        sketch: &mut Sketch,
        corpus: &mut Corpus,
    ) -> Next {
        let Place {
            root,
            state,
            node,
            depth,
            came_by,
        } = at;
        let e = &mut *self.engine;
        e.load(state);
        e.set_node(node);
        let events = match e.enabled() {
            Ok(events) => events,
            Err(record) => {
                let steps = shorten(e.path(node), path);
                self.report_walk(root, steps, record);
                return Next::Violation;
            }
        };
        if let Some(record) = Self::guards_again(e, &events) {
            let steps = shorten(e.path(node), path);
            self.report_walk(root, steps, record);
            return Next::Violation;
        }
        if corpus.on && depth > 0 {
            // The step's feature: the handler that led here and the
            // handlers enabled here; and code run for the first time.
            let mut feature = crate::sys::hash::fmix64(came_by ^ 0x9e37_79b9_7f4a_7c15);
            let mut handlers: Vec<u64> = events
                .iter()
                .map(|ev| if ev.actor == ENV { u64::MAX - ev.handler as u64 } else { ev.handler as u64 })
                .collect();
            handlers.sort_unstable();
            handlers.dedup();
            for h in handlers {
                feature = crate::sys::hash::fmix64(feature ^ h.wrapping_add(0x632b_e59b_d9b4_e019));
            }
            let _ = feature;
            // Go-Explore: the cell is the tuple of the processes' local
            // states; the archive keeps one state per cell, the one with
            // the shortest path.
            let mut cell = 0x51_7cc1_b727_220a_u64;
            for p in 0..e.arenas().len() {
                let tag = e.process_tag(state, p).unwrap_or(0);
                cell = crate::sys::hash::fmix64(cell ^ tag as u64 ^ ((tag >> 64) as u64).rotate_left(7));
            }
            let _ = crate::sys::coverage::take_fresh();
            match corpus.cells.get(&cell).copied() {
                None if corpus.entries.len() < CORPUS => {
                    e.retain(state);
                    corpus.cells.insert(cell, corpus.entries.len());
                    corpus.entries.push(Entry { state, steps: e.path(node), path: path.clone(), chosen: 0 });
                }
                Some(k) if corpus.entries[k].steps.len() > depth => {
                    e.retain(state);
                    let old = std::mem::replace(&mut corpus.entries[k], Entry { state, steps: e.path(node), path: path.clone(), chosen: 0 });
                    e.release(old.state);
                }
                _ => {}
            }
        }
        if events.is_empty() {
            if e.model().quiescence_ok {
                return Next::End;
            }
            let steps = shorten(e.path(node), path);
            self.report_walk(
                root,
                steps,
                ViolationRecord {
                    kind: ViolationKind::Deadlock,
                    property: "deadlock".into(),
                    message: "no handler is enabled in any process".into(),
                    location: None,
                },
            );
            return Next::Violation;
        }
        let event = events[rng.gen_range(0..events.len())];
        let seeds = e.model().random_seeds as u32;
        let seed = if seeds > 1 {
            rng.gen_range(0..seeds)
        } else {
            0
        };
        if crate::determinism::random::enabled() {
            let (base, exact) = e.seed_base_of(state);
            e.begin_expansion(state, base, exact);
        }
        let actor = if event.actor == ENV {
            u64::MAX
        } else {
            event.actor as u64
        };
        isolate::record_checking(node, actor, event.handler as u64, seed, &[]);
        e.set_pick(Some(rng.gen()));
        let mut outcome = e.run(event, Vec::new(), seed, false, state);
        e.set_pick(None);
        if !outcome.taken.is_empty() && crate::determinism::random::enabled() {
            // What the thread RNG draws depends on the choice script: run
            // the step again with the choices it made as its script, as a
            // replay of the trace will.
            let script = std::mem::take(&mut outcome.taken);
            e.load(state);
            isolate::record_checking(node, actor, event.handler as u64, seed, &script);
            outcome = e.run(event, script, seed, false, state);
        }
        e.end_expansion();
        self.stats.transitions += 1;
        if let Some(m) = outcome.global_error.take() {
            self.fatal = Some(crate::engine::CheckError::Model(m));
            return Next::Violation;
        }
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
            return Next::Violation;
        }
        let e = &mut *self.engine;
        let succ = e.capture();
        self.stats.generated += 1;
        let fp = match e.state_fingerprint(succ) {
            Ok(fp) => fp,
            Err(record) => {
                e.release(succ);
                let mut steps = e.path(node);
                steps.push(step);
                let steps = shorten(steps, path);
                self.report_walk(root, steps, record);
                return Next::Violation;
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
                return Next::Violation;
            }
            e.load(succ);
        }
        sketch.insert(fp);
        if e.pruned() {
            self.stats.pruned += 1;
            e.release(succ);
            return Next::End;
        }
        let Some(next) = e.record_node(node, event, &step.choices, seed) else {
            // The search tree is full (see `stop_requested`).
            e.release(succ);
            return Next::End;
        };
        path.push(fp);
        self.stats.max_depth = self.stats.max_depth.max(depth + 1);
        isolate::publish(
            self.stats.unique,
            self.stats.transitions,
            self.stats.max_depth,
            self.stats.generated,
        );
        e.set_node(next);
        let verdict = e.check_state();
        if let Some(record) = Self::invariants_again(e, &verdict).or(verdict) {
            e.release(succ);
            let steps = shorten(e.path(next), path);
            self.report_walk(root, steps, record);
            return Next::Violation;
        }
        let by = if event.actor == ENV {
            u64::MAX - event.handler as u64
        } else {
            event.handler as u64
        };
        Next::State(succ, next, by)
    }
}

impl<P: Process> Search<'_, '_, P> {
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
