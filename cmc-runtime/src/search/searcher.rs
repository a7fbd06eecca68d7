//! One search on one worker: the [`Search`] state (frontier, visited set,
//! caches, statistics) and its main loop; the strategies' expansion
//! (`expand`, `walk`, `properties`) and the parallel workers' methods
//! (`parallel`) are `impl Search` blocks of their own files.

use crate::engine::erased::kind_of;
use crate::engine::erased::Erased as P;
use std::collections::HashSet;
use std::time::Instant;

use crate::engine::isolate::{self, ChildEnd};
use crate::engine::trace::{
    CheckResult, Stats, Trace, Verdict, Violation, ViolationKind, ViolationRecord,
};
use crate::engine::tree::NO_PARENT;
use crate::engine::{
    bare_trace, culprit, human_bytes, trace_of, CheckError, Engine, Event, Names, RawStep,
    SetupFailure, ENV,
};
use crate::identity::visited::Visited;
use crate::model::{Model, Strategy};
use crate::sys::scope::system_scope;

use super::coord::Par;
use super::frontier::{Frontier, Item};

/// A search in progress: the engine it drives, the visited set, the
/// frontier, the statistics, what bounded or interrupted it, and the
/// violations found.
pub(super) struct Search<'e, 'm, P: crate::model::Process> {
    pub(super) engine: &'e mut Engine<'m, P>,
    pub(super) visited: Seen<'e>,
    /// This worker's place in a parallel search, if it is one.
    pub(super) par: Option<Par<'e>>,
    /// The search tree's node of the initial state.
    pub(super) root: u32,
    pub(super) frontier: Frontier,
    pub(super) stats: Stats,
    pub(super) bounded: bool,
    /// What bounded the search, when something did.
    pub(super) bounded_by: Option<String>,
    /// The signal that interrupted the search, if one did.
    pub(super) interrupted: Option<i32>,
    /// The memory budget in bytes, if any.
    pub(super) budget: Option<u64>,
    /// The transition count when memory was last looked at.
    pub(super) memory_checked: u64,
    /// The bytes the stored states held at the last reading (see
    /// [`Search::stored_bytes`]).
    pub(super) memory_checked_bytes: usize,
    /// `memory::arena::taken()` at the last reading.
    pub(super) memory_checked_taken: u64,
    /// A worker of a parallel search: its resident memory less its
    /// proportional memory at the last reading of the latter (the part of
    /// the pages it shares that the other workers hold), and the largest
    /// proportional memory read (see [`Search::held_bytes`]).
    pub(super) shared_offset: u64,
    pub(super) peak_held: u64,
    pub(super) pss_reads: u32,
    /// A reason to stop was found ([`Search::stop_requested`]).
    pub(super) stopping: bool,
    pub(super) violations: Vec<Violation>,
    pub(super) seen_violations: HashSet<(ViolationKind, String, Option<String>)>,
    pub(super) start: Instant,
    pub(super) last_progress: Instant,
    /// Calls of `maybe_report_progress`.
    pub(super) progress_ticks: u32,
    /// Calls of `stop_requested`.
    pub(super) stop_ticks: u32,
    /// An error that ends the search without a result.
    pub(super) fatal: Option<CheckError>,
    /// Set by a violation after which the search cannot go on, even with
    /// keep-going: a thread of user code outlived its handler.
    pub(super) halted: bool,
    /// The states this search expanded from guards it evaluated (not
    /// from the guard cache): the sample whose guards are evaluated again
    /// after their transitions (see `Search::expand`).
    pub(super) evaluated: u64,
    /// The `sometimes` properties (indices into the engine's) this search
    /// has not seen hold yet.
    pub(super) unreached: Vec<usize>,
    /// Those it has, with their witnesses.
    pub(super) reached: Vec<crate::engine::trace::Reached>,
    /// Partial-order reduction's sleep sets, when it is on.
    pub(super) sleep: Option<super::sleep::SleepSets>,
    /// The footprint of the last transition run.
    pub(super) last_print: crate::model::por::Footprint,
    /// The transition cache, when the search may use it (see `transition_cache`).
    pub(super) cache: Option<super::transition_cache::TransitionCache>,
    /// The guard cache, with the transition cache when there are at most
    /// 64 handlers (see `super::transition_cache::GuardCache`).
    pub(super) guards: Option<super::transition_cache::GuardCache>,
    /// The state whose processes' key prefixes `prefixes` holds (one per
    /// process, then the environment's), if any.
    pub(super) keyed: Option<crate::memory::StateId>,
    pub(super) prefixes: Vec<super::transition_cache::Prefix>,
    /// The hash of each handler's event with no choices and the first
    /// random seed (see `super::transition_cache::TransitionCache::event_hash`).
    pub(super) plain_events: Vec<u128>,
    /// The cache keys of the expanded state's events' first runs (kept
    /// for its memory).
    pub(super) first_keys: Vec<(Option<u128>, Option<super::transition_cache::Known>)>,
    /// The buffer of the events the guard cache gives an expansion.
    pub(super) events_buf: Vec<Event>,
    /// Under a depth bound, in an order that can reach a state by a longer
    /// path first (depth-first, random, best-first): the smallest depth
    /// each state was reached at, so that a shorter path reaching it later
    /// expands it again with the depth it has left (see
    /// `Search::arrived_again`).
    pub(super) depths: Option<DepthMap>,
    /// The bytes of the guided walks' table of explored states (counted
    /// as the visited set's: it is what they keep instead).
    pub(super) explored_bytes: usize,
    /// The check of the declared symmetry, under symmetry reduction.
    pub(super) twins: Option<super::twins::Twins>,
    /// The path to the image of the next reported violation's state (a
    /// violation of the declared symmetry), for its trace.
    pub(super) twin_path: Vec<crate::engine::trace::PathRun>,
    /// This process's side of a search across processes, if it is one.
    pub(super) cluster: Option<super::partition::Part>,
    /// This process's part in a swarm of walks across processes (see
    /// `search::swarm`).
    pub(super) swarm: Option<super::swarm::Swarm>,
}

