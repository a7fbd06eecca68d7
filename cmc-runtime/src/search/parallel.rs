//! A search on several cores (`--jobs N`): worker processes.
//!
//! Arenas live at fixed addresses, so the workers are processes, forked
//! together (see [`isolate::run_in_children`]), each with its own engine,
//! page store and search tree, sharing two things mapped before the fork:
//! the visited set ([`SharedVisited`]), and the [`Coord`] block through
//! which they stop together, meet at barriers and hand each other work.
//!
//! Inserting a fingerprint into the shared set *claims* its state: the
//! worker whose insertion added it checks and expands it, the others drop
//! it. Every state is therefore expanded once, by one worker, and a
//! complete search counts exactly the states and transitions `--jobs 1`
//! counts.
//!
//! States never travel between workers as memory: a worker hands a state
//! to another as its *path* — the steps from the initial state — and the
//! receiver replays it (the checker requires handlers to be deterministic,
//! and checks the replayed state's fingerprint against the sender's).
//! Depth-first workers give away the shallowest state on their stack when
//! another worker is idle; breadth-first workers expand one level at a
//! time, meet at a barrier between levels (so every state is claimed at its
//! smallest depth and traces stay shortest), and even out the next level
//! when one worker holds much more of it than its share.
//!
//! Random walks need no sharing but their bound: a swarm of workers walks
//! from seeds of their own, counts its walks together, and merges the
//! sketches of the states it saw.

use crate::engine::erased::Erased as P;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::engine::isolate::{self, ChildEnd};
use crate::engine::trace::{CheckResult, Stats, Verdict, ViolationKind, ViolationRecord};
use crate::engine::{CheckError, ENV};
use crate::model::{Model, Strategy};

use super::coord::*;
use super::frontier::{Frontier, Item};
use super::searcher::Search;

impl Search<'_, '_, P> {
    /// A depth-first (or random-order) worker: its own stack, work from the
    /// others when it runs dry, work for the others when they do.
    pub(super) fn run_shared_stack(&mut self, par: Par<'_>) {
        let mut idle = false;
        let mut waited = 0u32;
        loop {
            if self.stop_requested() {
                break;
            }
            let item = match self.frontier.pop(&mut *self.engine) {
                Some(item) => item,
                None => match par.coord.next_work(&mut idle) {
                    Work::Path(record) => match self.adopt(&record, true) {
                        Some(item) => {
                            waited = 0;
                            item
                        }
                        None => continue,
                    },
                    Work::Wait => {
                        if waited == 0 {
                            // Idle, not hung (see `Coord::barrier`).
                            isolate::phase(isolate::IN_CHECKER, 0, 0, 0, 0);
                        }
                        pause(&mut waited);
                        continue;
                    }
                    Work::Done => break,
                },
            };
            if let Frontier::Stack(_) = self.frontier {
                self.truncate_tree(item.node as usize + 1);
            }
            self.expand(&item);
            self.engine.release(item.state);
            if self.frontier.len() >= 2 && par.coord.wanted() {
                if let Some(bottom) = self.frontier.take_bottom() {
                    self.give(par, bottom);
                }
            }
            self.maybe_report_progress();
        }
    }

    /// A breadth-first worker: level by level, meeting the others between
    /// levels.
    pub(super) fn run_shared_levels(&mut self, par: Par<'_>) {
        let c = par.coord;
        let mut level = 0;
        loop {
            while self.frontier.front_depth(&mut *self.engine) == Some(level) {
                if self.stop_requested() {
                    return;
                }
                let item = self.frontier.pop(&mut *self.engine).expect("a front item");
                self.expand(&item);
                self.engine.release(item.state);
                self.maybe_report_progress();
            }
            if self.stop_requested() {
                return;
            }
            let mine = self.frontier.len() as u64;
            c.slot(par.worker, COUNT).store(mine, Ordering::Relaxed);
            if !c.barrier() {
                return;
            }
            let counts: Vec<u64> = (0..c.workers)
                .map(|w| c.slot(w, COUNT).load(Ordering::Relaxed))
                .collect();
            let total: u64 = counts.iter().sum();
            if total == 0 {
                return;
            }
            // Every worker has read the counts before any writes the next
            // level's.
            if !c.barrier() {
                return;
            }
            let n = c.workers as u64;
            let target = total / n + u64::from((par.worker as u64) < total % n);
            let slack = target / 8 + 8;
            if mine > target + slack {
                // A state handed over costs its receiver a replay of its
                // path, `level` steps each about as dear as expanding a
                // state (a run, a restore): with `g` states here and `r`
                // there, moving `k` evens the two out when
                // (g - k) = r + k + k·level, so k = (g - r) / (2 + level),
                // and g - r is about twice the excess over the share.
                let excess = mine - target;
                let give = 2 * excess / (2 + level as u64);
                for _ in 0..give {
                    match self.frontier.take_back(&mut *self.engine) {
                        Some(item) => self.give(par, item),
                        None => break,
                    }
                }
            }
            if !c.barrier() {
                return;
            }
            let mut have = self.frontier.len() as u64;
            while have < target {
                let Some(record) = c.take() else { break };
                if let Some(item) = self.adopt(&record, false) {
                    self.frontier.push(item, 0, &mut *self.engine);
                    have += 1;
                }
            }
            level += 1;
        }
    }

