//! Expanding a state: every enabled handler of every process, with every
//! combination of its choices (and of the random seeds a model asks for),
//! each run as one transition whose successor is deduplicated, checked and
//! put on the frontier; the determinism check's repeated runs.

use crate::engine::erased::Erased as P;
use crate::engine::isolate;
use crate::engine::trace::{ViolationKind, ViolationRecord};
use crate::engine::{
    first_difference, next_script, CheckError, Engine, Event, Outcome, RawStep, ENV,
};
use crate::memory::Fingerprint;
use crate::memory::{ArenaId, StateId, TableId};
use crate::model::ctx;

use super::frontier::Item;
use super::searcher::Search;
use super::sleep::Sleeper;
use super::transition_cache::Known;
use crate::model::por::Footprint;

impl Search<'_, '_, P> {
    pub(super) fn expand(&mut self, item: &Item) {
        // With the caches, the state is loaded only when an event has to
        // run (see `transition_cache`); the events of its processes come from the
        // guard cache if it knows them all.
        let keyed = self.prepare_keys(item);
        let known = if keyed { self.known_events() } else { None };
        let e = &mut *self.engine;
        e.set_node(item.node);
        if known.is_none() {
            e.load(item.state);
        }
        let plan = self.sleep.as_mut().map(|s| s.plan(item.state));
        // Guards evaluated here (not known from the cache) on a sample of
        // the states are evaluated again once their transitions ran.
        let sampled = known.is_none() && {
            self.evaluated += 1;
            guard_sample().takes(self.evaluated)
        };
        let (events, guards) = match known {
            Some(events) => (events, Vec::new()),
            None => match e.enabled_with_guards() {
                Ok(found) => {
                    if keyed {
                        self.remember_events(&found.0);
                    }
                    found
                }
                Err(record) => {
                    let steps = e.path(item.node);
                    self.report(steps, record);
                    return;
                }
            },
        };
        let e = &mut *self.engine;
        if let Some(record) = Self::guards_again(e, &events) {
            let steps = e.path(item.node);
            self.report(steps, record);
            return;
        }
        if events.is_empty() {
            if !e.model().quiescence_ok {
                let steps = e.path(item.node);
                self.report(
                    steps,
                    ViolationRecord {
                        kind: ViolationKind::Deadlock,
                        property: "deadlock".into(),
                        message: "no handler is enabled in any process".into(),
                        location: None,
                    },
                );
            }
            return;
        }
        if let Some(d) = e.model().bounds.max_depth.filter(|&d| item.depth >= d) {
            self.bounded = true;
            self.bounded_by
                .get_or_insert_with(|| format!("the depth bound ({d}) cut the search"));
            return;
        }
        let seeds = self.engine.model().random_seeds as u32;
        if crate::determinism::random::enabled() {
            let (base, exact) = self.engine.seed_base_of(item.state);
            self.engine.begin_expansion(item.state, base, exact);
        }
        let (asleep, only) = match plan {
            Some(plan) => {
                let sleep = self
                    .sleep
                    .as_mut()
                    .expect("a plan comes from the sleep sets");
                sleep.in_flight = self.engine.in_flight();
                let asleep = plan.sleep.len();
                sleep.current = plan.sleep;
                (asleep, plan.only)
            }
            None => (0, None),
        };
        // Each event's first run: its key, and the visited set's slot of
        // a successor the cache knows, loaded for all events at once.
        let mut first_keys = std::mem::take(&mut self.first_keys);
        first_keys.clear();
        if self.keyed == Some(item.state) {
            let pre = self.engine.state_tag(item.state);
            for &event in &events {
                let key = self.cache_key(item, event, &[], 0);
                let mut known = None;
                if let (Some(key), Some(pre), Some(cache)) = (key, pre, &self.cache) {
                    known = cache.get(key).map(|fact| self.known(pre, fact));
                    if let Some(k) = known {
                        self.visited.prefetch(k.fp);
                    }
                }
                first_keys.push((key, known));
            }
        }
        for (i, &event) in events.iter().enumerate() {
            let guard = guards.get(i).copied().unwrap_or_default();
            let mut print = Footprint::default();
            if let Some(sleep) = &mut self.sleep {
                if sleep.current[..asleep].iter().any(|s| s.event == event) {
                    sleep.slept += 1;
                    continue;
                }
                if only.as_ref().is_some_and(|only| !only.contains(&event)) {
                    continue;
                }
                sleep.guard = guard;
            }
            // Every choice script with the default seed; when one of those
            // runs drew randomness, every script again with each other
            // seed (a run that draws nothing is the same under every seed).
            let mut drew = false;
            for seed in 0..seeds {
                if seed == 1 && !drew {
                    break;
                }
                let mut script = Vec::new();
                loop {
                    if self.stop_requested() {
                        return;
                    }
                    let (key, known) = match first_keys.get(i) {
                        Some(&first) if seed == 0 && script.is_empty() => first,
                        _ => {
                            let key = self.cache_key(item, event, &script, seed);
                            let pre = self.engine.state_tag(item.state);
                            let known = match (key, pre, &self.cache) {
                                (Some(k), Some(pre), Some(c)) => {
                                    c.get(k).map(|fact| self.known(pre, fact))
                                }
                                _ => None,
                            };
                            (key, known)
                        }
                    };
                    let (ranges, drew_now, run) =
                        self.transition(item, event, script, seed, key, known);
                    drew |= drew_now;
                    if self.sleep.is_some() {
                        print = print.merge(run);
                    }
                    match next_script(&ranges) {
                        Some(next) => script = next,
                        None => break,
                    }
                }
            }
            if let Some(sleep) = &mut self.sleep {
                if event.actor != ENV {
                    // Explored: asleep in the successors of the events after
                    // it that commute with it.
                    sleep.current.push(Sleeper {
                        event,
                        print: print.merge(guard),
                    });
                }
            }
        }
        if sampled && !self.stop_requested() {
            // Guards are functions of the state: evaluated again after the
            // transitions ran, they must enable the same handlers. One that
            // reads or writes what no state holds (a static another guard
            // or a handler changes) would make the search miss states.
            let e = &mut *self.engine;
            e.load(item.state);
            e.set_node(item.node);
            let again = e.enabled();
            if !again.as_ref().is_ok_and(|a| *a == events) {
                let record = guards_differ(
                    e,
                    &events,
                    &again,
                    "after the state's transitions ran (cmc evaluates the guards of a sample \
                     of the states twice; --check-determinism checks them all, and every \
                     transition)",
                );
                let steps = e.path(item.node);
                self.report(steps, record);
            }
        }
        self.engine.end_expansion();
        self.check_twins();
        self.first_keys = first_keys;
        self.events_buf = events;
    }

