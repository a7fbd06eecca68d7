//! Reachability and liveness: `sometimes` and `eventually` properties.
//!
//! A `sometimes` property is evaluated in every new state until it holds
//! once; the path to that state is its witness. After a complete search,
//! one that never held is a `never_reached` violation.
//!
//! An `eventually` property is checked after a complete search, one
//! property at a time, by a depth-first search of the *pending* graph: the
//! states reachable from the initial state through states where the
//! property does not hold (a path that reaches a state where it holds is
//! done with it). Tarjan's algorithm splits that graph into strongly
//! connected components as it goes. An execution that never satisfies the
//! property either stays in one component forever, going round a cycle,
//! or stops in a state without successor. So a counterexample is
//!
//! * a component with at least one edge (a cycle) that is *fair*: for
//!   every handler marked fair and every process, the component has an
//!   edge that runs it or a state where it is disabled (weak fairness: a
//!   cycle through every state and edge of such a component never starves
//!   it; in a component where it is enabled everywhere and never runs,
//!   every cycle starves it);
//! * or a pending state without any successor.
//!
//! The counterexample's trace is the depth-first path to the component,
//! then a cycle from there through one edge or state per fair handler and
//! back (a *lasso*, `Trace::loop_start` marks where the cycle begins), or
//! the path to the state without successor.

use crate::engine::erased::Erased as P;
use std::collections::{HashMap, VecDeque};

use crate::engine::isolate;
use crate::engine::trace::{Reached, ViolationKind, ViolationRecord};
use crate::engine::{next_script, Event, RawStep, ENV};
use crate::memory::{Fingerprint, StateId};
use crate::model::PropertyKind;

use super::searcher::Search;

/// A state of the pending graph while it is on the depth-first stack.
struct Frame {
    idx: u32,
    state: StateId,
    succ: std::vec::IntoIter<(RawStep, StateId, Fingerprint)>,
}

/// What the pending graph of one property holds per state.
#[derive(Default)]
struct Graph {
    /// Depth-first number of each fingerprint.
    index: HashMap<u128, u32>,
    low: Vec<u32>,
    on_stack: Vec<bool>,
    /// How the depth-first search first reached the state: its parent
    /// and the step (none for the initial state).
    parent: Vec<Option<(u32, u32)>>,
    /// The search-tree node recorded for the state (for crash reports).
    node: Vec<u32>,
    /// The fair events enabled in the state, as indices into `fair`.
    enabled_fair: Vec<Vec<u32>>,
    /// Edges to pending states: (target, step).
    out: Vec<Vec<(u32, u32)>>,
    /// Steps, each stored once.
    steps: Vec<RawStep>,
    step_ids: HashMap<(Event, Vec<usize>, u32), u32>,
    /// Tarjan's stack of states.
    tarjan: Vec<u32>,
    /// The fair events: every process's fair handlers.
    fair: Vec<Event>,
}

impl Graph {
    fn step_id(&mut self, step: &RawStep) -> u32 {
        let key = (step.event, step.choices.clone(), step.seed);
        if let Some(&id) = self.step_ids.get(&key) {
            return id;
        }
        let id = self.steps.len() as u32;
        self.steps.push(step.clone());
        self.step_ids.insert(key, id);
        id
    }

    /// The steps from the initial state to `idx` along the depth-first
    /// tree.
    fn stem(&self, mut idx: u32) -> Vec<RawStep> {
        let mut steps = Vec::new();
        while let Some((parent, step)) = self.parent[idx as usize] {
            steps.push(self.steps[step as usize].clone());
            idx = parent;
        }
        steps.reverse();
        steps
    }

    /// The state nearest to the initial one (by the edges known so far)
    /// that satisfies `want`.
    fn nearest(&self, want: impl Fn(u32) -> bool) -> Option<u32> {
        let mut seen = vec![false; self.low.len()];
        let mut queue = VecDeque::from([0u32]);
        seen[0] = true;
        while let Some(at) = queue.pop_front() {
            if want(at) {
                return Some(at);
            }
            for &(next, _) in &self.out[at as usize] {
                if !seen[next as usize] {
                    seen[next as usize] = true;
                    queue.push_back(next);
                }
            }
        }
        None
    }