/// Fingerprints to the smallest depth their state was reached at.
pub(super) type DepthMap = hashbrown::HashMap<
    crate::memory::Fingerprint,
    u32,
    std::hash::BuildHasherDefault<crate::identity::visited::IdentityHasher>,
>;

/// The visited set: this process's own, or the one the workers of a
/// parallel search share.
pub(super) enum Seen<'c> {
    Local(Visited),
    Shared(&'c crate::identity::visited::SharedVisited, bool),
    /// This process's part of a search across processes.
    Cluster(super::partition::Partition<'c>),
}

impl Seen<'_> {
    /// Adds a fingerprint to the visited set: true when it was new (and,
    /// in a parallel search, this worker claimed its state). A shared set
    /// that cannot grow says no, and remembers it: the search stops,
    /// bounded (see `stop_requested`).
    /// Whether a fingerprint is in the visited set.
    pub(super) fn contains(&self, fp: crate::memory::Fingerprint) -> bool {
        match self {
            Seen::Local(v) => v.contains(fp),
            Seen::Shared(v, _) => v.contains(fp),
            Seen::Cluster(p) => p.contains(fp),
        }
    }

    /// Starts loading what a lookup of `fp` reads (see
    /// [`crate::identity::visited::Visited::prefetch`]).
    pub(super) fn prefetch(&self, fp: crate::memory::Fingerprint) {
        match self {
            Seen::Local(v) => v.prefetch(fp),
            Seen::Shared(v, _) => v.prefetch(fp),
            Seen::Cluster(p) => p.prefetch(fp),
        }
    }

    pub(super) fn insert(&mut self, fp: crate::memory::Fingerprint) -> bool {
        match self {
            Seen::Local(v) => v.insert(fp),
            Seen::Cluster(p) => p.insert(fp),
            Seen::Shared(v, full) => match v.insert(fp) {
                Ok(new) => new,
                Err(crate::identity::visited::Full) => {
                    *full = true;
                    false
                }
            },
        }
    }
}

impl Search<'_, '_, P> {
    pub(super) fn visited_bytes(&self) -> usize {
        self.explored_bytes
            + self.engine.links_bytes()
            + match &self.visited {
                Seen::Local(v) => v.memory_bytes(),
                Seen::Shared(v, _) => v.memory_bytes(),
                Seen::Cluster(p) => p.memory_bytes(),
            }
    }

    /// Where this worker's memory is now, by owner, with its resident
    /// memory `resident`.
    pub(super) fn memory_use(&self, resident: u64) -> crate::engine::trace::MemoryUse {
        let mem = self.engine.memory_stats();
        let caches = self.cache.as_ref().map_or(0, |c| c.bytes())
            + self.guards.as_ref().map_or(0, |g| g.bytes())
            + self.sleep.as_ref().map_or(0, |s| s.bytes())
            + self.depths.as_ref().map_or(0, |d| {
                d.capacity() * (size_of::<crate::memory::Fingerprint>() + size_of::<u32>() + 1)
            });
        crate::engine::trace::MemoryUse {
            resident,
            states: self.stats.unique,
            visited: self.visited_bytes() as u64,
            frontier: self.frontier.bytes() as u64,
            records: mem.record_bytes as u64,
            pages: mem.page_bytes as u64,
            page_index: mem.page_overhead_bytes as u64,
            tree: self.engine.tree_bytes() as u64,
            caches: caches as u64,
            disk: self.frontier.disk().1,
            disk_peak: self.frontier.disk().2,
            disk_entries: self.frontier.disk().3,
        }
    }

    /// The bytes the stored states hold now: their pages and records.
    fn stored_bytes(&self) -> usize {
        let m = self.engine.memory_stats();
        m.page_bytes + m.record_bytes
    }