    /// Offers `item` to the other workers as its path, and drops it.
    fn give(&mut self, par: Par<'_>, item: Item) {
        let e = &mut *self.engine;
        e.load(item.state);
        let fp = e.state_fingerprint(item.state);
        let steps = e.path(item.node);
        let record = fp.map(|fp| encode(fp, item.depth, &steps));
        match record {
            Ok(record) if par.coord.offer(&record) => {
                e.release(item.state);
            }
            // Kept when the queue is full (or the state cannot be
            // fingerprinted again, which the search reported when it
            // first could not).
            _ => self.frontier.push(item, 0, &mut *self.engine),
        }
    }

    /// Replays a path another worker offered, from the initial state: the
    /// state to expand, recorded in this worker's search tree (after
    /// cutting the tree back to the root when `fresh`: a depth-first
    /// worker adopts only with an empty stack). `None`, with a
    /// nondeterminism violation reported, when the replay does not reach a
    /// state with the sender's fingerprint.
    fn adopt(&mut self, record: &[u64], fresh: bool) -> Option<Item> {
        let (want, depth, steps) = decode(record);
        let e = &mut *self.engine;
        let root = self.root;
        if fresh {
            e.truncate_tree(root as usize + 1);
            if let Some(twins) = &mut self.twins {
                twins.forget_from(root as usize + 1, e);
            }
        }
        let mut state = e.initial();
        e.retain(state);
        let mut node = root;
        let mut failure = None;
        for step in &steps {
            e.load(state);
            e.set_node(node);
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
            let outcome = e.run(step.event, step.choices.clone(), step.seed, false, state);
            e.end_expansion();
            self.stats.replayed += 1;
            let exhausted = e.take_exhaustion();
            if outcome.panic.is_some()
                || exhausted.is_some()
                || outcome.global_error.is_some()
                || outcome.thread_error.is_some()
                || outcome.misfit.is_some()
                || outcome.model_error.is_some()
                || outcome.taken != step.choices
            {
                failure = Some(format!(
                    "{} of {} behaved differently when another worker replayed it",
                    e.handler_name(step.event),
                    e.actor_name(step.event.actor)
                ));
                break;
            }
            let succ = e.capture();
            e.release(state);
            state = succ;
            match e.record_node(node, step.event, &step.choices, step.seed) {
                Some(next) => node = next,
                None => {
                    // The tree is full: the search stops, bounded.
                    e.release(state);
                    return None;
                }
            }
        }
        if failure.is_none() {
            e.load(state);
            match e.state_fingerprint(state) {
                Ok(fp) if fp == want => {
                    e.set_node(node);
                    return Some(Item { node, state, depth });
                }
                _ => {
                    failure = Some(
                        "a state replayed from its path by another worker has another \
                         fingerprint: a handler, or the state's identity, depends on more \
                         than the path (run with --check-determinism to find which)"
                            .to_string(),
                    )
                }
            }
        }
        e.release(state);
        let message = failure.expect("a failed replay says why");
        self.report(
            steps,
            ViolationRecord {
                kind: ViolationKind::Nondeterminism,
                property: "replay".into(),
                message,
                location: None,
            },
        );
        None
    }
}

