//! The search tree's nodes and the traces built from them: each step
//! described (what was delivered, sent, set), with [`Trace`] built in one
//! place ([`trace_of`]).

use super::crash::logged_path;
use super::events::Event;
use super::events::Outcome;
use super::events::RawStep;
use super::events::{ENV, LINK, LOSE};
use super::fingerprint::hex;
use super::names::Names;
use super::setup::Engine;
use crate::engine::erased::Erased as P;
use std::time::{Duration, Instant};

use crate::engine::isolate::{self};
use crate::engine::trace::{
    PathRun, Sent, Step, StepKind, Trace, ViolationRecord, DESCRIBED_STEPS, LONG_TRACE_VERSION,
    TRACE_VERSION,
};
use crate::identity::TypeSource;
use crate::memory::FingerprintWidth;
use crate::model::ctx::user_code;
use crate::model::{FingerprintMode, Model, Trigger};
use crate::sys::scope::system_scope;

/// A trace of `model`: the one place a [`Trace`] is made. Its steps, its
/// violation, the source of identity each type used and the shape of the
/// handler tables; the initial fingerprint and the other invariants the
/// last state breaks are the caller's to add when it knows them.
pub(crate) fn trace_of(
    model: &Model<P>,
    fingerprint: Option<FingerprintMode>,
    sources: Vec<TypeSource>,
    handlers: String,
    steps: Vec<Step>,
    record: ViolationRecord,
) -> Trace {
    Trace {
        version: TRACE_VERSION,
        state_hash: crate::sys::hash::STATE_HASH.to_string(),
        model: model.name.clone(),
        fingerprint_bits: match model.width {
            FingerprintWidth::Bits128 => 128,
            _ => 64,
        },
        fingerprint,
        initial_fingerprint: String::new(),
        prefix: Vec::new(),
        steps,
        violation: Some(record),
        also_violated: Vec::new(),
        sources,
        handlers,
        build: None,
        loop_start: None,
        symmetric: !model.symmetry.is_empty() && model.reduce,
        twin: Vec::new(),
    }
}

/// The steps of a long trace that are not described (all but the last
/// [`DESCRIBED_STEPS`]), and the ones that are.
pub(crate) fn split_long(steps: &[RawStep]) -> (&[RawStep], &[RawStep]) {
    steps.split_at(steps.len().saturating_sub(DESCRIBED_STEPS))
}

/// `steps` as a trace's prefix: runs of the same event with the same
/// choices and seed.
pub(crate) fn runs_of(steps: &[RawStep]) -> Vec<PathRun> {
    let mut runs: Vec<PathRun> = Vec::new();
    for step in steps {
        let process = (step.event.actor != ENV).then_some(step.event.actor);
        match runs.last_mut() {
            Some(r)
                if r.process == process
                    && r.handler == step.event.handler
                    && r.seed == step.seed
                    && r.choices == step.choices =>
            {
                r.times += 1
            }
            _ => runs.push(PathRun {
                process,
                handler: step.event.handler,
                choices: step.choices.clone(),
                seed: step.seed,
                times: 1,
            }),
        }
    }
    runs
}

/// Gives `trace` the prefix `runs` (and the version that says it has one).
fn with_prefix(mut trace: Trace, runs: Vec<PathRun>) -> Trace {
    if !runs.is_empty() {
        trace.version = LONG_TRACE_VERSION;
    }
    trace.prefix = runs;
    trace
}

/// A step as recorded, without running it: which process ran which
/// handler (named by `actor`, `handler` and `kind`) with which choices.
fn bare_step(step: &RawStep, actor: String, handler: &str, kind: StepKind) -> Step {
    Step {
        process: (step.event.actor != ENV).then_some(step.event.actor),
        actor,
        handler: handler.to_string(),
        kind,
        choices: step.choices.clone(),
        seed: step.seed,
        message: None,
        from: None,
        to: None,
        sent: Vec::new(),
        timers: Vec::new(),
        fingerprint: String::new(),
        before: None,
        after: None,
    }
}

/// A trace of raw steps with only the names of its events: what is left
/// when the steps cannot be re-run (they do not behave the same again).
pub(crate) fn bare_trace(n: &Names<'_, P>, steps: &[RawStep], record: ViolationRecord) -> Trace {
    let (head, steps) = split_long(steps);
    let steps = steps
        .iter()
        .map(|s| {
            bare_step(
                s,
                n.actor(s.event.actor),
                n.handler(s.event),
                n.step_kind(s.event),
            )
        })
        .collect();
    let trace = trace_of(
        n.model,
        n.model.fingerprint,
        Vec::new(),
        n.shape(),
        steps,
        record,
    );
    with_prefix(trace, runs_of(head))
}