    /// The memory this search holds, from its resident memory `rss`: all
    /// of it on one worker; on several, this worker's proportional share
    /// (PSS), so that the workers' figures add up to what they hold
    /// together and a worker is not stopped for pages the others hold as
    /// well. The proportional memory is read when the estimate from the
    /// last reading nears the worker's budget, and every 16th time anyway.
    fn held_bytes(&mut self, rss: u64) -> u64 {
        if self.par.is_none() {
            return rss;
        }
        self.pss_reads = self.pss_reads.wrapping_add(1);
        let estimate = rss.saturating_sub(self.shared_offset);
        let near = self.budget.is_some_and(|b| estimate >= b / 8 * 7);
        if near || self.pss_reads % 16 == 1 {
            if let Some(pss) = super::progress::proportional_bytes() {
                self.shared_offset = rss.saturating_sub(pss);
                self.peak_held = self.peak_held.max(pss);
                return pss;
            }
        }
        self.peak_held = self.peak_held.max(estimate);
        estimate
    }

    /// Reads the memory held (see [`Search::held_bytes`]) and keeps the
    /// reading, by owner, if it is the largest so far; returns it.
    pub(super) fn sample_memory(&mut self) -> u64 {
        let rss = super::progress::resident_bytes();
        let rss = self.held_bytes(rss);
        // The first reading at the largest figure: the resident memory
        // does not shrink when structures do, so a later reading at the
        // same figure would count what was freed as no one's.
        if rss > self.stats.memory.resident {
            self.stats.memory = self.memory_use(rss);
        } else {
            // What went to disk is counted to the end.
            let (_, _, peak, entries) = self.frontier.disk();
            self.stats.memory.disk_peak = peak;
            self.stats.memory.disk_entries = entries;
        }
        rss
    }

    /// Whether the search must stop now. Called before every transition:
    /// what it must see at once (an error, a violation, the state bound) is
    /// checked every call, the rest (signals, a full tree or shared set,
    /// another worker's halt, memory, time) every 64th.
    #[inline]
    pub(super) fn stop_requested(&mut self) -> bool {
        if self.fatal.is_some() || self.halted || self.stopping {
            return true;
        }
        self.stop_ticks = self.stop_ticks.wrapping_add(1);
        if self.stop_ticks % 64 != 0 && !self.memory_due() {
            return self.state_bound_reached()
                || (self.found_violation() && !self.engine.model().keep_going);
        }
        // Every reason to stop is for good (a bound, the budget, the time,
        // a signal): remembered, so that the calls in between see it too.
        // Forgotten, a search whose states have many transitions (a
        // `choose(25)`) went on past its memory budget and its time limit
        // between one 64th call and the next.
        self.stopping = self.stop_requested_now();
        self.stopping
    }

    /// Whether memory taken since the last reading of the resident memory
    /// (arena pages committed, large allocations: see
    /// `memory::arena::taken`) calls for a reading now, before the next
    /// transition: a transition that allocates a lot is seen at once, not
    /// at the next sampled check. One atomic load.
    #[inline]
    fn memory_due(&self) -> bool {
        self.budget
            .is_some_and(|b| crate::memory::arena::taken() > self.memory_checked_taken + b / 64)
    }

    /// [`Search::stop_requested`]'s checks of every 64th call.
    #[inline(never)]
    pub(super) fn stop_requested_now(&mut self) -> bool {
        if matches!(self.visited, Seen::Shared(_, true))
            || matches!(&self.visited, Seen::Cluster(p) if p.full)
        {
            self.bounded = true;
            self.bounded_by.get_or_insert_with(|| {
                "the workers' shared visited set has no room left".to_string()
            });
            return true;
        }
        if let Some(swarm) = &mut self.swarm {
            let found = !self.violations.is_empty() && !self.engine.model().keep_going;
            if swarm.poll(self.stats.walks, found) && !found {
                // Another process found a violation, or stopped: it says
                // so in its own result.
                self.halted = true;
                return true;
            }
        }
        if let Some(par) = self.par {
            if par.coord.halted() {
                // Another worker found what ends the search, or reached a
                // bound, or crashed: it says so in its own result.
                self.halted = true;
                return true;
            }
        }
        if let Some(signal) = isolate::stop_signal() {
            self.interrupted = Some(signal);
            return true;
        }
        if self.engine.tree_full() {
            self.bounded = true;
            self.bounded_by = Some(format!(
                "the search tree is full: it has room for {} states",
                self.engine.tree_room()
            ));
            return true;
        }
        if self.state_bound_reached() {
            return true;
        }
        let b = &self.engine.model().bounds;
        // The resident memory is read every 4096 transitions, and sooner
        // when the stored states grew by a 64th of the budget since the
        // last reading (large states: a few transitions can take what
        // 4096 small ones take).
        let stored = self.stored_bytes();
        let grown = stored.saturating_sub(self.memory_checked_bytes) as u64;
        let soon = self.budget.is_some_and(|b| grown > b / 64) || self.memory_due();
        if self.stats.transitions >= self.memory_checked + 4096 || soon {
            self.memory_checked = self.stats.transitions;
            self.memory_checked_bytes = stored;
            self.memory_checked_taken = crate::memory::arena::taken();
            let rss = self.sample_memory();
            if let Some(budget) = self.budget {
                if rss > budget {
                    let workers = self.par.map_or(1, |p| p.coord.workers as u64);
                    self.bounded = true;
                    self.bounded_by = Some(if workers > 1 {
                        format!(
                            "the memory budget ({}) was reached: a worker holds {}, its share \
                             with {workers} workers (--max-memory changes it)",
                            human_bytes(budget * workers),
                            human_bytes(rss)
                        )
                    } else {
                        format!(
                            "the memory budget ({}) was reached: the search process holds {} \
                             (--max-memory changes it)",
                            human_bytes(budget),
                            human_bytes(rss)
                        )
                    });
                    return true;
                }
            }
        }
        if let Some(t) = b.time_limit.filter(|&t| self.start.elapsed() >= t) {
            self.bounded = true;
            self.bounded_by = Some(format!(
                "the time limit ({:.1} s) was reached",
                t.as_secs_f64()
            ));
            return true;
        }
        self.found_violation() && !self.engine.model().keep_going
    }