/// Checks `model` with `model.jobs` worker processes (see the module
/// documentation).
pub(crate) fn check(model: &Model<P>) -> Result<CheckResult, CheckError> {
    let start = Instant::now();
    super::searcher::settings(model)?;
    let jobs = model.workers();
    if model.strategy == Strategy::BestFirst {
        return Err(CheckError::Model(format!(
            "model `{}`: the {:?} strategy runs on one core; use --jobs 1 with it",
            model.name, model.strategy
        )));
    }
    if model.depth_first_bounded() {
        return Err(CheckError::Model(format!(
            "model `{}`: a depth-first search under a depth bound (--max-depth) runs on one \
             core, so that a state reached first by a long path is expanded again when a \
             shorter one reaches it; use --jobs 1 with it, or breadth-first search",
            model.name
        )));
    }
    if model.por {
        return Err(CheckError::Model(format!(
            "model `{}`: partial-order reduction (--por) runs on one core; use --jobs 1 with it",
            model.name
        )));
    }
    let coord = Coord::new(jobs, model.width).map_err(|e| {
        CheckError::Isolation(format!("cannot map the workers' shared memory: {e}"))
    })?;
    let watch = isolate::Watch {
        transition_timeout: model.transition_timeout,
        deadline: model
            .bounds
            .time_limit
            .map(|t| start + t + Duration::from_secs(1)),
    };
    let ends = isolate::run_in_children(
        watch,
        jobs,
        |worker| {
            fault_for(worker);
            let par = Par {
                coord: &coord,
                worker,
            };
            let result = super::searcher::search(model, Some(par), false, None, None)
                .map_err(|e| e.to_string());
            serde_json::to_string(&result).expect("a result always serialises")
        },
        || coord.halt(),
    )
    .map_err(|e| CheckError::Isolation(format!("cannot start the workers: {e}")))?;
    let mut parts = Vec::with_capacity(jobs);
    for end in ends {
        match end {
            ChildEnd::Finished(text) => {
                let result: Result<CheckResult, String> =
                    serde_json::from_str(&text).map_err(|e| {
                        CheckError::Isolation(format!("unreadable result from a worker: {e}"))
                    })?;
                parts.push(result.map_err(CheckError::Isolation)?);
            }
            ChildEnd::Ended(ended) => {
                parts.push(super::searcher::ended_result(model, watch, ended, start)?)
            }
        }
    }
    let complete = parts.len() == jobs && parts.iter().all(|p| p.stats.complete);
    let mut merged = merge(model, parts);
    merged.stats.complete = complete;
    let eventually = crate::engine::property_fns(model)
        .iter()
        .any(|p| p.kind == crate::model::PropertyKind::Eventually);
    if complete && eventually {
        // Liveness needs the graph in one process: one more child checks
        // it, as a one-worker search would after its search.
        let live = match isolate::run_in_child(watch, || {
            let result =
                super::searcher::search(model, None, true, None, None).map_err(|e| e.to_string());
            serde_json::to_string(&result).expect("a result always serialises")
        })
        .map_err(|e| CheckError::Isolation(format!("cannot start the liveness check: {e}")))?
        {
            ChildEnd::Finished(text) => {
                let result: Result<CheckResult, String> =
                    serde_json::from_str(&text).map_err(|e| {
                        CheckError::Isolation(format!("unreadable liveness result: {e}"))
                    })?;
                result.map_err(CheckError::Isolation)?
            }
            ChildEnd::Ended(ended) => super::searcher::ended_result(model, watch, ended, start)?,
        };
        merged.stats.liveness_transitions += live.stats.liveness_transitions;
        if !live.violations.is_empty() {
            merged.verdict = Verdict::Violation;
        }
        merged.violations.extend(live.violations);
    }
    super::searcher::never_reached(model, &mut merged);
    if model.strategy == Strategy::Walk {
        merged.stats.unique = coord.sketch_estimate();
    } else if merged.verdict == Verdict::Pass {
        assert_eq!(
            merged.stats.unique + merged.stats.pruned,
            coord.visited.len(),
            "a complete parallel search claimed each visited state once"
        );
    }
    merged.stats.elapsed = start.elapsed();
    merged.stats.jobs = jobs;
    // Each worker counted the shared set; it is held once.
    merged.stats.memory.visited = coord.visited.memory_bytes() as u64;
    Ok(merged)
}