    /// A shortest path (by the edges known so far) from the initial state
    /// to `to`.
    fn shortest(&self, to: u32) -> Option<Vec<RawStep>> {
        let mut prev: Vec<Option<(u32, u32)>> = vec![None; self.low.len()];
        let mut seen = vec![false; self.low.len()];
        let mut queue = VecDeque::from([0u32]);
        seen[0] = true;
        while let Some(at) = queue.pop_front() {
            if at == to {
                let mut steps = Vec::new();
                let mut cur = at;
                while let Some((p, step)) = prev[cur as usize] {
                    steps.push(self.steps[step as usize].clone());
                    cur = p;
                }
                steps.reverse();
                return Some(steps);
            }
            for &(next, step) in &self.out[at as usize] {
                if !seen[next as usize] {
                    seen[next as usize] = true;
                    prev[next as usize] = Some((at, step));
                    queue.push_back(next);
                }
            }
        }
        None
    }

    /// A shortest path inside `scc` (a membership table) from `from` to a
    /// state satisfying `to`, taking at least one edge; its steps and end.
    fn path_within(
        &self,
        scc: &[bool],
        from: u32,
        to: impl Fn(u32) -> bool,
    ) -> Option<(Vec<u32>, u32)> {
        let mut prev: HashMap<u32, (u32, u32)> = HashMap::new();
        let mut queue = VecDeque::new();
        for &(next, step) in &self.out[from as usize] {
            if scc[next as usize] && !prev.contains_key(&next) {
                prev.insert(next, (from, step));
                queue.push_back(next);
            }
        }
        while let Some(at) = queue.pop_front() {
            if to(at) {
                let mut steps = Vec::new();
                let mut cur = at;
                loop {
                    let (p, step) = prev[&cur];
                    steps.push(step);
                    if p == from {
                        break;
                    }
                    cur = p;
                }
                steps.reverse();
                return Some((steps, at));
            }
            for &(next, step) in &self.out[at as usize] {
                if scc[next as usize] && !prev.contains_key(&next) {
                    prev.insert(next, (at, step));
                    queue.push_back(next);
                }
            }
        }
        None
    }
}

impl Search<'_, '_, P> {
    /// Evaluates the `sometimes` properties not reached yet in `state`
    /// (loaded, at `node`), keeping a witness for each that holds.
    pub(super) fn note_sometimes(&mut self, node: u32, state: StateId) {
        let mut k = 0;
        while k < self.unreached.len() {
            let prop = self.unreached[k];
            match self.engine.property_holds(prop) {
                Ok(false) => k += 1,
                Ok(true) => {
                    self.unreached.swap_remove(k);
                    let name = self.engine.properties()[prop].name;
                    let steps = self.engine.path(node);
                    let record = ViolationRecord {
                        kind: ViolationKind::NeverReached,
                        property: name.into(),
                        message: String::new(),
                        location: None,
                    };
                    if self.cluster.is_some() {
                        // Its path may start in another process.
                        self.defer(steps, record, true);
                        continue;
                    }
                    let at = self.engine.node();
                    let mut trace = self.engine.build_trace(&steps, record);
                    self.engine.set_node(at);
                    trace.violation = None;
                    trace.also_violated.clear();
                    self.reached.push(Reached {
                        property: name.into(),
                        trace,
                    });
                    // Building the trace loaded other states.
                    self.engine.load(state);
                    self.engine.set_node(node);
                }
                Err(record) => {
                    let steps = self.engine.path(node);
                    self.unreached.swap_remove(k);
                    self.report(steps, record);
                }
            }
        }
    }

    /// Checks every `eventually` property (after a complete search).
    pub(super) fn liveness(&mut self) {
        let props: Vec<usize> = (0..self.engine.properties().len())
            .filter(|&k| self.engine.properties()[k].kind == PropertyKind::Eventually)
            .collect();
        for k in props {
            if self.stop_requested() {
                return;
            }
            self.eventually(k);
        }
    }