    /// Whether the bound on unique states is reached (and the search
    /// bounded by it).
    #[inline]
    pub(super) fn state_bound_reached(&mut self) -> bool {
        let Some(m) = self.engine.model().bounds.max_states else {
            return false;
        };
        let unique = match self.par {
            _ if self.cluster.is_some() => self.cluster_unique(),
            Some(par) if self.stats.transitions % 64 == 0 => par.coord.totals().0,
            Some(_) => 0,
            None => self.stats.unique,
        };
        if unique < m as u64 {
            return false;
        }
        self.bounded = true;
        self.bounded_by = Some(format!("the state bound ({m}) was reached"));
        true
    }

    pub(super) fn report(&mut self, steps: Vec<RawStep>, record: ViolationRecord) {
        let twin = std::mem::take(&mut self.twin_path);
        let key = (
            record.kind,
            record.property.clone(),
            record.location.clone(),
        );
        if !self.seen_violations.insert(key) {
            return;
        }
        if self.cluster.is_some() {
            // Its path may start in another process: the trace is built
            // once the search is over (see `Search::resolve_traces`).
            self.defer(steps, record, false);
            return;
        }
        isolate::phase(isolate::IN_CHECKER, 0, 0, 0, 0);
        let mut trace = self.engine.build_trace(&steps, record.clone());
        trace.twin = twin;
        let violation = Violation { record, trace };
        if isolate::isolated() {
            // Sent at once: found is kept, whatever the child does later.
            let _sys = system_scope();
            isolate::stream(&serde_json::to_string(&violation).expect("a violation serialises"));
        }
        self.violations.push(violation);
        if let Some(par) = self.par {
            if !self.engine.model().keep_going {
                par.coord.halt();
            }
        }
    }

    /// Whether the search goes on past a state that violates an
    /// invariant: with keep-going under partial-order reduction, whose
    /// sleep sets count on every successor being explored (a path through
    /// a violation may be the one order of commuting events that covers
    /// the states beyond it).
    pub(super) fn past_violations(&self) -> bool {
        self.sleep.is_some() && self.engine.model().keep_going
    }

    pub(super) fn run(&mut self) {
        let initial = self.engine.initial();
        let Some(root) = self.engine.record_node(
            NO_PARENT,
            Event {
                actor: ENV,
                handler: 0,
            },
            &[],
            0,
        ) else {
            self.stop_requested();
            return;
        };
        let fp = match self.engine.state_fingerprint(initial) {
            Ok(fp) => fp,
            Err(record) => {
                self.report(Vec::new(), record);
                return;
            }
        };
        self.root = root;
        // In a parallel search every worker builds the initial state; the
        // one that claims it starts, the others wait for work. Across
        // processes, the one that owns it starts.
        let claimed = self.visited.insert(fp) && self.owns(fp);
        self.stats.unique = u64::from(claimed);
        self.engine.set_node(root);
        if let Some(record) = self.engine.check_state() {
            if claimed {
                self.report(Vec::new(), record);
            }
            if !self.past_violations() {
                return;
            }
        }
        if claimed && !self.unreached.is_empty() {
            self.note_sometimes(root, initial);
        }
        if self.engine.model().strategy == Strategy::Walk {
            self.walk(root, fp);
            isolate::phase(isolate::IN_CHECKER, 0, 0, 0, 0);
            return;
        }
        if claimed {
            self.engine.retain(initial);
            let priority = self.priority();
            self.frontier.push(
                Item {
                    node: root,
                    state: initial,
                    depth: 0,
                },
                priority,
                &mut *self.engine,
            );
        }
        if self.cluster.is_some() {
            self.run_cluster_levels();
            self.release_links();
            self.maybe_report_progress();
            self.sample_memory();
            isolate::phase(isolate::IN_CHECKER, 0, 0, 0, 0);
            self.frontier.clear(&mut *self.engine);
            return;
        }
        if let Some(par) = self.par {
            if self.engine.model().strategy == Strategy::Bfs {
                self.run_shared_levels(par);
            } else {
                self.run_shared_stack(par);
            }
            let done = self.fatal.is_none()
                && !self.halted
                && !self.bounded
                && self.interrupted.is_none()
                && (self.violations.is_empty() || self.engine.model().keep_going);
            if !done {
                par.coord.halt();
            }
            self.maybe_report_progress();
            // The last reading, before the frontier is given back: the
            // largest may be now.
            self.sample_memory();
            isolate::phase(isolate::IN_CHECKER, 0, 0, 0, 0);
            self.frontier.clear(&mut *self.engine);
            return;
        }
        while !self.stop_requested() {
            let Some(item) = self.frontier.pop(&mut *self.engine) else {
                break;
            };
            if let Frontier::Stack(_) = self.frontier {
                // Depth-first: the tree needs only the nodes up to this one
                // (see `Tree::truncate`), so it stays as small as the
                // stack.
                self.truncate_tree(item.node as usize + 1);
            }
            self.expand(&item);
            self.engine.release(item.state);
            self.maybe_report_progress();
        }
        // The last reading, before the frontier is given back: the
        // largest may be now.
        self.sample_memory();
        isolate::phase(isolate::IN_CHECKER, 0, 0, 0, 0);
        self.frontier.clear(&mut *self.engine);
    }