/// Fault injection for tests: `CMC_FAULT_DIE_HOLDING_LOCK=W:K` kills
/// worker `W` while it holds the `K`-th lock of the shared memory it takes
/// (see [`crate::sys::shm::die_holding_lock`]).
fn fault_for(worker: usize) {
    let Ok(spec) = std::env::var("CMC_FAULT_DIE_HOLDING_LOCK") else {
        return;
    };
    let parsed = spec
        .split_once(':')
        .and_then(|(w, k)| Some((w.parse::<usize>().ok()?, k.parse::<u64>().ok()?)));
    match parsed {
        Some((w, k)) if w == worker => crate::sys::shm::die_holding_lock(k),
        Some(_) => {}
        None => panic!("CMC_FAULT_DIE_HOLDING_LOCK is W:K (a worker and a count), not {spec:?}"),
    }
}

/// One result from the workers' results: their violations (each distinct
/// one once, with its shortest trace), their figures added up, the
/// gravest verdict.
pub(super) fn merge(model: &Model<P>, parts: Vec<CheckResult>) -> CheckResult {
    let mut stats = Stats::default();
    let mut violations: Vec<crate::engine::trace::Violation> = Vec::new();
    let mut reached: Vec<crate::engine::trace::Reached> = Vec::new();
    let mut stopped = None;
    let mut sources = Vec::new();
    let mut handlers: Vec<crate::engine::trace::HandlerUse> = Vec::new();
    let rank = |v: Verdict| match v {
        Verdict::Violation => 3,
        Verdict::Interrupted => 2,
        Verdict::Bounded => 1,
        _ => 0,
    };
    let mut verdict = Verdict::Pass;
    for part in parts {
        let s = &part.stats;
        stats.generated += s.generated;
        stats.unique += s.unique;
        stats.transitions += s.transitions;
        stats.replayed += s.replayed;
        stats.cached += s.cached;
        stats.derived += s.derived;
        stats.max_depth = stats.max_depth.max(s.max_depth);
        stats.peak_frontier += s.peak_frontier;
        stats.pruned += s.pruned;
        stats.pages += s.pages;
        stats.page_bytes += s.page_bytes;
        stats.peak_memory_bytes += s.peak_memory_bytes;
        stats.memory.add(&s.memory);
        stats.walks += s.walks;
        stats.sent_states += s.sent_states;
        stats.sent_bytes += s.sent_bytes;
        stats.sent_raw_bytes += s.sent_raw_bytes;
        stats.liveness_transitions += s.liveness_transitions;
        stats.fingerprint = stats.fingerprint.or(s.fingerprint);
        if let Some(w) = s.symmetry {
            let total = stats
                .symmetry
                .get_or_insert(crate::engine::trace::SymmetryStats {
                    processes: w.processes,
                    ..Default::default()
                });
            total.merged += w.merged;
            total.checked += w.checked;
            total.inexact += w.inexact;
        }
        if handlers.is_empty() {
            handlers = part.handlers.clone();
        } else {
            for (total, h) in handlers.iter_mut().zip(&part.handlers) {
                total.enabled += h.enabled;
            }
        }
        if rank(part.verdict) > rank(verdict) {
            verdict = part.verdict;
        }
        // The reason the search stopped: the first worker's, but a worker
        // that stopped only because another ended (it was abandoned, or
        // found the other had ended holding a lock) gives way to the
        // reason the other ended.
        let consequence = |m: &Option<String>| {
            m.as_deref().is_some_and(|m| {
                m.contains(crate::engine::ABANDONED) || m.contains(crate::sys::shm::HOLDER_ENDED)
            })
        };
        if part.verdict != Verdict::Pass
            && (stopped.is_none() || (consequence(&stopped) && !consequence(&part.stopped)))
            && part.stopped.is_some()
        {
            stopped = part.stopped.clone();
        }
        if sources.is_empty() {
            sources = part.sources;
        }
        for r in part.reached {
            match reached
                .iter_mut()
                .find(|x: &&mut crate::engine::trace::Reached| x.property == r.property)
            {
                Some(x) if r.trace.len() < x.trace.len() => *x = r,
                Some(_) => {}
                None => reached.push(r),
            }
        }
        for v in part.violations {
            let key = |x: &crate::engine::trace::Violation| {
                (
                    x.record.kind,
                    x.record.property.clone(),
                    x.record.location.clone(),
                )
            };
            match violations.iter_mut().find(|w| key(w) == key(&v)) {
                Some(w) if v.trace.len() < w.trace.len() => *w = v,
                Some(_) => {}
                None => violations.push(v),
            }
        }
    }
    if !violations.is_empty() {
        verdict = Verdict::Violation;
    }
    CheckResult {
        model: model.name.clone(),
        verdict,
        violations,
        reached,
        stats,
        sources,
        stopped,
        handlers,
    }
}