impl<'m> Engine<'m, P> {
    /// Records the node of a new state reached from `parent` by `e`;
    /// `None` when the search tree has no room left.
    pub(crate) fn record_node(
        &mut self,
        parent: u32,
        e: Event,
        choices: &[usize],
        seed: u32,
    ) -> Option<u32> {
        let actor = if e.actor == ENV {
            u32::MAX
        } else {
            e.actor as u32
        };
        self.tree
            .push(parent, actor, e.handler as u32, seed, choices)
    }

    /// The steps from the initial state to `node`. In a search across
    /// processes, a path that enters this process's tree from another's
    /// starts with a [`LINK`] step naming where it came from (see
    /// [`Engine::link_node`]): the steps before it are that process's to
    /// give.
    pub(crate) fn path(&self, node: u32) -> Vec<RawStep> {
        let mut steps = logged_path(
            self.tree
                .path(node)
                .expect("the path to a node the search recorded"),
        );
        if let Some(links) = &self.links {
            if let Some(&(rank, from)) = self.tree.top(node).and_then(|top| links.get(&top)) {
                steps.insert(
                    0,
                    RawStep {
                        event: Event {
                            actor: LINK,
                            handler: rank as usize,
                        },
                        choices: vec![from as usize],
                        seed: 0,
                    },
                );
            }
        }
        steps
    }

    /// Where the path to `node` continues backwards, for a state that
    /// member `me` of a search across processes hands to another member
    /// (`Search::even_out`): the member and the node of its tree that the
    /// last step starts from, and that step. The receiver records the
    /// state with that step and a link to that node.
    pub(crate) fn origin(&self, node: u32, me: u32) -> (u32, u32, RawStep) {
        let (parent, step) = self
            .tree
            .parent_and_step(node)
            .expect("a state handed over has a node below the root");
        let step = logged_path(vec![step])
            .pop()
            .expect("one step in, one step out");
        match self.links.as_ref().and_then(|l| l.get(&node)) {
            // A state another member sent: its path continues there.
            Some(&(rank, from)) => (rank, from, step),
            None => (me, parent, step),
        }
    }

    /// Turns on the links of a search across processes (see
    /// [`Engine::path`]).
    pub(crate) fn enable_links(&mut self) {
        self.links.get_or_insert_with(Default::default);
    }

    /// Records that `node`, a child of the root, holds a state process
    /// `rank` reached from node `from` of its tree.
    pub(crate) fn link_node(&mut self, node: u32, rank: u32, from: u32) {
        self.links
            .as_mut()
            .expect("links are on in a search across processes")
            .insert(node, (rank, from));
    }

    /// The bytes the links hold.
    pub(crate) fn links_bytes(&self) -> usize {
        self.links
            .as_ref()
            .map_or(0, |l| l.capacity() * (size_of::<(u32, (u32, u32))>() + 1))
    }

    pub(crate) fn show(&self, actor: usize) -> Option<String> {
        let show = self.model.debug?;
        if actor == ENV {
            return None;
        }
        let _sys = system_scope();
        // The process's Debug is user code: the watchdog sees it run.
        isolate::phase(isolate::IN_IDENTITY, 0, actor as u64, 0, 1);
        // SAFETY: a live root of the loaded state.
        user_code(false, || show(unsafe { &*self.roots[actor] })).ok()
    }

    pub(crate) fn step_kind(&self, e: Event) -> StepKind {
        match (e.actor, e.handler) {
            (ENV, LOSE) => StepKind::Loss,
            (ENV, _) => StepKind::Duplication,
            _ if matches!(self.handlers[e.handler].trigger, Trigger::Timer(_)) => StepKind::Timer,
            _ => StepKind::Handler,
        }
    }

    /// A trace step: the event, its choices, and what its run did.
    pub(crate) fn describe_step(
        &self,
        step: &RawStep,
        outcome: Outcome,
        fingerprint: String,
        before: Option<String>,
        after: Option<String>,
    ) -> Step {
        let (from, to, message) = match outcome.delivered {
            Some((from, to, m)) => (Some(from), Some(to), Some(m)),
            None => (None, None, None),
        };
        Step {
            process: (step.event.actor != ENV).then_some(step.event.actor),
            actor: self.actor_name(step.event.actor),
            handler: self.handler_name(step.event).into(),
            kind: self.step_kind(step.event),
            choices: step.choices.clone(),
            seed: step.seed,
            message,
            from,
            to,
            sent: outcome
                .sent
                .into_iter()
                .map(|(to, message, fate)| Sent {
                    to,
                    message,
                    fate: fate.into(),
                })
                .collect(),
            timers: outcome.timers,
            fingerprint,
            before,
            after,
        }
    }