    /// The liveness check alone, after a parallel search.
    pub(super) fn run_liveness_only(&mut self) {
        let Some(root) = self.engine.record_node(
            NO_PARENT,
            Event {
                actor: ENV,
                handler: 0,
            },
            &[],
            0,
        ) else {
            return;
        };
        self.root = root;
        self.liveness();
        isolate::phase(isolate::IN_CHECKER, 0, 0, 0, 0);
    }

    pub(super) fn maybe_report_progress(&mut self) {
        if let Some(par) = self.par {
            par.coord
                .publish(par.worker, &self.stats, self.frontier.len());
        }
        // The clock is read every sixteenth call (a call is a state
        // expanded).
        self.progress_ticks = self.progress_ticks.wrapping_add(1);
        if self.progress_ticks % 16 != 0
            || self.last_progress.elapsed() < super::progress::interval()
        {
            return;
        }
        self.last_progress = Instant::now();
        let (unique, transitions, max_depth, frontier) = match self.par {
            // The first worker speaks for all.
            Some(par) if par.worker != 0 => return,
            // Across processes: the figures of all at the last round.
            _ if self.cluster.is_some() => {
                let part = self.cluster.as_ref().expect("a search across processes");
                (
                    self.cluster_unique(),
                    part.all_transitions.max(self.stats.transitions),
                    self.stats.max_depth,
                    part.all_frontier as usize,
                )
            }
            // Walks: this worker's sketch (the others' merge at the end).
            Some(par) if self.engine.model().strategy != Strategy::Walk => {
                let (u, t, d, f) = par.coord.totals();
                (u, t, d as usize, f as usize)
            }
            _ => (
                self.stats.unique,
                self.stats.transitions,
                self.stats.max_depth,
                self.frontier.len(),
            ),
        };
        let mem = self.engine.memory_stats();
        super::progress::report(&super::progress::Progress {
            model: self.engine.model().name.clone(),
            unique,
            transitions,
            max_depth,
            frontier,
            memory_bytes: super::progress::resident_bytes() as usize,
            visited_bytes: self.visited_bytes(),
            page_bytes: mem.page_bytes,
            budget_bytes: self.budget.unwrap_or(0),
            disk_bytes: self.frontier.disk().1,
            elapsed_s: self.start.elapsed().as_secs_f64(),
            symmetric: match &self.twins {
                Some(_) => self
                    .engine
                    .model()
                    .symmetry
                    .iter()
                    .map(|g| g.processes.len())
                    .sum(),
                None => 0,
            },
            merged: self.twins.as_ref().map_or(0, |t| t.merged),
            processes: self.cluster.as_ref().map_or(0, |c| c.processes()),
            sent_bytes: self.cluster.as_ref().map_or(0, |c| c.all_sent_bytes),
            slowest: self.cluster.as_ref().and_then(|c| c.slowest),
        });
    }

    pub(super) fn priority(&self) -> i64 {
        match &self.engine.model().priority {
            Some(f) => {
                let _sys = system_scope();
                f(&self.engine.world())
            }
            None => 0,
        }
    }
}