    /// The successors of the loaded `state`: every enabled event with
    /// every choice script (and random seed), as (step, state,
    /// fingerprint); transitions that fail (the search reported them)
    /// lead nowhere. Also the fair events enabled, and whether the state
    /// has any successor at all.
    fn successors(
        &mut self,
        state: StateId,
        node: u32,
        fair: &[Event],
    ) -> (Vec<(RawStep, StateId, Fingerprint)>, Vec<u32>) {
        let e = &mut *self.engine;
        e.load(state);
        e.set_node(node);
        let Ok(events) = e.enabled() else {
            return (Vec::new(), Vec::new());
        };
        let enabled_fair = fair
            .iter()
            .enumerate()
            .filter(|(_, f)| events.contains(f))
            .map(|(i, _)| i as u32)
            .collect();
        let seeds = e.model().random_seeds as u32;
        if crate::determinism::random::enabled() {
            let (base, exact) = e.seed_base_of(state);
            e.begin_expansion(state, base, exact);
        }
        let mut out = Vec::new();
        for event in events {
            let mut drew = false;
            for seed in 0..seeds {
                if seed == 1 && !drew {
                    break;
                }
                let mut script = Vec::new();
                loop {
                    e.load(state);
                    let actor = if event.actor == ENV {
                        u64::MAX
                    } else {
                        event.actor as u64
                    };
                    isolate::record_checking(node, actor, event.handler as u64, seed, &script);
                    let mut outcome = e.run(event, script, seed, false, state);
                    self.stats.liveness_transitions += 1;
                    drew |= outcome.drew;
                    let ranges = std::mem::take(&mut outcome.ranges);
                    let failed = outcome.panic.is_some()
                        || outcome.thread_error.is_some()
                        || outcome.global_error.is_some()
                        || outcome.model_error.is_some()
                        || e.take_exhaustion().is_some();
                    if !failed {
                        let succ = e.capture();
                        match e.state_fingerprint(succ) {
                            Ok(fp) => out.push((
                                RawStep {
                                    event,
                                    choices: std::mem::take(&mut outcome.taken),
                                    seed,
                                },
                                succ,
                                fp,
                            )),
                            Err(_) => e.release(succ),
                        }
                    }
                    match next_script(&ranges) {
                        Some(next) => script = next,
                        None => break,
                    }
                }
            }
        }
        e.end_expansion();
        (out, enabled_fair)
    }