    /// With the determinism check, the guards of the loaded state evaluated
    /// again (`Model::determinism_runs` in all), which must enable the
    /// same `events`; the violation if they do not.
    pub(super) fn guards_again(e: &mut Engine<'_, P>, events: &[Event]) -> Option<ViolationRecord> {
        if !e.model().check_determinism {
            return None;
        }
        for run in 1..e.model().determinism_runs.max(2) {
            ctx::set_stack_shift(64 * run);
            let again = e.enabled();
            ctx::set_stack_shift(0);
            if again.as_ref().is_ok_and(|a| a == events) {
                continue;
            }
            return Some(guards_differ(e, events, &again, "in the same state"));
        }
        None
    }

    /// With the determinism check, the properties of the loaded state
    /// checked again (`Model::determinism_runs` in all), which must judge
    /// as `verdict` did; the violation if they do not.
    pub(super) fn invariants_again(
        e: &mut Engine<'_, P>,
        verdict: &Option<ViolationRecord>,
    ) -> Option<ViolationRecord> {
        if !e.model().check_determinism {
            return None;
        }
        for run in 1..e.model().determinism_runs.max(2) {
            ctx::set_stack_shift(64 * run);
            let again = e.check_state();
            ctx::set_stack_shift(0);
            if again == *verdict {
                continue;
            }
            let say = |v: &Option<ViolationRecord>| {
                v.as_ref()
                    .map_or_else(|| "no violation".to_string(), |r| r.to_string())
            };
            return Some(ViolationRecord {
                kind: ViolationKind::Nondeterminism,
                property: verdict
                    .as_ref()
                    .or(again.as_ref())
                    .map_or_else(|| "invariants".to_string(), |r| r.property.clone()),
                message: format!(
                    "the invariants judged the same state differently when evaluated \
                     again: first {}, then {}",
                    say(verdict),
                    say(&again)
                ),
                location: None,
            });
        }
        None
    }