/// Settings that cannot make a search: a random walk with nothing to end
/// it.
pub(super) fn settings(model: &Model<P>) -> Result<(), CheckError> {
    let b = &model.bounds;
    if model.strategy == Strategy::BestFirst && model.priority.is_none() {
        return Err(CheckError::Model(format!(
            "model `{}`: best-first search needs a priority (Model::priority); without one \
             it would be breadth-first search: ask for --strategy bfs",
            model.name
        )));
    }
    if model.seed_given && !matches!(model.strategy, Strategy::Random | Strategy::Walk) {
        return Err(CheckError::Model(format!(
            "model `{}`: --seed chooses the order of --strategy random and the walks of \
             --strategy walk; the {} search does not use it",
            model.name,
            match model.strategy {
                Strategy::Bfs => "breadth-first",
                Strategy::BestFirst => "best-first",
                _ => "depth-first",
            }
        )));
    }
    let registered = kind_of(model).registered_invariants();
    for name in &model.without {
        if !registered.iter().any(|(n, _)| n == name) {
            return Err(CheckError::Model(format!(
                "model `{}` leaves out the invariant `{name}`, but no global invariant of that \
                 name is registered for its process type{}",
                model.name,
                if registered.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (registered: {})",
                        registered
                            .iter()
                            .map(|(n, _)| *n)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            )));
        }
    }
    if model.por && model.prune.is_some() {
        return Err(CheckError::Model(format!(
            "model `{}`: partial-order reduction (--por) cannot be combined with a prune \
             predicate over the whole world (Model::prune): the one order of commuting events \
             it explores may pass through a pruned state; a bound that reads one process at a \
             time (Model::prune_process) combines with it",
            model.name
        )));
    }
    if model.por && model.strategy == Strategy::Walk {
        return Err(CheckError::Model(format!(
            "model `{}`: partial-order reduction (--por) prunes an exhaustive search; random \
             walks (--strategy walk) store nothing it could use",
            model.name
        )));
    }
    if let (Strategy::Walk, Some(flag)) = (model.strategy, model.visited_flags.first()) {
        return Err(CheckError::Model(format!(
            "model `{}`: {flag} sets how the visited set stores and skips states; random \
             walks (--strategy walk) keep no visited set",
            model.name
        )));
    }
    if model.strategy == Strategy::Walk && b.time_limit.is_none() && b.max_walks.is_none() {
        return Err(CheckError::Model(format!(
            "model `{}`: a random-walk search never ends by itself; give it a time limit \
             (--time-limit) or a number of walks (--walks)",
            model.name
        )));
    }
    Ok(())
}