    /// How long the forked child that builds a trace (see
    /// [`Engine::build_trace`]) may take: it re-runs at most the steps of
    /// one path.
    const TRACE_CHILD_LIMIT: Duration = Duration::from_secs(120);

    /// Re-runs `steps` from the initial state to describe them. When a
    /// thread of user code that outlived its handler uses the arenas
    /// (they are frozen), in a forked child, whose copy of the arenas no
    /// other thread uses; should the child fail, the trace names the
    /// steps without describing them.
    pub(crate) fn build_trace(&mut self, steps: &[RawStep], record: ViolationRecord) -> Trace {
        if !self.mem.frozen() {
            return self.build_trace_here(steps, record);
        }
        let watch = isolate::Watch {
            transition_timeout: None,
            deadline: Some(Instant::now() + Self::TRACE_CHILD_LIMIT),
        };
        let end = isolate::run_in_child(watch, || {
            self.mem.thaw_in_child();
            let trace = self.build_trace_here(steps, record.clone());
            let _sys = system_scope();
            serde_json::to_string(&trace).expect("a trace serialises")
        });
        let built = match end {
            Ok(isolate::ChildEnd::Finished(text)) => serde_json::from_str::<Trace>(&text).ok(),
            _ => None,
        };
        built.unwrap_or_else(|| self.bare_trace(steps, record))
    }

    /// The trace of `steps` as recorded, without running them: which
    /// process ran which handler with which choices.
    fn bare_trace(&self, steps: &[RawStep], record: ViolationRecord) -> Trace {
        let (head, steps) = split_long(steps);
        let steps = steps
            .iter()
            .map(|step| {
                let (actor, handler) = (step.event.actor, self.handler_name(step.event));
                bare_step(
                    step,
                    self.actor_name(actor),
                    handler,
                    self.step_kind(step.event),
                )
            })
            .collect();
        let sources = self.fp.sources.clone();
        let trace = trace_of(
            self.model,
            self.fp.mode,
            sources,
            self.shape(),
            steps,
            record,
        );
        with_prefix(trace, runs_of(head))
    }

    fn build_trace_here(&mut self, steps: &[RawStep], record: ViolationRecord) -> Trace {
        self.mem.restore(self.initial);
        let mut fp = self.fresh_fingerprinter();
        let initial_fingerprint = self
            .trace_fingerprint(&mut fp, self.initial)
            .map_or_else(|_| String::new(), hex);
        // A long trace's first steps are run without being described (see
        // `DESCRIBED_STEPS`).
        let (head, steps) = split_long(steps);
        let mut out = Vec::with_capacity(steps.len());
        let mut last_failed = false;
        // The state each step starts from, kept until the next one is
        // captured.
        let mut pre = self.initial;
        for step in head {
            let outcome = self.run(step.event, step.choices.clone(), step.seed, false, pre);
            if outcome.cut_short() || self.mem.take_exhaustion().is_some() {
                // The steps did not behave as in the search (a flaky
                // crash): the caller keeps them bare.
                fp.release(&mut self.mem);
                let all: Vec<RawStep> = head.iter().chain(steps).cloned().collect();
                return self.bare_trace(&all, record);
            }
            let s = self.mem.capture();
            if pre != self.initial {
                self.mem.release(pre);
            }
            pre = s;
        }
        for step in steps {
            let before = self.show(step.event.actor);
            let outcome = self.run_described(step.event, step.choices.clone(), step.seed, pre);
            let (fingerprint, after) =
                if outcome.cut_short() || self.mem.take_exhaustion().is_some() {
                    last_failed = true;
                    (String::new(), None)
                } else {
                    let s = self.mem.capture();
                    let print = self
                        .trace_fingerprint(&mut fp, s)
                        .map_or_else(|_| String::new(), hex);
                    if pre != self.initial {
                        self.mem.release(pre);
                    }
                    pre = s;
                    (print, self.show(step.event.actor))
                };
            out.push(self.describe_step(step, outcome, fingerprint, before, after));
        }
        // The final state is loaded unless the last step failed: name every
        // other invariant it breaks (the first one found is `record`).
        let also_violated = if last_failed {
            Vec::new()
        } else {
            let mut names: Vec<String> = Vec::new();
            for v in self.invariant_violations(false) {
                if v.property != record.property && !names.contains(&v.property) {
                    names.push(v.property);
                }
            }
            names
        };
        fp.release(&mut self.mem);
        if pre != self.initial {
            self.mem.release(pre);
        }
        let sources = self.fp.sources.clone();
        let trace = trace_of(self.model, self.fp.mode, sources, self.shape(), out, record);
        let mut trace = with_prefix(trace, runs_of(head));
        trace.initial_fingerprint = initial_fingerprint;
        trace.also_violated = also_violated;
        trace
    }
}