    /// Runs a transition again (`Model::determinism_runs` in all, each from
    /// a stack shifted a little deeper, so that stack addresses differ)
    /// and compares each successor with `succ`, by the search's own
    /// identity (bytes may differ where meaning does not: a map's random
    /// keys); returns what differed, if anything did.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn determinism(
        e: &mut Engine<'_, P>,
        from: StateId,
        event: Event,
        taken: &[usize],
        seed: u32,
        succ: StateId,
        fp: Fingerprint,
    ) -> Option<Result<String, String>> {
        let runs = e.model().determinism_runs.max(2);
        for run in 1..runs {
            e.load(from);
            let globals = e.globals_snapshot();
            ctx::set_stack_shift(64 * run);
            let again = e.run(event, taken.to_vec(), seed, false, from);
            ctx::set_stack_shift(0);
            // Named only if the runs differ: a thread the handler starts
            // writes std's globals in every run.
            let written = e.globals_written_since(&globals);
            if let Some(m) = again.thread_error {
                return Some(Err(m));
            }
            let mut cause = Vec::new();
            let differs = if let Some((m, _)) = &again.panic {
                cause.push(format!("run {} panicked: {m}", run + 1));
                true
            } else if e.take_exhaustion().is_some() {
                cause.push(format!("run {} ran out of arena memory", run + 1));
                true
            } else {
                let s2 = e.capture();
                let same = e.state_fingerprint(s2).is_ok_and(|f| f == fp);
                if !same && event.actor != ENV {
                    let second = e.show(event.actor);
                    e.load(succ);
                    let first = e.show(event.actor);
                    if let (Some(a), Some(b)) = (first, second) {
                        cause.push(match first_difference(&a, &b) {
                            Some(d) => format!("its state differs {d}"),
                            None => "its own state is the same; what it sent or the shared \
                                     variables differ"
                                .to_string(),
                        });
                    }
                }
                e.release(s2);
                !same
            };
            if !differs {
                continue;
            }
            // Other threads of the program write globals too (a test
            // harness starting threads bumps std's thread-id counter): keep
            // those that three more runs each write again.
            let mut written = e.globals_named(&written);
            for _ in 0..3 {
                if written.is_empty() {
                    break;
                }
                e.load(from);
                let globals = e.globals_snapshot();
                let _ = e.run(event, taken.to_vec(), seed, false, from);
                let _ = e.take_exhaustion();
                let again = e.globals_written_names(&globals);
                written.retain(|w| again.contains(w));
            }
            if !written.is_empty() {
                cause.insert(
                    0,
                    format!(
                        "it wrote {} {}, which no state holds",
                        if written.len() == 1 {
                            "the global"
                        } else {
                            "the globals"
                        },
                        written.join(", ")
                    ),
                );
            } else {
                cause.push(
                    "it wrote no global of the program: look for files, sockets, threads, \
                     clocks, or addresses on the stack"
                        .to_string(),
                );
            }
            let when = if run == 1 {
                "when run twice".to_string()
            } else {
                format!("on run {} of {runs}", run + 1)
            };
            return Some(Ok(format!(
                "{}'s handler gave different successors {when} from the same state: {}",
                e.actor_name(event.actor),
                cause.join("; ")
            )));
        }
        None
    }

    /// Runs one transition from `item` and handles its successor; returns
    /// the choices it made as (value, range) and whether it drew
    /// randomness.
    /// The violation a run's outcome is, if it is one: a thread left
    /// behind (which also halts the search: no state of the process can be
    /// trusted any more), a panic, an exhausted arena, a model error.
    pub(super) fn outcome_violation(
        &mut self,
        event: Event,
        outcome: &mut Outcome,
    ) -> Option<ViolationRecord> {
        let e = &mut *self.engine;
        let handler = e.handler_name(event);
        let fail = |kind, message: String, location| ViolationRecord {
            kind,
            property: handler.to_string(),
            message,
            location,
        };
        if let Some(m) = outcome.thread_error.take() {
            self.halted = true;
            Some(fail(ViolationKind::ModelError, m, None))
        } else if let Some((message, location)) = outcome.panic.take() {
            Some(fail(
                ViolationKind::Panic,
                format!("{}: {message}", e.actor_name(event.actor)),
                Some(location),
            ))
        } else if let Some(x) = e.take_exhaustion() {
            Some(fail(ViolationKind::ArenaExhausted, x.to_string(), None))
        } else {
            outcome
                .model_error
                .take()
                .map(|m| fail(ViolationKind::ModelError, m, None))
        }
    }

    fn transition(
        &mut self,
        item: &Item,
        event: Event,
        script: Vec<usize>,
        seed: u32,
        key: Option<u128>,
        known: Option<Known>,
    ) -> (Vec<(usize, usize)>, bool, Footprint) {
        let (ranges, drew) = self.transition_inner(item, event, script, seed, key, known);
        (ranges, drew, self.last_print)
    }

    /// Writes the transition about to be taken to the crash log.
    fn record(item: &Item, event: Event, seed: u32, script: &[usize]) {
        let actor = if event.actor == ENV {
            u64::MAX
        } else {
            event.actor as u64
        };
        isolate::record_checking(item.node, actor, event.handler as u64, seed, script);
    }

    /// What the cache's `fact` says about a transition from a state whose
    /// fingerprint sum is `pre`.
    pub(super) fn known(&self, pre: u128, fact: super::transition_cache::Fact) -> Known {
        let sum = pre.wrapping_add(fact.delta);
        Known {
            fact,
            sum,
            fp: self.engine.finish_sum(sum),
        }
    }

    /// Runs `event` from `item` with `script` and `seed`, unless what the
    /// cache knows about it (under `key`) makes that unnecessary.
    #[allow(clippy::too_many_arguments)]
    fn transition_inner(
        &mut self,
        item: &Item,
        event: Event,
        script: Vec<usize>,
        seed: u32,
        key: Option<u128>,
        known: Option<Known>,
    ) -> (Vec<(usize, usize)>, bool) {
        if let (Some(key), Some(Known { fact, sum, fp })) = (key, known) {
            // With the successor's contents at hand, a new successor is
            // built from them (see `transition_cache`): the visited set is asked once,
            // by adding it.
            let tables = self.cache.as_ref().and_then(|c| c.tables_now(key, &fact));
            let new = match tables {
                Some(_) => self.visited.insert(fp),
                None => !self.visited.contains(fp),
            };
            if !new && !self.shallower(fp, item.depth + 1) {
                // Known: the run would change nothing the search keeps.
                self.stats.transitions += 1;
                self.stats.generated += 1;
                self.stats.cached += 1;
                self.last_print = Footprint::default();
                return (fact.choices(), false);
            }
            // Known, but reached by a shorter path than before: it runs,
            // and `arrived_again` expands its successor again.
            if let Some(tables) = tables.filter(|_| new) {
                let choices = fact.choices();
                // What the crash log names if the successor's checks
                // crash, as after a run.
                Self::record(item, event, seed, &script);
                self.derived(item, event, &choices, seed, tables, sum, fp);
                return (choices, false);
            }
        }
        Self::record(item, event, seed, &script);
        let e = &mut *self.engine;
        e.load(item.state);
        let mut outcome = e.run(event, script, seed, false, item.state);
        let ranges = std::mem::take(&mut outcome.ranges);
        let drew = outcome.drew;
        // Whether the run may be cached: it drew no randomness (whose seed
        // is the whole state's) and ran cleanly (checked below).
        let cacheable = key.is_some()
            && outcome.misfit.is_none()
            && !if e.model().random_seeds > 1 {
                drew
            } else {
                crate::determinism::random::drew()
            };
        self.last_print = outcome.footprint;
        self.stats.transitions += 1;
        if let Some(m) = outcome.global_error {
            self.fatal = Some(CheckError::Model(m));
            return (ranges, drew);
        }
        let step = RawStep {
            event,
            choices: std::mem::take(&mut outcome.taken),
            seed,
        };
        let handler = e.handler_name(event);
        let fail = |kind, message: String, location| ViolationRecord {
            kind,
            property: handler.to_string(),
            message,
            location,
        };
        if let Some(record) = self.outcome_violation(event, &mut outcome) {
            let mut steps = self.engine.path(item.node);
            steps.push(step);
            self.report(steps, record);
            return (ranges, drew);
        }
        let e = &mut *self.engine;
        let (succ, fp) = if e.lazy_capture() {
            // Fingerprint first: most successors are known already, and
            // those need no capture (the next restore undoes what the
            // transition wrote).
            self.stats.generated += 1;
            let fp = match e.pending_fingerprint(item.state, event) {
                Ok(fp) => fp,
                Err(record) => {
                    let mut steps = e.path(item.node);
                    steps.push(step);
                    self.report(steps, record);
                    return (ranges, drew);
                }
            };
            let mut cached = false;
            if let (true, Some(key), Some(cache), Some(pre)) =
                (cacheable, key, &mut self.cache, e.state_tag(item.state))
            {
                if let Some(old) = cache.insert(key, e.pending_sum().wrapping_sub(pre), &ranges) {
                    for t in old {
                        e.drop_table(t);
                    }
                }
                cached = true;
            }
            if !self.visited.insert(fp) {
                self.note_twin(item.node, &step, fp, None);
                self.arrived_again(item, &step, fp, None);
                return (ranges, drew);
            }
            let succ = e.capture();
            e.tag_computed(succ);
            if let (true, Some(key)) = (cached, key) {
                self.keep_successor(item.state, succ, event, key);
            }
            (succ, fp)
        } else {
            let succ = e.capture();
            self.stats.generated += 1;
            let fp = match e.state_fingerprint(succ) {
                Ok(fp) => fp,
                Err(record) => {
                    e.release(succ);
                    let mut steps = e.path(item.node);
                    steps.push(step);
                    self.report(steps, record);
                    return (ranges, drew);
                }
            };
            if e.model().check_determinism {
                match Self::determinism(e, item.state, event, &step.choices, seed, succ, fp) {
                    None => {}
                    Some(Err(thread)) => {
                        // Only a later run left a thread behind: report that,
                        // it stops the search.
                        e.release(succ);
                        let mut steps = e.path(item.node);
                        steps.push(step);
                        self.halted = true;
                        self.report(steps, fail(ViolationKind::ModelError, thread, None));
                        return (ranges, drew);
                    }
                    Some(Ok(message)) => {
                        let mut steps = e.path(item.node);
                        steps.push(step);
                        e.release(succ);
                        self.report(steps, fail(ViolationKind::Nondeterminism, message, None));
                        return (ranges, drew);
                    }
                }
                e.load(succ);
            }
            if !self.visited.insert(fp) {
                self.note_twin(item.node, &step, fp, Some(succ));
                self.arrived_again(item, &step, fp, Some(succ));
                return (ranges, drew);
            }
            (succ, fp)
        };
        self.new_state(item, step, succ, fp);
        (ranges, drew)
    }

    /// The successor `succ` (loaded, and captured or derived) of `item` by
    /// `step` is new (its fingerprint `fp` just entered the visited set):
    /// it is pruned, or recorded, checked, and put on the frontier.
    fn new_state(&mut self, item: &Item, step: RawStep, succ: StateId, fp: Fingerprint) {
        if !self.owns(fp) {
            // Another process's to check and expand (a search across
            // processes).
            self.send_away(item, &step, succ, fp);
            return;
        }
        let event = step.event;
        let e = &mut *self.engine;
        if e.pruned() {
            self.stats.pruned += 1;
            e.release(succ);
            return;
        }
        let Some(node) = e.record_node(item.node, event, &step.choices, step.seed) else {
            // The search tree is full: the search stops, bounded (see
            // `stop_requested`).
            e.release(succ);
            return;
        };
        self.accept(node, item.depth + 1, event, succ, fp);
    }

    /// A new state `succ` (loaded; fingerprint `fp`), recorded as `node`
    /// of the search tree at `depth`, reached by `event`: counted,
    /// checked, and put on the frontier.
    pub(super) fn accept(
        &mut self,
        node: u32,
        depth: usize,
        event: Event,
        succ: StateId,
        fp: Fingerprint,
    ) {
        self.stats.unique += 1;
        if let Some(depths) = &mut self.depths {
            depths.insert(fp, depth as u32);
        }
        self.stats.max_depth = self.stats.max_depth.max(depth);
        // Across processes, the states all have found (as of the last
        // exchange).
        isolate::publish(
            self.cluster_unique(),
            self.stats.transitions,
            self.stats.max_depth,
            self.stats.generated,
        );
        let e = &mut *self.engine;
        e.set_node(node);
        let verdict = e.check_state();
        if let Some(record) = Self::invariants_again(e, &verdict) {
            e.release(succ);
            let steps = e.path(node);
            self.report(steps, record);
            return;
        }
        if let Some(record) = verdict {
            let steps = e.path(node);
            self.report(steps, record);
            if !self.past_violations() {
                self.engine.release(succ);
                return;
            }
            // Building the trace loaded other states.
            self.engine.load(succ);
            self.engine.set_node(node);
        }
        let priority = self.priority();
        if !self.unreached.is_empty() {
            self.note_sometimes(node, succ);
        }
        self.frontier.push(
            Item {
                node,
                state: succ,
                depth,
            },
            priority,
            &mut *self.engine,
        );
        if let Some(sleep) = &mut self.sleep {
            let asleep = sleep.child(event, self.last_print);
            sleep.found(fp, succ, asleep);
        }
        if let Some(twins) = &mut self.twins {
            twins.keep(&mut *self.engine, fp, succ, node);
        }
        self.stats.peak_frontier = self.stats.peak_frontier.max(self.frontier.len());
    }

    /// A transition from `item` whose cache entry holds its successor's
    /// tables, and whose successor (fingerprint sum `sum`, fingerprint
    /// `fp`) was not visited (and now is): the successor is built from the
    /// tables, loaded, and handled as a run's would be.
    #[allow(clippy::too_many_arguments)]
    fn derived(
        &mut self,
        item: &Item,
        event: Event,
        ranges: &[(usize, usize)],
        seed: u32,
        tables: [TableId; 2],
        sum: u128,
        fp: Fingerprint,
    ) {
        self.stats.transitions += 1;
        self.stats.generated += 1;
        self.stats.cached += 1;
        self.stats.derived += 1;
        self.last_print = Footprint::default();
        let e = &mut *self.engine;
        let env = (e.env_arena(), tables[1]);
        let succ = if event.actor == ENV {
            e.derive(item.state, &[env])
        } else {
            e.derive(item.state, &[(e.arenas()[event.actor], tables[0]), env])
        };
        e.set_state_tag(succ, sum);
        // Loaded, as a run's successor is (the reference `derive` gave
        // goes to the frontier, as a capture's does).
        e.load(succ);
        let step = RawStep {
            event,
            choices: ranges.iter().map(|&(v, _)| v).collect(),
            seed,
        };
        self.new_state(item, step, succ, fp);
    }

    /// After a cached run from `pre` whose successor `succ` was new and
    /// captured: if the two differ only in the arenas the event could
    /// write, the cache entry `key` keeps the successor's tables of those
    /// arenas (see `transition_cache`).
    fn keep_successor(&mut self, pre: StateId, succ: StateId, event: Event, key: u128) {
        let Some(cache) = &mut self.cache else {
            return;
        };
        let e = &mut *self.engine;
        let own = (event.actor != ENV).then(|| e.arenas()[event.actor]);
        let env = e.env_arena();
        let others_same = (0..e.arena_count())
            .map(ArenaId)
            .all(|a| a == env || Some(a) == own || e.table_of(pre, a) == e.table_of(succ, a));
        if !others_same {
            return;
        }
        let tables = [
            own.map_or(e.table_of(succ, env), |a| e.table_of(succ, a)),
            e.table_of(succ, env),
        ];
        let (taken, dropped) = cache.attach(key, tables);
        if taken {
            for t in tables {
                e.keep_table(t);
            }
        }
        for t in dropped.into_iter().flatten() {
            e.drop_table(t);
        }
    }

    /// Computes the key prefixes of `item`'s processes (see `transition_cache`),
    /// when the caches may answer for its events: they are on, the state
    /// is isolated (its processes' code reads only their own arenas and
    /// the environment's) and its fingerprint sum is known.
    pub(super) fn prepare_keys(&mut self, item: &Item) -> bool {
        self.keyed = None;
        if self.cache.is_none() {
            return false;
        }
        let e = &*self.engine;
        if !e.isolated(item.state) || e.state_tag(item.state).is_none() {
            return false;
        }
        let env = e.arena_key(item.state, e.env_arena());
        self.prefixes.clear();
        for &arena in e.arenas() {
            let own = e.arena_key(item.state, arena);
            self.prefixes
                .push(super::transition_cache::Prefix::new(Some(own), env));
        }
        self.prefixes
            .push(super::transition_cache::Prefix::new(None, env));
        self.keyed = Some(item.state);
        true
    }

    /// The prefix of `actor`'s keys in the state being expanded.
    fn prefix(&self, actor: usize) -> &super::transition_cache::Prefix {
        let at = if actor == ENV {
            self.prefixes.len() - 1
        } else {
            actor
        };
        &self.prefixes[at]
    }

    /// The enabled events of the state being expanded, if the guard cache
    /// knows every process's (and the environment's), in the order
    /// [`Engine::enabled_with_guards`] gives them.
    fn known_events(&mut self) -> Option<Vec<Event>> {
        let guards = self.guards.as_mut()?;
        let actors = self.prefixes.len() - 1;
        let mut events = std::mem::take(&mut self.events_buf);
        events.clear();
        for (at, prefix) in self.prefixes.iter().enumerate() {
            let mut enabled = guards.get(super::transition_cache::GuardCache::key(prefix))?;
            let actor = if at == actors { ENV } else { at };
            while enabled != 0 {
                let handler = enabled.trailing_zeros() as usize;
                enabled &= enabled - 1;
                events.push(Event { actor, handler });
            }
        }
        Some(events)
    }

    /// Records the enabled events of the state being expanded, found by
    /// its guards, in the guard cache.
    fn remember_events(&mut self, events: &[Event]) {
        let Some(guards) = &mut self.guards else {
            return;
        };
        let actors = self.prefixes.len() - 1;
        let mut enabled = vec![0u64; self.prefixes.len()];
        for ev in events {
            let at = if ev.actor == ENV { actors } else { ev.actor };
            assert!(
                ev.handler < 64,
                "the guard cache is on only for at most 64 handlers"
            );
            enabled[at] |= 1 << ev.handler;
        }
        for (prefix, enabled) in self.prefixes.iter().zip(enabled) {
            guards.insert(super::transition_cache::GuardCache::key(prefix), enabled);
        }
    }

    /// The transition cache's key of `event` from `item`, when the cache
    /// may answer for it: the state's arenas point only into themselves,
    /// so the event reads only its process's arena and the environment's
    /// (see `transition_cache`).
    pub(super) fn cache_key(
        &self,
        item: &Item,
        event: Event,
        script: &[usize],
        seed: u32,
    ) -> Option<u128> {
        if self.keyed != Some(item.state) {
            return None;
        }
        let hash = match self.plain_events.get(event.handler) {
            Some(&h) if script.is_empty() && seed == 0 => h,
            _ => super::transition_cache::TransitionCache::event_hash(event.handler, script, seed),
        };
        Some(super::transition_cache::TransitionCache::event_key(
            self.prefix(event.actor),
            hash,
        ))
    }

    /// A transition from `item` by `step` reached the known state `fp`
    /// (loaded, and captured as `captured` if it was). Under sleep sets,
    /// the state may have events to run that every earlier arrival had
    /// asleep and this one has not: it goes back on the frontier for
    /// those. Under a depth bound, a state that only longer paths had
    /// reached goes back on the frontier in full: it may have successors
    /// within the bound that its first expansion was too deep to reach.
    fn arrived_again(
        &mut self,
        item: &Item,
        step: &RawStep,
        fp: Fingerprint,
        captured: Option<StateId>,
    ) {
        // Under a depth bound, a state reached by a shorter path than
        // before is expanded again, in full, with the depth it has left.
        let depth = (item.depth + 1) as u32;
        let shallower = match self.depths.as_mut().and_then(|d| d.get_mut(&fp)) {
            Some(known) if *known > depth => {
                *known = depth;
                true
            }
            _ => false,
        };
        let plan = self.sleep.as_mut().and_then(|sleep| {
            if shallower || !sleep.known(fp) {
                return None;
            }
            let asleep = sleep.child(step.event, self.last_print);
            sleep.again(fp, &asleep)
        });
        let e = &mut *self.engine;
        if plan.is_none() && !shallower {
            if let Some(succ) = captured {
                e.release(succ);
            }
            return;
        }
        let succ = captured.unwrap_or_else(|| {
            let succ = e.capture();
            e.tag_computed(succ);
            succ
        });
        let Some(node) = e.record_node(item.node, step.event, &step.choices, step.seed) else {
            e.release(succ);
            return;
        };
        let priority = self.priority();
        self.frontier.push(
            Item {
                node,
                state: succ,
                depth: item.depth + 1,
            },
            priority,
            &mut *self.engine,
        );
        if let Some(plan) = plan {
            self.sleep
                .as_mut()
                .expect("a plan comes from the sleep sets")
                .requeued(fp, succ, plan);
        } else {
            self.stats.revisited += 1;
        }
        self.stats.peak_frontier = self.stats.peak_frontier.max(self.frontier.len());
    }

    /// Whether the known state `fp`, reached now at `depth`, was reached
    /// only deeper before under a depth bound (and so is to be expanded
    /// again).
    fn shallower(&self, fp: Fingerprint, depth: usize) -> bool {
        self.depths
            .as_ref()
            .and_then(|d| d.get(&fp))
            .is_some_and(|&known| known as usize > depth)
    }
}