/// Checks a model in this process, alone or as one worker of a parallel
/// search.
pub(super) fn search(
    model: &Model<P>,
    par: Option<Par<'_>>,
    liveness_only: bool,
    cluster: Option<super::partition::Part>,
    swarm: Option<super::swarm::Swarm>,
) -> Result<CheckResult, CheckError> {
    let start = Instant::now();
    settings(model)?;
    let mut engine = match Engine::new(model, model.fingerprint) {
        Ok(engine) => engine,
        Err(SetupFailure::Error(e)) => return Err(e),
        Err(SetupFailure::Violation(record)) => {
            let trace = trace_of(
                model,
                model.fingerprint,
                Vec::new(),
                String::new(),
                Vec::new(),
                record.clone(),
            );
            return Ok(CheckResult {
                model: model.name.clone(),
                verdict: Verdict::Violation,
                violations: vec![Violation { record, trace }],
                stats: Stats {
                    elapsed: start.elapsed(),
                    ..Stats::default()
                },
                sources: Vec::new(),
                stopped: None,
                reached: Vec::new(),
                handlers: Vec::new(),
            });
        }
    };
    let unreached = (0..engine.properties().len())
        .filter(|&k| engine.properties()[k].kind == crate::model::PropertyKind::Sometimes)
        .collect();
    let mut search = Search {
        unreached,
        reached: Vec::new(),
        visited: match (par, &cluster) {
            (Some(par), Some(c)) => Seen::Cluster(super::partition::Partition::shared(
                &par.coord.visited,
                par.worker == 0,
                c.process(),
                c.processes(),
            )),
            (Some(par), None) => Seen::Shared(&par.coord.visited, false),
            (None, Some(c)) => Seen::Cluster(super::partition::Partition::new(
                model.width,
                c.process(),
                c.processes(),
            )),
            (None, None) => Seen::Local(Visited::new(model.width)),
        },
        par,
        root: 0,
        frontier: Frontier::new(
            model.strategy,
            match par {
                // Each worker its own random order.
                Some(par) => model.seed ^ crate::sys::hash::fmix64(par.worker as u64 + 1),
                None => model.seed,
            },
            // Sleep sets know the frontier's states by id, which a state
            // written to disk and read back does not keep.
            if model.por && par.is_none() {
                Some(usize::MAX)
            } else {
                model.frontier_in_memory
            },
        ),
        stats: Stats::default(),
        bounded: false,
        bounded_by: None,
        interrupted: None,
        // Shared among the workers of a parallel search.
        budget: match model.bounds.max_memory {
            Some(0) => None,
            Some(b) => Some(b),
            None => super::progress::default_budget(),
        }
        .map(|b| b / par.map_or(1, |p| p.coord.workers as u64)),
        memory_checked: 0,
        memory_checked_bytes: 0,
        memory_checked_taken: 0,
        shared_offset: 0,
        peak_held: 0,
        pss_reads: 0,
        stopping: false,
        violations: Vec::new(),
        seen_violations: HashSet::new(),
        start,
        last_progress: start,
        progress_ticks: 0,
        stop_ticks: 0,
        fatal: None,
        halted: false,
        evaluated: 0,
        sleep: (model.por && par.is_none())
            .then(|| super::sleep::SleepSets::new(model.network.capacity)),
        last_print: crate::model::por::Footprint::default(),
        // Only where a run's successor is fingerprinted before it is
        // captured (identity by meaning, no determinism check), without
        // sleep sets (which need every run's footprint) and with seeded
        // randomness (so that a run that drew can tell).
        // Not under symmetry reduction, whose fingerprint is no sum of
        // components a transition changes one of.
        cache: (model.transition_cache
            && !model.por
            && !engine.symmetric()
            && engine.lazy_capture()
            && crate::determinism::random::enabled())
        .then(|| super::transition_cache::TransitionCache::new(super::transition_cache::BYTES)),
        guards: None,
        keyed: None,
        prefixes: Vec::new(),
        plain_events: (0..engine.handlers().len().max(crate::engine::ENV_EVENTS.len()))
            .map(|h| super::transition_cache::TransitionCache::event_hash(h, &[], 0))
            .collect(),
        first_keys: Vec::new(),
        events_buf: Vec::new(),
        explored_bytes: 0,
        // Not across processes: a state's twin may be another's.
        twins: (engine.symmetric() && cluster.is_none())
            .then(|| super::twins::Twins::new(model.check_symmetry)),
        twin_path: Vec::new(),
        depths: (model.bounds.max_depth.is_some()
            && matches!(
                model.strategy,
                Strategy::Dfs | Strategy::Random | Strategy::BestFirst
            )
            && par.is_none())
        .then(DepthMap::default),
        cluster,
        swarm,
        engine: &mut engine,
    };
    if search.cluster.is_some() {
        search.engine.enable_links();
    }
    if search.cache.is_some() && search.engine.handlers().len() <= 64 {
        search.guards = Some(super::transition_cache::GuardCache::new());
    }
    // The same conditions make per-process invariants a function of the
    // process's arena (see `Engine::invariant_violations`).
    let slots = if search.cache.is_some() {
        super::transition_cache::PASSED_SLOTS
    } else {
        0
    };
    search.engine.remember_passed(slots);
    let complete = if liveness_only {
        search.run_liveness_only();
        true
    } else {
        search.run();
        if search.cluster.is_some() {
            // Every process takes part, whatever it found.
            search.resolve_traces();
        }
        let complete = search.fatal.is_none()
            && !search.halted
            && !search.bounded
            && search.interrupted.is_none()
            && (search.violations.is_empty() || model.keep_going);
        // A parallel search checks liveness once its workers are done.
        if complete && par.is_none() && search.cluster.is_none() {
            search.liveness();
        }
        complete
    };
    if let Some(cache) = &mut search.cache {
        // The pages only the cache kept are not the search's.
        for t in cache.take_tables() {
            search.engine.drop_table(t);
        }
    }
    let symmetry = search.twins.take().map(|mut twins| {
        twins.release(search.engine);
        crate::engine::trace::SymmetryStats {
            processes: model.symmetry.iter().map(|g| g.processes.len()).sum(),
            merged: twins.merged,
            checked: twins.checked,
            inexact: search.engine.inexact_images(),
        }
    });
    if let Some(e) = search.fatal.take() {
        return Err(e);
    }
    // Across processes, the results are whole only once merged.
    let search_is_whole = search.cluster.is_none();
    let mut stats = search.stats;
    stats.symmetry = symmetry;
    if let Some(c) = &search.cluster {
        stats.sent_states = c.sent_states;
        stats.sent_bytes = c.sent_bytes;
        stats.sent_raw_bytes = c.raw_bytes;
    }
    let handlers = search.engine.handler_uses();
    stats.complete = complete;
    if let Some(sleep) = &search.sleep {
        stats.slept = sleep.slept;
        stats.reexpanded = sleep.reexpanded;
    }
    let mem_stats = search.engine.memory_stats();
    stats.pages = mem_stats.pages;
    stats.page_bytes = mem_stats.page_bytes;
    stats.elapsed = start.elapsed();
    stats.fingerprint = search.engine.process_mode();
    stats.peak_memory_bytes = if search.par.is_some() {
        // The workers' peaks add up (see `Search::held_bytes`); the last
        // reading counts too.
        let last = super::progress::proportional_bytes().unwrap_or(0);
        search.peak_held.max(last)
    } else {
        super::progress::peak_resident_bytes()
    };
    let stopped = match search.interrupted {
        Some(signal) => Some(format!("interrupted by {}", isolate::signal_name(signal))),
        None => search.bounded_by.take(),
    };
    let verdict = if !search.violations.is_empty() {
        Verdict::Violation
    } else if search.interrupted.is_some() {
        Verdict::Interrupted
    } else if search.bounded {
        Verdict::Bounded
    } else {
        Verdict::Pass
    };
    let mut result = CheckResult {
        model: model.name.clone(),
        verdict,
        violations: search.violations,
        reached: search.reached,
        stats,
        sources: engine.sources().to_vec(),
        stopped,
        handlers,
    };
    if par.is_none() && !liveness_only && search_is_whole {
        never_reached(model, &mut result);
    }
    Ok(result)
}