    /// Checks `eventually` property `k` (see the module documentation).
    fn eventually(&mut self, k: usize) {
        let name = self.engine.properties()[k].name;
        // Weak fairness: every (process, fair handler) pair.
        let fair: Vec<Event> = (0..self.engine.model().count)
            .flat_map(|actor| {
                self.engine
                    .handlers()
                    .iter()
                    .enumerate()
                    .filter(|(_, h)| h.fair)
                    .map(move |(handler, _)| Event { actor, handler })
            })
            .collect();
        let mut g = Graph {
            fair: fair.clone(),
            ..Graph::default()
        };
        let initial = self.engine.initial();
        self.engine.load(initial);
        self.engine.set_node(self.root);
        match self.engine.property_holds(k) {
            Ok(true) => return,
            Ok(false) => {}
            Err(record) => return self.report(Vec::new(), record),
        }
        let fp = match self.engine.state_fingerprint(initial) {
            Ok(fp) => fp,
            Err(_) => return,
        };
        self.engine.retain(initial);
        let mut stack: Vec<Frame> = Vec::new();
        let mut next_index = 0u32;
        let root = self.root;
        // The whole pending graph is explored, so that the counterexample
        // shown is the one nearest to the initial state: states without
        // successor, and the components with a fair cycle (by the index
        // of their list in `fair_sccs`).
        let mut terminal: Vec<bool> = Vec::new();
        let mut in_fair_scc: Vec<u32> = Vec::new();
        let mut fair_sccs: Vec<Vec<u32>> = Vec::new();
        let complete = 'search: {
            let push = |g: &mut Graph,
                        s: &mut Self,
                        stack: &mut Vec<Frame>,
                        terminal: &mut Vec<bool>,
                        next_index: &mut u32,
                        state: StateId,
                        fp: Fingerprint,
                        parent: Option<(u32, u32)>,
                        node: u32| {
                let idx = *next_index;
                *next_index += 1;
                g.index.insert(fp.0, idx);
                g.low.push(idx);
                g.on_stack.push(true);
                g.parent.push(parent);
                g.node.push(node);
                g.out.push(Vec::new());
                g.tarjan.push(idx);
                let (succ, enabled_fair) = s.successors(state, node, &fair);
                g.enabled_fair.push(enabled_fair);
                terminal.push(succ.is_empty());
                stack.push(Frame {
                    idx,
                    state,
                    succ: succ.into_iter(),
                });
            };
            push(
                &mut g,
                self,
                &mut stack,
                &mut terminal,
                &mut next_index,
                initial,
                fp,
                None,
                root,
            );
            while let Some(frame) = stack.last_mut() {
                if self.stop_requested() {
                    break 'search false;
                }
                let from = frame.idx;
                if let Some((step, succ, fp)) = frame.succ.next() {
                    let e = &mut *self.engine;
                    e.load(succ);
                    // A property that panics was reported by the search.
                    let holds = e.property_holds(k).unwrap_or(true);
                    if holds {
                        e.release(succ);
                        continue;
                    }
                    let sid = g.step_id(&step);
                    if let Some(&to) = g.index.get(&fp.0) {
                        e.release(succ);
                        g.out[from as usize].push((to, sid));
                        if g.on_stack[to as usize] {
                            g.low[from as usize] = g.low[from as usize].min(to);
                        }
                        continue;
                    }
                    let parent_node = g.node[from as usize];
                    let Some(node) =
                        e.record_node(parent_node, step.event, &step.choices, step.seed)
                    else {
                        e.release(succ);
                        break 'search false;
                    };
                    let to = next_index;
                    g.out[from as usize].push((to, sid));
                    push(
                        &mut g,
                        self,
                        &mut stack,
                        &mut terminal,
                        &mut next_index,
                        succ,
                        fp,
                        Some((from, sid)),
                        node,
                    );
                    continue;
                }
                // Every successor seen: close the frame.
                let done = stack.pop().expect("a frame");
                self.engine.release(done.state);
                let v = done.idx;
                if let Some(parent) = stack.last() {
                    let p = parent.idx as usize;
                    g.low[p] = g.low[p].min(g.low[v as usize]);
                }
                if g.low[v as usize] != v {
                    continue;
                }
                // `v` roots a component: the states above it on Tarjan's
                // stack.
                let at = g
                    .tarjan
                    .iter()
                    .rposition(|&x| x == v)
                    .expect("v is on the stack");
                let members: Vec<u32> = g.tarjan.split_off(at);
                for &m in &members {
                    g.on_stack[m as usize] = false;
                }
                if fair_cycle(&g, &members, v, fair.len()).is_some() {
                    in_fair_scc.resize(g.low.len(), u32::MAX);
                    for &m in &members {
                        in_fair_scc[m as usize] = fair_sccs.len() as u32;
                    }
                    fair_sccs.push(members);
                }
            }
            true
        };
        for frame in stack.drain(..) {
            self.engine.release(frame.state);
        }
        if !complete {
            return;
        }
        in_fair_scc.resize(g.low.len(), u32::MAX);
        // The counterexample nearest to the initial state: a state without
        // successor, or the entry into a fair component (then round it
        // from there).
        let Some(at) = g.nearest(|x| terminal[x as usize] || in_fair_scc[x as usize] != u32::MAX)
        else {
            return;
        };
        let cycle = (!terminal[at as usize]).then(|| {
            let members = &fair_sccs[in_fair_scc[at as usize] as usize];
            fair_cycle(&g, members, at, fair.len())
                .expect("a component with a fair cycle has one through each state")
        });
        let mut steps = g.stem(at);
        if let Some(path) = g.shortest(at) {
            steps = path;
        }
        let stem = steps.len();
        let message = match &cycle {
            Some(cycle) => {
                steps.extend(cycle.iter().map(|&s| g.steps[s as usize].clone()));
                format!(
                    "`{name}` never holds: after {stem} step{}, a cycle of {} step{} repeats \
                     forever{}",
                    plural(stem),
                    cycle.len(),
                    plural(cycle.len()),
                    if fair.is_empty() {
                        String::new()
                    } else {
                        " (it starves no fair handler)".to_string()
                    }
                )
            }
            None => format!(
                "`{name}` never holds: after {stem} step{}, no handler is enabled (or every \
                 enabled one fails)",
                plural(stem)
            ),
        };
        let record = ViolationRecord {
            kind: ViolationKind::Liveness,
            property: name.into(),
            message,
            location: None,
        };
        let key = (record.kind, record.property.clone(), None);
        if !self.seen_violations.insert(key) {
            return;
        }
        isolate::phase(isolate::IN_CHECKER, 0, 0, 0, 0);
        let mut trace = self.engine.build_trace(&steps, record.clone());
        trace.loop_start = cycle.map(|_| stem);
        trace.also_violated.clear();
        let violation = crate::engine::trace::Violation { record, trace };
        if isolate::isolated() {
            let _sys = crate::sys::scope::system_scope();
            isolate::stream(&serde_json::to_string(&violation).expect("a violation serialises"));
        }
        self.violations.push(violation);
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// When the component `members` (rooted at `root`) holds a fair cycle,
/// one: the steps of a cycle from `root` back to it through, for each
/// fair event, an edge that takes it or a state where it is disabled.
fn fair_cycle(g: &Graph, members: &[u32], root: u32, fair: usize) -> Option<Vec<u32>> {
    let mut scc = vec![false; g.low.len()];
    for &m in members {
        scc[m as usize] = true;
    }
    let has_edge = members
        .iter()
        .any(|&m| g.out[m as usize].iter().any(|&(to, _)| scc[to as usize]));
    if !has_edge {
        return None;
    }
    // For each fair event: a state of the component where it is
    // disabled, or an edge inside it that takes it.
    enum Visit {
        State(u32),
        Edge(u32, u32, u32),
    }
    let mut visits = Vec::new();
    for f in 0..fair as u32 {
        if let Some(&s) = members
            .iter()
            .find(|&&m| !g.enabled_fair[m as usize].contains(&f))
        {
            visits.push(Visit::State(s));
            continue;
        }
        let edge = members.iter().find_map(|&m| {
            g.out[m as usize].iter().find_map(|&(to, step)| {
                let s = &g.steps[step as usize];
                let taken = fair_index(g, s.event, f);
                (scc[to as usize] && taken).then_some(Visit::Edge(m, to, step))
            })
        });
        visits.push(edge?);
    }
    // The cycle: from the root through each visit, then home.
    let mut steps = Vec::new();
    let mut at = root;
    for v in visits {
        match v {
            Visit::State(s) if s == at => {}
            Visit::State(s) => {
                let (path, end) = g.path_within(&scc, at, |x| x == s)?;
                steps.extend(path);
                at = end;
            }
            Visit::Edge(from, to, step) => {
                if from != at {
                    let (path, _) = g.path_within(&scc, at, |x| x == from)?;
                    steps.extend(path);
                }
                steps.push(step);
                at = to;
            }
        }
    }
    if at != root || steps.is_empty() {
        let (path, _) = g.path_within(&scc, at, |x| x == root)?;
        steps.extend(path);
    }
    Some(steps)
}

/// Whether `event` is fair event number `f`.
fn fair_index(g: &Graph, event: Event, f: u32) -> bool {
    g.fair.get(f as usize) == Some(&event)
}