// The symmetry check (see `twins`): twins noted as they are generated,
// compared after the expansion.
impl Search<'_, '_, P> {
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
        let sampled = twins.all
            || twins.merged <= super::twins::CHECK_SAMPLED
            || twins.merged % super::twins::SAMPLE_EVERY == 0;
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
        twins.pending.push(super::twins::Pending {
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
                self.report(steps, crate::engine::twins::asymmetry(reached));
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

/// How many states of a search have their guards evaluated twice, all
/// (the first [`GUARD_SAMPLE_ALL`]), then one in [`GUARD_SAMPLE_EVERY`].
const GUARD_SAMPLE_ALL: u64 = 4096;
const GUARD_SAMPLE_EVERY: u64 = 64;

/// Which states have their guards evaluated a second time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GuardSample {
    /// The first [`GUARD_SAMPLE_ALL`], then one in [`GUARD_SAMPLE_EVERY`]:
    /// the default.
    Sampled,
    /// None (`CMC_GUARD_SAMPLE=off`).
    Off,
    /// Every state (`CMC_GUARD_SAMPLE=all`).
    All,
}

impl GuardSample {
    /// Whether the `n`-th state whose guards were evaluated (from 1) is
    /// sampled.
    fn takes(self, n: u64) -> bool {
        match self {
            GuardSample::Sampled => n <= GUARD_SAMPLE_ALL || n % GUARD_SAMPLE_EVERY == 0,
            GuardSample::Off => false,
            GuardSample::All => true,
        }
    }
}

/// The sampling of guards, from `CMC_GUARD_SAMPLE` (`off`, `sampled`, the
/// default, or `all`): a knob for the bench that prices the sample
/// (`scripts/price-guard-sample.sh`), not a setting for checks. An
/// unknown value is said once and the default kept.
fn guard_sample() -> GuardSample {
    static SAMPLE: std::sync::OnceLock<GuardSample> = std::sync::OnceLock::new();
    *SAMPLE.get_or_init(|| match std::env::var("CMC_GUARD_SAMPLE").as_deref() {
        Err(_) | Ok("sampled") => GuardSample::Sampled,
        Ok("off") => GuardSample::Off,
        Ok("all") => GuardSample::All,
        Ok(other) => {
            eprintln!(
                "cmc: CMC_GUARD_SAMPLE={other:?} is not off, sampled or all; guards are sampled"
            );
            GuardSample::Sampled
        }
    })
}

/// The violation of guards that enabled `events`, then `again` when
/// evaluated again (`when`).
fn guards_differ(
    e: &Engine<'_, P>,
    events: &[Event],
    again: &Result<Vec<Event>, ViolationRecord>,
    when: &str,
) -> ViolationRecord {
    let show = |v: &[Event]| {
        v.iter()
            .map(|ev| format!("{} of {}", e.handler_name(*ev), e.actor_name(ev.actor)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let message = match again {
        Ok(again) => format!(
            "the guards enabled different handlers when evaluated again {when}: first [{}], \
             then [{}]",
            show(events),
            show(again)
        ),
        Err(record) => format!("the guards, evaluated again {when}, panicked: {record}"),
    };
    ViolationRecord {
        kind: ViolationKind::Nondeterminism,
        property: "guards".into(),
        message,
        location: None,
    }
}