/// After a complete search, every `sometimes` property that was never
/// reached is a violation.
pub(super) fn never_reached(model: &Model<P>, result: &mut CheckResult) {
    if !result.stats.complete {
        return;
    }
    let names = Names::of(model, model.fingerprint);
    for p in crate::engine::property_fns(model) {
        if p.kind != crate::model::PropertyKind::Sometimes
            || result.reached.iter().any(|r| r.property == p.name)
            || result
                .violations
                .iter()
                .any(|v| v.record.property == p.name)
        {
            continue;
        }
        let record = ViolationRecord {
            kind: ViolationKind::NeverReached,
            property: p.name.into(),
            message: format!(
                "no reachable state satisfies `{}` (the search was complete)",
                p.name
            ),
            location: None,
        };
        let trace = bare_trace(&names, &[], record.clone());
        result.violations.push(Violation { record, trace });
        result.verdict = Verdict::Violation;
    }
}

/// The result of a check whose child ended without one: the violations it
/// streamed, the crash (or hang, or exit) with the trace that led to it,
/// its last published statistics.
pub(super) fn ended_result(
    model: &Model<P>,
    watch: isolate::Watch,
    ended: Box<isolate::Ended>,
    start: Instant,
) -> Result<CheckResult, CheckError> {
    let mut violations: Vec<Violation> = ended
        .streamed
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let published = ended.published;
    let mut stats = Stats {
        unique: published.unique,
        transitions: published.transitions,
        max_depth: published.max_depth as usize,
        generated: published.generated,
        ..Stats::default()
    };
    // Names only: building the processes here could crash this process
    // the way it crashed the child.
    let names = Names::of(model, model.fingerprint);
    let mut stopped = None;
    let verdict = match culprit(&names, &ended) {
        Ok((steps, record)) if ended.how == isolate::How::Deadline => {
            // The time limit is the user's choice, not a fault of the code
            // that was running.
            drop(steps);
            stopped = Some(format!(
                "the time limit was reached while {} was running; it was stopped",
                record
                    .message
                    .trim_end_matches(" was still running at the time limit")
            ));
            if violations.is_empty() {
                Verdict::Bounded
            } else {
                Verdict::Violation
            }
        }
        Ok((_, record)) if matches!(ended.how, isolate::How::Interrupted(..)) => {
            stopped = Some(record.message);
            if violations.is_empty() {
                Verdict::Interrupted
            } else {
                Verdict::Violation
            }
        }
        Ok((steps, record)) => {
            // Describe the steps before the culprit in another child (they
            // ran before without harm), then add the last one bare.
            let ran_last = matches!(ended.phase.kind, isolate::IN_HANDLER | isolate::IN_IDENTITY);
            let described_upto = if ran_last {
                steps.len().saturating_sub(1)
            } else {
                steps.len()
            };
            let ran = &steps[..described_upto];
            let trace = if ran.is_empty() {
                Some(bare_trace(&names, &[], record.clone()))
            } else {
                // Borrowed, not copied, into the child: a crash millions
                // of steps deep has a path of hundreds of megabytes.
                let r = record.clone();
                match isolate::run_in_child(watch, || {
                    let trace = Engine::new(model, model.fingerprint)
                        .ok()
                        .map(|mut e| e.build_trace(ran, r.clone()));
                    serde_json::to_string(&trace).expect("a trace always serialises")
                })? {
                    ChildEnd::Finished(text) => {
                        serde_json::from_str::<Option<Trace>>(&text).ok().flatten()
                    }
                    ChildEnd::Ended(_) => None,
                }
            };
            // When the steps do not behave the same again (a flaky crash),
            // keep the violation with the bare steps.
            let mut trace = trace.unwrap_or_else(|| bare_trace(&names, ran, record.clone()));
            if ran_last {
                if let Some(last) = steps.last() {
                    let mut tail = bare_trace(&names, std::slice::from_ref(last), record.clone());
                    trace.steps.append(&mut tail.steps);
                }
            }
            trace.violation = Some(record.clone());
            violations.push(Violation { record, trace });
            Verdict::Violation
        }
        Err(reason) => {
            stopped = Some(reason);
            if violations.is_empty() {
                Verdict::Interrupted
            } else {
                Verdict::Violation
            }
        }
    };
    stats.elapsed = start.elapsed();
    Ok(CheckResult {
        model: model.name.clone(),
        verdict,
        violations,
        reached: Vec::new(),
        stats,
        sources: Vec::new(),
        stopped,
        handlers: Vec::new(),
    })
}
