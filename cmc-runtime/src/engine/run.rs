//! The engine: a model set up in memory (arenas, roots, the initial state)
//! and what it takes to run one transition from one state — the enabled
//! events, a handler or environment event run with a choice script, the
//! successor's fingerprint (before or after capture), the properties of a
//! state, the search tree's nodes and the traces built from them. Which
//! transitions run, in what order, is the search's business
//! ([`crate::search`]); running a recorded trace again is the replay's
//! ([`crate::driver::replay`]).

use std::collections::HashSet;
use std::fmt;
use std::time::{Duration, Instant};

use rand::Rng;

use crate::engine::isolate::{self};
use crate::engine::trace::{
    Sent, Step, StepKind, Trace, ViolationKind, ViolationRecord, TRACE_VERSION,
};
use crate::engine::tree::Tree;
use crate::identity::canon::{CanonTable, HeapGraph};
use crate::identity::{HashFn, TypeSource};
use crate::memory::globals::Globals;
use crate::memory::{ArenaId, Fingerprint, FingerprintWidth, Memory, MemoryConfig, StateId};
use crate::model::ctx::{self, begin_run, end_run, user_code, Run};
use crate::model::env::Env;
use crate::model::world::World;
use crate::model::{Ctx, View};
use crate::model::{FingerprintMode, Handler, Invariant, Model, Process, StateHasher, Trigger};
use crate::sys::scope::system_scope;

/// The actor index of environment events in internal steps.
pub(crate) const ENV: usize = usize::MAX;
pub(crate) const LOSE: usize = 0;
pub(crate) const DUPLICATE: usize = 1;
pub(crate) const ENV_EVENTS: [&str; 2] = ["lose message", "duplicate message"];

/// The tool could not check the model (as opposed to finding a violation).
#[derive(Debug)]
#[non_exhaustive]
pub enum CheckError {
    /// The model is malformed.
    Model(String),
    /// The operating system refused (e.g. reserving an arena).
    Io(std::io::Error),
    /// A trace does not fit the model.
    Trace(String),
    /// The child process of an isolated check failed without a result.
    Isolation(String),
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Model(m) => write!(f, "invalid model: {m}"),
            CheckError::Io(e) => write!(f, "{e}"),
            CheckError::Trace(m) => write!(f, "the trace does not fit the model: {m}"),
            CheckError::Isolation(m) => write!(f, "the checking process failed: {m}"),
        }
    }
}

impl std::error::Error for CheckError {}

impl From<std::io::Error> for CheckError {
    fn from(e: std::io::Error) -> Self {
        CheckError::Io(e)
    }
}

/// An event: a process's handler, or an environment event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Event {
    pub(crate) actor: usize,
    pub(crate) handler: usize,
}

/// A step as the engine records it: the event and its choice values.
#[derive(Clone, Debug)]
pub(crate) struct RawStep {
    pub(crate) event: Event,
    pub(crate) choices: Vec<usize>,
    /// The random-seed variant (`Model::random_seeds`; 0 is the default
    /// seed).
    pub(crate) seed: u32,
}

/// The steps of a crash: the recorded path to the node being expanded,
/// then the step that was running (from the current record).
pub(crate) fn crash_steps(
    current: Option<&[u64]>,
    ancestry: Option<Vec<isolate::LoggedStep>>,
) -> Option<Vec<RawStep>> {
    let [isolate::CHECKING, _node, actor, handler, seed, n, script @ ..] = current? else {
        return None;
    };
    let actor_of = |a: u64| {
        if a == u64::MAX || a == u64::from(u32::MAX) {
            ENV
        } else {
            a as usize
        }
    };
    let mut steps: Vec<RawStep> = ancestry?
        .into_iter()
        .map(|s| RawStep {
            event: Event {
                actor: actor_of(u64::from(s.actor)),
                handler: s.handler as usize,
            },
            choices: s.choices.into_iter().map(|c| c as usize).collect(),
            seed: s.seed,
        })
        .collect();
    let n = (*n as usize).min(script.len());
    steps.push(RawStep {
        event: Event {
            actor: actor_of(*actor),
            handler: *handler as usize,
        },
        choices: script[..n].iter().map(|&c| c as usize).collect(),
        seed: *seed as u32,
    });
    Some(steps)
}

pub(crate) struct Outcome {
    /// The choices made, as (value, range).
    pub(crate) ranges: Vec<(usize, usize)>,
    pub(crate) taken: Vec<usize>,
    pub(crate) panic: Option<(String, String)>,
    pub(crate) model_error: Option<String>,
    pub(crate) delivered: Option<(usize, usize, String)>,
    pub(crate) sent: Vec<(usize, String, &'static str)>,
    /// Timers it started or cancelled (see `ctx::Run::timers`).
    pub(crate) timers: Vec<String>,
    /// Whether the run drew randomness (looked at only with more than one
    /// random seed).
    pub(crate) drew: bool,
    /// What the run touched besides its process (partial-order reduction).
    pub(crate) footprint: crate::model::por::Footprint,
    /// A global the run initialized that could not be moved out of the
    /// arenas (see [`crate::memory::globals`]).
    pub(crate) global_error: Option<String>,
    /// A replayed choice out of its range (see `ctx::Run::misfit`).
    pub(crate) misfit: Option<String>,
    /// A thread the handler started that outlived it (see
    /// [`crate::memory::threads`]): the search cannot go on.
    pub(crate) thread_error: Option<String>,
}

impl Outcome {
    /// Whether the run gave no successor: a panic, or a thread left behind.
    pub(crate) fn cut_short(&self) -> bool {
        self.panic.is_some() || self.thread_error.is_some()
    }
}

/// A `sometimes` or `eventually` property as the engine runs it.
pub(crate) struct PropertyFn<P: Process> {
    pub(crate) name: &'static str,
    pub(crate) kind: crate::model::PropertyKind,
    pub(crate) check: Result<fn(&World<'_, P>) -> bool, crate::model::registered::ErasedCheck>,
}

/// The model's properties, then the registered ones.
pub(crate) fn property_fns<P: Process>(model: &Model<P>) -> Vec<PropertyFn<P>> {
    model
        .properties
        .iter()
        .map(|p| PropertyFn {
            name: p.name,
            kind: p.kind,
            check: Ok(p.check),
        })
        .chain(
            crate::model::registered::properties_for::<P>()
                .into_iter()
                .map(|(name, kind, check)| PropertyFn {
                    name,
                    kind,
                    check: Err(check),
                }),
        )
        .collect()
}

/// A model set up in memory: arenas, roots, the initial state.
pub(crate) struct Engine<'m, P: Process> {
    pub(crate) model: &'m Model<P>,
    pub(crate) mem: Memory,
    pub(crate) arenas: Vec<ArenaId>,
    pub(crate) env_arena: ArenaId,
    pub(crate) roots: Vec<*mut P>,
    pub(crate) env: *mut Env<P::Msg, P::Shared>,
    pub(crate) handlers: Vec<Handler<P>>,
    pub(crate) invariants: Vec<Invariant<P>>,
    /// Global invariants registered with `#[cmc::invariant]` for `P`.
    pub(crate) registered: Vec<(&'static str, crate::model::registered::ErasedCheck)>,
    /// The model's `sometimes` and `eventually` properties, then the
    /// registered ones.
    pub(crate) properties: Vec<PropertyFn<P>>,
    pub(crate) initial: StateId,
    /// How each stored state was first reached (shared with the parent
    /// process in an isolated run, see [`crate::engine::tree`]).
    pub(crate) tree: Tree,
    pub(crate) fp: Fingerprinter<P>,
    /// Whether handlers run on a scrubbed stack (see [`Engine::new`]).
    pub(crate) scrub: bool,
    /// The generator state that picks a run's choices beyond its script
    /// (a random walk's; see `ctx::Run::pick`), while the caller sets it.
    pub(crate) pick: Option<u64>,
    pub(crate) globals: Globals,
    /// The seed base of the state being expanded (see
    /// [`Engine::seed_key`]), computed once for all its transitions; set
    /// and cleared by the search around each expansion. The flag tells
    /// whether it is exact (a function of the state's identity) or
    /// provisional (its bytes, under a heap identity).
    pub(crate) seed_base: Option<(StateId, u128, bool)>,
    /// The node of the search tree whose guards or invariants run next
    /// (for the crash log: a crash there is attributed to that state).
    pub(crate) at: u32,
    /// Scratch for [`Engine::pending_fingerprint`]: which arenas changed,
    /// and the components it computed.
    pub(crate) changed: Vec<bool>,
    pub(crate) computed: Vec<(ArenaId, u128)>,
    /// The sum of components [`Engine::pending_fingerprint`] found last.
    pub(crate) pending_sum: u128,
    /// Contents of process arenas (their `Memory::arena_key`s) on which
    /// every per-process invariant held, when the search lets the engine
    /// remember them (see [`Engine::invariant_violations`]).
    pub(crate) passed: Option<Box<[std::cell::Cell<u128>]>>,
}

/// How one type of the model is fingerprinted.
pub(crate) enum Chosen<T> {
    /// By a function of its value (`StateHash`, `Hash` or `Debug`).
    Value(FingerprintMode, HashFn<T>),
    /// By the canonical heap.
    Heap,
    /// By the raw pages of its arena.
    Bytes,
    /// By the model's abstraction function.
    Abstract,
    /// Not at all (a type of size zero with no source: nothing to see).
    Nothing,
}

impl<T> Clone for Chosen<T> {
    fn clone(&self) -> Self {
        match self {
            Chosen::Value(m, f) => Chosen::Value(*m, *f),
            Chosen::Heap => Chosen::Heap,
            Chosen::Bytes => Chosen::Bytes,
            Chosen::Abstract => Chosen::Abstract,
            Chosen::Nothing => Chosen::Nothing,
        }
    }
}

impl<T> Chosen<T> {
    pub(crate) fn mode(&self) -> Option<FingerprintMode> {
        match self {
            Chosen::Value(m, _) => Some(*m),
            Chosen::Heap => Some(FingerprintMode::Heap),
            Chosen::Bytes => Some(FingerprintMode::Bytes),
            Chosen::Abstract => Some(FingerprintMode::Abstract),
            Chosen::Nothing => None,
        }
    }
}

/// What the search's fingerprints are made of: one component per process,
/// computed from the source chosen for the process type and cached on the
/// arena's page table (an arena a transition did not touch keeps its table,
/// hence its component), and the environment's, computed from its meaning
/// (messages by their identity keys, the shared variables by their source).
pub(crate) struct Fingerprinter<P: Process> {
    pub(crate) process: Chosen<P>,
    pub(crate) shared: Chosen<P::Shared>,
    /// Heap mode: one graph per process arena.
    pub(crate) graphs: Vec<HeapGraph>,
    /// The shared variables' heap, when they are fingerprinted by it.
    pub(crate) shared_graph: Option<HeapGraph>,
    pub(crate) table: CanonTable,
    /// Which source each type uses, for reports.
    pub(crate) sources: Vec<TypeSource>,
    /// The mode that overrode each type's best source, if any.
    pub(crate) mode: Option<FingerprintMode>,
}

impl<P: Process> Fingerprinter<P> {
    /// Chooses the sources: the mode the model asks for, else each type's
    /// best.
    pub(crate) fn new(
        model: &Model<P>,
        mode: Option<FingerprintMode>,
        mem: &Memory,
        arenas: &[ArenaId],
        roots: &[*mut P],
        env_arena: ArenaId,
        env: *mut Env<P::Msg, P::Shared>,
    ) -> Result<Self, CheckError> {
        let fns = P::hash_fns();
        crate::identity::typed::new_check();
        let process = match mode {
            None => fns
                .process
                .best_or_typed()
                .map_or(Chosen::Heap, |(m, f)| Chosen::Value(m, f)),
            Some(FingerprintMode::Typed) => match crate::identity::typed::available::<P>() {
                Ok(()) => Chosen::Value(
                    FingerprintMode::Typed,
                    crate::identity::typed::typed_hash::<P>,
                ),
                Err(why) => {
                    return Err(CheckError::Model(format!(
                        "fingerprint mode `typed` cannot describe the process type {}: {why}",
                        std::any::type_name::<P>()
                    )))
                }
            },
            Some(FingerprintMode::Heap) => Chosen::Heap,
            Some(FingerprintMode::Bytes) => Chosen::Bytes,
            Some(FingerprintMode::Abstract) => {
                if model.abstraction.is_none() {
                    return Err(CheckError::Model(
                        "fingerprint mode `abstract` needs an abstraction function \
                         (Model::abstraction); this model has none"
                            .into(),
                    ));
                }
                Chosen::Abstract
            }
            Some(mode) => match fns.process.get(mode) {
                Some(f) => Chosen::Value(mode, f),
                None => {
                    let need = match mode {
                        FingerprintMode::State => "cmc::StateHash (derive it)",
                        FingerprintMode::Hash => "Hash (derive it)",
                        _ => "Debug (derive it)",
                    };
                    return Err(CheckError::Model(format!(
                        "fingerprint mode `{}` needs the process type {} to implement {need}, \
                         or choose another mode",
                        mode.name(),
                        std::any::type_name::<P>()
                    )));
                }
            },
        };
        let shared = match fns.shared.best() {
            Some((m, f)) => Chosen::Value(m, f),
            None if size_of::<P::Shared>() == 0 => Chosen::Nothing,
            None if crate::identity::typed::available::<P::Shared>().is_ok() => Chosen::Value(
                FingerprintMode::Typed,
                crate::identity::typed::typed_hash::<P::Shared>,
            ),
            None => Chosen::Heap,
        };
        let graphs = if matches!(process, Chosen::Heap) {
            arenas
                .iter()
                .zip(roots)
                .map(|(&a, &r)| HeapGraph::new(mem, a, r as *const u8))
                .collect()
        } else {
            Vec::new()
        };
        let shared_graph = matches!(shared, Chosen::Heap).then(|| {
            // SAFETY: the environment was just built and is live.
            let shared: *const P::Shared = unsafe { &*(*env).shared };
            HeapGraph::new(mem, env_arena, shared.cast())
        });
        let msg_mode = fns.msg.best().map_or(FingerprintMode::Debug, |(m, _)| m);
        let mut sources = vec![TypeSource::of::<P>(
            "process",
            process.mode().expect("a process type always has a source"),
        )];
        if let Some(source) = shared.mode().filter(|_| size_of::<P::Shared>() != 0) {
            sources.push(TypeSource::of::<P::Shared>("shared", source));
        }
        sources.push(TypeSource::of::<P::Msg>("message", msg_mode));
        Ok(Fingerprinter {
            process,
            shared,
            graphs,
            shared_graph,
            table: CanonTable::new(),
            sources,
            mode,
        })
    }

    /// The same choices with nothing computed yet: fingerprints along a
    /// trace, which a replay in another process computes the same way from
    /// the same states (the canonical heap's table depends on the states it
    /// has seen).
    pub(crate) fn fresh(
        &self,
        mem: &Memory,
        arenas: &[ArenaId],
        roots: &[*mut P],
        env_arena: ArenaId,
        env: *mut Env<P::Msg, P::Shared>,
    ) -> Self {
        let graphs = if self.graphs.is_empty() {
            Vec::new()
        } else {
            arenas
                .iter()
                .zip(roots)
                .map(|(&a, &r)| HeapGraph::new(mem, a, r as *const u8))
                .collect()
        };
        let shared_graph = self.shared_graph.as_ref().map(|_| {
            // SAFETY: the environment root is live in every state.
            let shared: *const P::Shared = unsafe { &*(*env).shared };
            HeapGraph::new(mem, env_arena, shared.cast())
        });
        Fingerprinter {
            process: self.process.clone(),
            shared: self.shared.clone(),
            graphs,
            shared_graph,
            table: CanonTable::new(),
            sources: self.sources.clone(),
            mode: self.mode,
        }
    }

    /// Drops the states the heap graphs hold.
    pub(crate) fn release(&mut self, mem: &mut Memory) {
        for g in &mut self.graphs {
            g.release(mem);
        }
        if let Some(g) = &mut self.shared_graph {
            g.release(mem);
        }
    }
}

/// What computing a fingerprint needs of an engine, borrowed apart from its
/// fingerprinters.
pub(crate) struct Parts<'a, P: Process> {
    pub(crate) mem: &'a mut Memory,
    pub(crate) model: &'a Model<P>,
    pub(crate) arenas: &'a [ArenaId],
    pub(crate) env_arena: ArenaId,
    pub(crate) roots: &'a [*mut P],
    pub(crate) env: *mut Env<P::Msg, P::Shared>,
}

impl<P: Process> Parts<'_, P> {
    /// The fingerprint of `state`, the loaded state, computed by `fp`;
    /// components are cached on the page tables, and their sum on the
    /// state, when `cached`.
    pub(crate) fn fingerprint(
        mut self,
        fp: &mut Fingerprinter<P>,
        state: StateId,
        cached: bool,
    ) -> Result<Fingerprint, ViolationRecord> {
        let (fingerprint, sum) = self.combine(
            fp,
            state,
            |mem, arena| mem.tag(state, arena).filter(|_| cached),
            |mem, arena, c| {
                if cached {
                    mem.set_tag(state, arena, c);
                }
            },
        )?;
        if cached {
            self.mem.set_state_tag(state, sum);
        }
        Ok(fingerprint)
    }

    /// The fingerprint of the loaded memory, a successor of `pre` not
    /// captured yet, whose arenas differ from `pre` where `changed` (indexed
    /// by arena) says: an unchanged arena's component is `pre`'s. Only for
    /// sources computed from the live objects (a value's or an abstraction's
    /// hash), which need no captured state. The components computed are
    /// left in `computed` as (arena, component), for tagging the state
    /// once captured, with the sum of all components (returned). When
    /// `pre` carries its sum and its components, the cost is that of the
    /// changed arenas alone.
    pub(crate) fn fingerprint_changed(
        mut self,
        fp: &mut Fingerprinter<P>,
        pre: StateId,
        changed: &[bool],
        computed: &mut Vec<(ArenaId, u128)>,
    ) -> Result<(Fingerprint, u128), ViolationRecord> {
        computed.clear();
        if let Some(mut sum) = self.mem.state_tag(pre) {
            let n = self.arenas.len();
            let mut complete = true;
            for i in 0..=n {
                let arena = if i < n {
                    self.arenas[i]
                } else {
                    self.env_arena
                };
                if !changed[arena.0] {
                    continue;
                }
                let Some(old) = self.mem.tag(pre, arena) else {
                    complete = false;
                    break;
                };
                let c = if i < n {
                    self.process_component(fp, i, pre)?
                } else {
                    self.env_component(fp, pre)?
                };
                computed.push((arena, c));
                sum = sum
                    .wrapping_sub(crate::sys::hash::term(i, usize::MAX, old))
                    .wrapping_add(crate::sys::hash::term(i, usize::MAX, c));
            }
            if complete {
                return Ok((self.finish(sum), sum));
            }
            computed.clear();
        }
        self.combine(
            fp,
            pre,
            |mem, arena| mem.tag(pre, arena).filter(|_| !changed[arena.0]),
            |_, arena, c| computed.push((arena, c)),
        )
    }

    /// The fingerprint a sum of components gives.
    pub(crate) fn finish(&self, sum: u128) -> Fingerprint {
        if self.model.width == FingerprintWidth::Bits64 {
            return Fingerprint(u128::from(crate::sys::hash::finish64(sum)));
        }
        Fingerprint(crate::sys::hash::finish(sum))
    }

    /// Sums the components of the processes and the environment: `known`
    /// gives an arena's component when it need not be computed, `computed`
    /// receives each one that was. `state` is the loaded state for the
    /// sources that read a captured state. Returns the fingerprint and the
    /// sum.
    pub(crate) fn combine(
        &mut self,
        fp: &mut Fingerprinter<P>,
        state: StateId,
        known: impl Fn(&Memory, ArenaId) -> Option<u128>,
        mut computed: impl FnMut(&mut Memory, ArenaId, u128),
    ) -> Result<(Fingerprint, u128), ViolationRecord> {
        let mut sum = 0u128;
        for i in 0..self.arenas.len() {
            let arena = self.arenas[i];
            let c = match known(self.mem, arena) {
                Some(c) => c,
                None => {
                    let c = self.process_component(fp, i, state)?;
                    computed(self.mem, arena, c);
                    c
                }
            };
            sum = sum.wrapping_add(crate::sys::hash::term(i, usize::MAX, c));
        }
        let env = self.env_arena;
        let c = match known(self.mem, env) {
            Some(c) => c,
            None => {
                let c = self.env_component(fp, state)?;
                computed(self.mem, env, c);
                c
            }
        };
        sum = sum.wrapping_add(crate::sys::hash::term(self.arenas.len(), usize::MAX, c));
        Ok((self.finish(sum), sum))
    }

    /// Runs a source's function (user code) in checker memory.
    /// `what` names the source in a violation (called only if it panics).
    pub(crate) fn user<T: ?Sized>(
        what: impl FnOnce() -> String,
        value: &T,
        f: &dyn Fn(&T, &mut StateHasher),
    ) -> Result<u128, ViolationRecord> {
        let _sys = system_scope();
        user_code(false, || {
            let mut h = StateHasher::default();
            f(value, &mut h);
            h.finish128()
        })
        .map_err(|(message, location)| ViolationRecord {
            kind: ViolationKind::Panic,
            property: what(),
            message,
            location: Some(location),
        })
    }

    pub(crate) fn process_component(
        &mut self,
        fp: &mut Fingerprinter<P>,
        i: usize,
        state: StateId,
    ) -> Result<u128, ViolationRecord> {
        // SAFETY: a live root of the loaded state.
        let proc = unsafe { &*self.roots[i] };
        let what = |source: &'static str| move || format!("the {source} of process {i}");
        if matches!(fp.process, Chosen::Value(..) | Chosen::Abstract) {
            isolate::phase(isolate::IN_IDENTITY, 0, i as u64, 0, 0);
        }
        match &fp.process {
            Chosen::Bytes => Ok(self.mem.arena_sum(state, self.arenas[i])),
            Chosen::Heap => Ok(fp.graphs[i].fingerprint(self.mem, &mut fp.table, state)),
            Chosen::Value(mode, f) => crate::identity::cache::with_memory(self.mem, || {
                Self::user(what(source_name(*mode)), proc, f)
            }),
            Chosen::Abstract => {
                let f = self.model.abstraction.as_ref().expect("checked at setup");
                crate::identity::cache::with_memory(self.mem, || {
                    Self::user(what("abstraction"), proc, &|p, h| f(p, h))
                })
            }
            Chosen::Nothing => Ok(0),
        }
    }

    /// The network and timers by meaning (messages in their canonical
    /// order, each by its identity key), and the shared variables by their
    /// source.
    pub(crate) fn env_component(
        &mut self,
        fp: &mut Fingerprinter<P>,
        state: StateId,
    ) -> Result<u128, ViolationRecord> {
        use std::hash::{Hash, Hasher};
        // SAFETY: the environment root is live in every state.
        let env = unsafe { &*self.env };
        let net = {
            let _sys = system_scope();
            let mut h = StateHasher::default();
            env.fifo.hash(&mut h);
            h.write_usize(env.msgs.len());
            for m in &env.msgs {
                (m.to, m.from, m.key).hash(&mut h);
            }
            env.timers.hash(&mut h);
            h.finish128()
        };
        if matches!(fp.shared, Chosen::Value(..)) {
            isolate::phase(isolate::IN_IDENTITY, 0, u64::MAX, 0, 0);
        }
        let shared = match &fp.shared {
            Chosen::Value(mode, f) => crate::identity::cache::with_memory(self.mem, || {
                Self::user(
                    || format!("the {} of the shared variables", source_name(*mode)),
                    &*env.shared,
                    f,
                )
            })?,
            Chosen::Heap => {
                let g = fp.shared_graph.as_mut().expect("a graph for a shared heap");
                g.fingerprint(self.mem, &mut fp.table, state)
            }
            _ => 0,
        };
        Ok(crate::sys::hash::finish(net).wrapping_add(crate::sys::hash::term(0, 1, shared)))
    }
}

/// How a violation names a source whose code panicked.
pub(crate) fn source_name(mode: FingerprintMode) -> &'static str {
    match mode {
        FingerprintMode::State => "StateHash implementation",
        FingerprintMode::Hash => "Hash implementation",
        FingerprintMode::Debug => "Debug implementation",
        _ => "fingerprint",
    }
}

/// The message identity function of `P`: its best source, or its `Debug`
/// (every message has one).
pub(crate) fn message_key<P: Process>() -> HashFn<P::Msg> {
    P::hash_fns()
        .msg
        .best()
        .map_or(crate::identity::debug_hash::<P::Msg>, |(_, f)| f)
}

/// Setting up failed: either the tool (an error) or the model's own code
/// during initialisation (a violation with an empty trace).
pub(crate) enum SetupFailure {
    Error(CheckError),
    Violation(ViolationRecord),
}

pub(crate) fn hex(fp: Fingerprint) -> String {
    fp.to_string()
}

/// Initialises, in checker memory, the lazily created globals that handler
/// code commonly touches: standard output and error (their buffers), the
/// current thread's handle, and rand's thread-local generator. Were one of
/// them first touched inside a handler, it would be allocated in that
/// process's arena and then moved out of it (see [`crate::memory::globals`]);
/// initializing them here saves that work.
pub(crate) fn prewarm() {
    thread_local! {
        static DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if DONE.with(|d| d.replace(true)) {
        return;
    }
    let _sys = system_scope();
    // `stdout()` creates the buffer without taking the lock: a forked child
    // must never wait for a lock another thread held at the fork.
    let _ = std::io::stdout();
    let _ = std::io::stderr();
    let _ = std::thread::current();
    let _ = rand::thread_rng().gen::<u64>();
    let _ = crate::sys::layout::modules();
    crate::memory::threads::warm();
    ctx::install_panic_hook();
}

/// Runs the model's constructors once in checker memory and drops what
/// they build, before the processes are built in their arenas.
///
/// A constructor that initializes a lazy global (a protobuf message's
/// default instance, a logger, a `OnceLock`) does so here, in the system
/// heap, as if the program had done it before the check. Built afterwards,
/// the initial state is then the same whether or not this process touched
/// the global before (the search in a fresh child, a replay after it, an
/// emitted test): an initialization inside the arena would be moved out
/// (`crate::memory::globals`) and leave holes and stale words, which the canonical
/// heap and the seeds of random draws would see. A constructor that panics
/// here panics again when the processes are built, and is reported then.
///
/// A constructor that leaves a thread running is reported here, before it
/// runs in an arena.
pub(crate) fn warm_up<P: Process>(model: &Model<P>) -> Result<(), ViolationRecord> {
    let _sys = system_scope();
    for i in 0..model.count {
        if crate::determinism::random::enabled() {
            crate::determinism::random::seed_for(0x696e_6974_0000 | i as u128);
        }
        isolate::phase(isolate::IN_SETUP, 0, i as u64, 0, 0);
        let _ = user_code(true, || drop((model.init)(i)));
        constructor_threads(Some(i))?;
    }
    isolate::phase(isolate::IN_SETUP, 0, u64::MAX, 0, 0);
    let _ = user_code(true, || drop(P::Shared::default()));
    constructor_threads(None)
}

/// The violation of a constructor (of process `i`, or of the shared
/// variables) that left a thread behind (see [`crate::memory::threads`]).
pub(crate) fn constructor_threads(i: Option<usize>) -> Result<(), ViolationRecord> {
    let Some(left) = crate::memory::threads::after_user_code() else {
        return Ok(());
    };
    // The shared variables are built with the environment's arena current.
    let _sys = system_scope();
    let (property, who) = match i {
        Some(i) => (
            format!("initialisation of process {i}"),
            format!("the constructor of process {i}"),
        ),
        None => (
            "initialisation of the shared variables".to_string(),
            "the constructor of the shared variables".to_string(),
        ),
    };
    Err(ViolationRecord {
        kind: ViolationKind::ModelError,
        property,
        message: left.message(&who, "constructor"),
        location: None,
    })
}

impl<'m, P: Process> Engine<'m, P> {
    /// Sets up `model`; `mode` is the fingerprint mode that overrides each
    /// type's best source (the model's own, or a trace's).
    pub(crate) fn new(
        model: &'m Model<P>,
        mode: Option<FingerprintMode>,
    ) -> Result<Self, SetupFailure> {
        prewarm();
        warm_up(model).map_err(SetupFailure::Violation)?;
        if model.count == 0 {
            return Err(SetupFailure::Error(CheckError::Model(
                "a model needs at least one process".into(),
            )));
        }
        // A hand-written table, or a roles enum whose role has too many
        // handlers, can panic while it is built: a model error, not a
        // crash of the checker.
        let handlers = user_code(false, P::handlers).map_err(|(message, location)| {
            SetupFailure::Error(CheckError::Model(format!(
                "the handler table of {} could not be built: {message} (at {location})",
                std::any::type_name::<P>()
            )))
        })?;
        let invariants = user_code(false, P::invariants).map_err(|(message, location)| {
            SetupFailure::Error(CheckError::Model(format!(
                "the invariants of {} could not be listed: {message} (at {location})",
                std::any::type_name::<P>()
            )))
        })?;
        let mut names = HashSet::new();
        for h in &handlers {
            if !names.insert(h.name) {
                return Err(SetupFailure::Error(CheckError::Model(format!(
                    "two handlers are named `{}`: traces could not tell them apart",
                    h.name
                ))));
            }
        }
        let mut mem = Memory::new(MemoryConfig::new().width(model.width));
        let err = |e: std::io::Error| SetupFailure::Error(CheckError::Io(e));
        let arenas: Vec<ArenaId> = (0..model.count)
            .map(|i| mem.add_arena(format!("process {i}"), model.arena.clone()))
            .collect::<Result<_, _>>()
            .map_err(err)?;
        let env_arena = mem
            .add_arena("environment", model.env_arena.clone())
            .map_err(err)?;
        let mut globals = Globals::new();
        let mut roots = Vec::with_capacity(model.count);
        for (i, &arena) in arenas.iter().enumerate() {
            // A constructor's draws are a function of the process index
            // (identity::random), like a handler's of its state and event.
            if crate::determinism::random::enabled() {
                crate::determinism::random::seed_for(0x696e_6974_0000 | i as u128);
            }
            isolate::phase(isolate::IN_SETUP, 0, i as u64, 0, 0);
            let built = {
                let _in = mem.enter(arena);
                user_code(true, || Box::into_raw(Box::new((model.init)(i))))
            };
            constructor_threads(Some(i)).map_err(SetupFailure::Violation)?;
            match built {
                Ok(root)
                    if size_of::<P>() > 0
                        && !crate::memory::alloc::in_any_arena(root as *const u8) =>
                {
                    // Boxed inside the process's arena, yet outside every
                    // arena: the program's allocator is not cmc's, so no
                    // state would be captured or restored.
                    return Err(SetupFailure::Error(CheckError::Model(
                        "cmc::Allocator is not this program's global allocator, so cmc cannot \
                         capture the processes' memory: add `#[global_allocator] static ALLOC: \
                         cmc::Allocator = cmc::Allocator;` to the crate that checks (the binary \
                         or test file)"
                            .to_string(),
                    )));
                }
                Ok(root) => roots.push(root),
                Err((message, location)) => {
                    return Err(SetupFailure::Violation(ViolationRecord {
                        kind: ViolationKind::Panic,
                        property: format!("initialisation of process {i}"),
                        message,
                        location: Some(location),
                    }))
                }
            }
        }
        isolate::phase(isolate::IN_SETUP, 0, u64::MAX, 0, 0);
        let env = {
            let _in = mem.enter(env_arena);
            match user_code(true, || {
                Box::into_raw(Box::new(Env::new(
                    &model.network,
                    P::Shared::default(),
                    message_key::<P>(),
                )))
            }) {
                Ok(env) => {
                    constructor_threads(None).map_err(SetupFailure::Violation)?;
                    env
                }
                Err((message, location)) => {
                    return Err(SetupFailure::Violation(ViolationRecord {
                        kind: ViolationKind::Panic,
                        property: "initialisation of the shared variables".into(),
                        message,
                        location: Some(location),
                    }))
                }
            }
        };
        // Start handlers: each process's, in process order, now that every
        // process and the environment exist.
        for (p, &arena) in arenas.iter().enumerate() {
            for handler in handlers
                .iter()
                .filter(|h| matches!(h.trigger, Trigger::Start))
            {
                if handler.applies.is_some() {
                    let root = roots[p];
                    // SAFETY: a live object just built; nothing else
                    // refers to it now.
                    let applies = user_code(false, || handler.applies_to(unsafe { &*root }));
                    match applies {
                        Ok(true) => {}
                        Ok(false) => continue,
                        Err((message, location)) => {
                            return Err(SetupFailure::Violation(ViolationRecord {
                                kind: ViolationKind::Panic,
                                property: format!(
                                    "whether start handler {} applies to process {p}",
                                    handler.name
                                ),
                                message: format!("process {p}: {message}"),
                                location: Some(location),
                            }));
                        }
                    }
                }
                if crate::determinism::random::enabled() {
                    crate::determinism::random::seed_for(0x7374_6172_7400_0000 | p as u128);
                }
                isolate::phase(isolate::IN_SETUP, 0, p as u64, 0, 0);
                begin_run(Run::default());
                let mut ctx = Ctx {
                    me: p,
                    count: roots.len(),
                    env,
                    mem: &mem,
                    env_arena,
                    net: &model.network,
                };
                let root = roots[p];
                let body = handler.body;
                let result = {
                    let _in = mem.enter(arena);
                    // SAFETY: the root is a live object just built, and the
                    // handler has the only reference to it.
                    user_code(true, || body(unsafe { &mut *root }, &mut ctx))
                };
                let run = end_run();
                constructor_threads(Some(p)).map_err(SetupFailure::Violation)?;
                let property = format!("start handler {} of process {p}", handler.name);
                if let Err((message, location)) = result {
                    return Err(SetupFailure::Violation(ViolationRecord {
                        kind: ViolationKind::Panic,
                        property,
                        message: format!("process {p}: {message}"),
                        location: Some(location),
                    }));
                }
                if let Some(m) = run.model_error {
                    return Err(SetupFailure::Violation(ViolationRecord {
                        kind: ViolationKind::ModelError,
                        property,
                        message: m,
                        location: None,
                    }));
                }
                if !run.taken.is_empty() {
                    return Err(SetupFailure::Error(CheckError::Model(format!(
                        "the {property} made a choice (cmc::choose, recv, or a send that may \
                         fail): a start handler builds the one initial state, so it cannot \
                         choose; move the choice to a handler"
                    ))));
                }
            }
        }
        if let Some(e) = mem.take_exhaustion() {
            return Err(SetupFailure::Violation(ViolationRecord {
                kind: ViolationKind::ArenaExhausted,
                property: "initialisation".into(),
                message: e.to_string(),
                location: None,
            }));
        }
        let owned: Vec<(ArenaId, usize)> = arenas
            .iter()
            .zip(&roots)
            .map(|(&a, &r)| (a, r as usize))
            .chain([(env_arena, env as usize)])
            .collect();
        if let Err(m) = globals.after_user_code(&mem, &|| owned.clone(), &|| {
            "a process's constructor".into()
        }) {
            return Err(SetupFailure::Error(CheckError::Model(m)));
        }
        let initial = mem.capture();
        let fp = Fingerprinter::new(model, mode, &mem, &arenas, &roots, env_arena, env)
            .map_err(SetupFailure::Error)?;
        // Stack garbage reaches a state only through bytes no meaning reads
        // (padding, uninitialized memory): it matters only to what reads a
        // state's raw bytes — the bytes and heap sources, and the
        // conservative leak check, whose verdict a stale word that looks
        // like a pointer can change. Otherwise handlers run on the stack as
        // they find it, which saves zeroing 16 KiB per transition.
        let raw = |c: Option<FingerprintMode>| {
            // The typed walk reads a union's bytes as they are.
            matches!(
                c,
                Some(FingerprintMode::Bytes | FingerprintMode::Heap | FingerprintMode::Typed)
            )
        };
        let scrub = model.detect_leaks || raw(fp.process.mode()) || raw(fp.shared.mode());
        let tree = match isolate::tree_view() {
            Some(view) => view,
            None => Tree::new(false).map_err(err)?,
        };
        Ok(Engine {
            model,
            mem,
            arenas,
            env_arena,
            roots,
            env,
            handlers,
            invariants,
            registered: crate::model::registered::invariants_for::<P>()
                .into_iter()
                .filter(|(name, _)| !model.without.iter().any(|w| w == name))
                .collect(),
            properties: property_fns(model),
            initial,
            seed_base: None,
            changed: Vec::new(),
            computed: Vec::new(),
            pending_sum: 0,
            passed: None,
            at: 0,
            tree,
            fp,
            scrub,
            pick: None,
            globals,
        })
    }

    /// The fingerprint the search deduplicates `state` (the loaded state)
    /// by; see [`Fingerprinter`]. A panic in user code (a `Hash` or `Debug`
    /// implementation, an abstraction) is returned as a violation.
    pub(crate) fn state_fingerprint(
        &mut self,
        state: StateId,
    ) -> Result<Fingerprint, ViolationRecord> {
        if let Some(sum) = self.mem.state_tag(state) {
            // Computed before: the sum of its components is kept with it.
            return Ok(self.finish_sum(sum));
        }
        let parts = Parts {
            mem: &mut self.mem,
            model: self.model,
            arenas: &self.arenas,
            env_arena: self.env_arena,
            roots: &self.roots,
            env: self.env,
        };
        parts.fingerprint(&mut self.fp, state, true)
    }

    /// Whether successors can be fingerprinted before they are captured:
    /// every source hashes the live objects (no source reads a captured
    /// state), and no determinism check compares captured successors.
    pub(crate) fn lazy_capture(&self) -> bool {
        matches!(self.fp.process, Chosen::Value(..) | Chosen::Abstract)
            && matches!(self.fp.shared, Chosen::Value(..) | Chosen::Nothing)
            && !self.model.check_determinism
    }

    /// The fingerprint of the memory as `event` from `pre` (the loaded
    /// state) left it, before it is captured: only the components of
    /// arenas the transition changed are computed (kept for
    /// [`Engine::tag_computed`]).
    pub(crate) fn pending_fingerprint(
        &mut self,
        pre: StateId,
        event: Event,
    ) -> Result<Fingerprint, ViolationRecord> {
        debug_assert_eq!(self.mem.loaded(), Some(pre));
        self.changed.clear();
        if self.mem.isolated(pre) {
            // No arena of `pre` points into another: the event's code could
            // reach (and write) only its process's arena and the
            // environment's.
            let env = self.env_arena;
            let changes = if event.actor == ENV {
                self.mem.changes_among(&[env])
            } else {
                self.mem.changes_among(&[self.arenas[event.actor], env])
            };
            self.changed.extend_from_slice(changes);
        } else {
            self.changed.extend_from_slice(self.mem.changes());
        }
        let parts = Parts {
            mem: &mut self.mem,
            model: self.model,
            arenas: &self.arenas,
            env_arena: self.env_arena,
            roots: &self.roots,
            env: self.env,
        };
        let (fingerprint, sum) =
            parts.fingerprint_changed(&mut self.fp, pre, &self.changed, &mut self.computed)?;
        self.pending_sum = sum;
        Ok(fingerprint)
    }

    /// The fingerprint a sum of components gives (as
    /// [`Engine::pending_fingerprint`] finishes it).
    pub(crate) fn finish_sum(&self, sum: u128) -> Fingerprint {
        if self.model.width == FingerprintWidth::Bits64 {
            return Fingerprint(u128::from(crate::sys::hash::finish64(sum)));
        }
        Fingerprint(crate::sys::hash::finish(sum))
    }

    /// Tags `state`, just captured after [`Engine::pending_fingerprint`],
    /// with the components computed there (its other arenas share their
    /// tables, and tags, with the pre-state).
    pub(crate) fn tag_computed(&mut self, state: StateId) {
        for &(arena, c) in &self.computed {
            self.mem.set_tag(state, arena, c);
        }
        self.mem.set_state_tag(state, self.pending_sum);
    }

    /// The fingerprint of `state` (the loaded state) as traces record it:
    /// computed by `fp`, a fresh fingerprinter that has seen only the
    /// trace's earlier states.
    pub(crate) fn trace_fingerprint(
        &mut self,
        fp: &mut Fingerprinter<P>,
        state: StateId,
    ) -> Result<Fingerprint, ViolationRecord> {
        let parts = Parts {
            mem: &mut self.mem,
            model: self.model,
            arenas: &self.arenas,
            env_arena: self.env_arena,
            roots: &self.roots,
            env: self.env,
        };
        parts.fingerprint(fp, state, false)
    }

    pub(crate) fn fresh_fingerprinter(&self) -> Fingerprinter<P> {
        self.fp.fresh(
            &self.mem,
            &self.arenas,
            &self.roots,
            self.env_arena,
            self.env,
        )
    }

    /// The number of messages in flight in the loaded state.
    pub(crate) fn in_flight(&self) -> usize {
        self.env().msgs.len()
    }

    pub(crate) fn env(&self) -> &Env<P::Msg, P::Shared> {
        // SAFETY: the environment root is live in every state.
        unsafe { &*self.env }
    }

    pub(crate) fn world(&self) -> World<'_, P> {
        World {
            procs: &self.roots,
            env: self.env(),
        }
    }

    /// Whether the loaded state is outside the model ([`Model::prune`],
    /// [`Model::prune_process`]).
    pub(crate) fn pruned(&self) -> bool {
        let m = self.model;
        if m.prune.is_none() && m.prune_process.is_none() {
            return false;
        }
        let _sys = system_scope();
        let w = self.world();
        m.prune.as_ref().is_some_and(|f| f(&w))
            || m.prune_process
                .as_ref()
                .is_some_and(|f| w.processes().any(f))
    }

    pub(crate) fn actor_name(&self, actor: usize) -> String {
        self.actor_name_lazy(actor)()
    }

    /// [`Self::actor_name`], formatted only when called.
    pub(crate) fn actor_name_lazy(&self, actor: usize) -> impl Fn() -> String {
        move || {
            if actor == ENV {
                "environment".into()
            } else {
                format!("process {actor}")
            }
        }
    }

    pub(crate) fn handler_name(&self, e: Event) -> &'static str {
        if e.actor == ENV {
            ENV_EVENTS[e.handler]
        } else {
            self.handlers[e.handler].name
        }
    }

    /// The enabled events of the loaded state, or the guard that panicked.
    pub(crate) fn enabled(&self) -> Result<Vec<Event>, ViolationRecord> {
        self.enabled_with_guards().map(|(events, _)| events)
    }

    /// The enabled events, as [`Engine::enabled`], and under partial-order
    /// reduction, for each process event (they come first), what its guard
    /// read of the environment (none otherwise).
    pub(crate) fn enabled_with_guards(
        &self,
    ) -> Result<(Vec<Event>, Vec<crate::model::por::Footprint>), ViolationRecord> {
        let env = self.env();
        let _sys = system_scope();
        isolate::phase(isolate::IN_GUARD, self.at, 0, 0, 0);
        // Every guard of the state in one call of user code (one panic
        // catch, one hook check): the guard that panics, if one does, is
        // the last one started.
        let running = std::cell::Cell::new((0, 0));
        let por = self.model.por;
        let scan = || {
            let mut events =
                Vec::with_capacity((self.roots.len() * self.handlers.len() + 2).min(256));
            let mut prints = Vec::new();
            for p in 0..self.roots.len() {
                // SAFETY: a live root of the loaded state.
                let proc = unsafe { &*self.roots[p] };
                for (h, handler) in self.handlers.iter().enumerate() {
                    if handler.applies.is_some() {
                        // A handler of another kind of process (another
                        // role) is never enabled here, whatever its
                        // trigger.
                        running.set((p, h));
                        isolate::phase_args(p as u64, h as u64);
                        if !handler.applies_to(proc) {
                            continue;
                        }
                    }
                    if por {
                        crate::model::por::begin();
                    }
                    let on = match handler.trigger {
                        Trigger::Always => true,
                        Trigger::Start => false,
                        Trigger::Timer(name) => env.timer_pending(p, name),
                        Trigger::Guard(guard) => {
                            let view = View {
                                me: p,
                                count: self.roots.len(),
                                env,
                            };
                            running.set((p, h));
                            isolate::phase_args(p as u64, h as u64);
                            guard(proc, &view)
                        }
                    };
                    if on {
                        events.push(Event {
                            actor: p,
                            handler: h,
                        });
                        if por {
                            prints.push(crate::model::por::take());
                        }
                    }
                }
            }
            (events, prints)
        };
        let (mut events, prints) = user_code(false, scan).map_err(|(message, location)| {
            let (p, h) = running.get();
            ViolationRecord {
                kind: ViolationKind::Panic,
                property: format!("guard of {}", self.handlers[h].name),
                message: format!("process {p}: {message}"),
                location: Some(location),
            }
        })?;
        let net = &self.model.network;
        if net.loss && !env.msgs.is_empty() {
            events.push(Event {
                actor: ENV,
                handler: LOSE,
            });
        }
        if net.duplication && !env.msgs.is_empty() && env.msgs.len() < net.capacity {
            events.push(Event {
                actor: ENV,
                handler: DUPLICATE,
            });
        }
        Ok((events, prints))
    }

    /// Runs one event as [`Engine::run`] does, and describes it (the
    /// message delivered, the copies sent) from another run whose state is
    /// dropped. Describing formats messages inside the handler, which
    /// leaves other garbage on the stack than a run that does not; copied
    /// into the padding of a value the handler builds next, that garbage
    /// would make the state differ from the one the search, the
    /// determinism check and a replay reach.
    pub(crate) fn run_described(
        &mut self,
        e: Event,
        script: Vec<usize>,
        seed: u32,
        pre: StateId,
    ) -> Outcome {
        let described = self.run(e, script.clone(), seed, true, pre);
        if described.thread_error.is_some() {
            // A thread it left behind uses the arenas (they are frozen):
            // the step ends here, cut short.
            return described;
        }
        let _ = self.mem.take_exhaustion();
        self.mem.restore(pre);
        let mut outcome = self.run(e, script, seed, false, pre);
        outcome.delivered = described.delivered;
        outcome.sent = described.sent;
        outcome.timers = described.timers;
        outcome
    }

    /// Runs one event on the loaded state with a choice script and a
    /// random-seed variant.
    ///
    /// A run whose user code initialized a global (whose blocks were moved
    /// out of the arenas, see [`crate::memory::globals`]) is run again from the
    /// restored pre-state: the moved blocks left holes in the arena and
    /// stale words (the payload of a `None`, a freed pointer) in the state,
    /// which every later run of the same transition, the global being
    /// initialized by then, would not have. Running it again makes the
    /// successor the one every run gives (in the search, in the
    /// determinism check and in replay), whichever transition happened to
    /// touch the global first in this process.
    pub(crate) fn run(
        &mut self,
        e: Event,
        script: Vec<usize>,
        seed: u32,
        describe: bool,
        pre: StateId,
    ) -> Outcome {
        let cached = self.seed_base;
        let mut attempts = 0;
        let outcome = loop {
            let moves = self.globals.moves;
            ctx::take_deeper();
            let outcome = self.run_once(e, script.clone(), seed, describe, pre);
            attempts += 1;
            if attempts == 8 || outcome.global_error.is_some() || outcome.thread_error.is_some() {
                break outcome;
            }
            if ctx::take_deeper() {
                // The handler used more stack than was scrubbed.
                self.mem.restore(pre);
                continue;
            }
            if self.needs_exact_seed(pre) {
                // It drew from a provisional seed: again, from the exact one.
                self.mem.restore(pre);
                let base = self.exact_seed_base(pre);
                self.seed_base = Some((pre, base, true));
                continue;
            }
            if self.globals.moves == moves {
                break outcome;
            }
            self.mem.restore(pre);
        };
        // An exact base found here serves the expansion of `pre` only.
        if cached.is_none_or(|c| c.0 != pre) {
            self.seed_base = cached;
        }
        outcome
    }

    /// Whether the run just made from `pre` drew randomness from a
    /// provisional seed.
    pub(crate) fn needs_exact_seed(&self, pre: StateId) -> bool {
        crate::determinism::random::enabled()
            && self.heap_identity()
            && !matches!(self.seed_base, Some((s, _, true)) if s == pre)
            && crate::determinism::random::drew()
    }

    pub(crate) fn run_once(
        &mut self,
        e: Event,
        script: Vec<usize>,
        seed: u32,
        describe: bool,
        pre: StateId,
    ) -> Outcome {
        // What the thread RNG draws is a function of the state and the
        // event (identity::random).
        if crate::determinism::random::enabled() {
            let key = self.seed_key(pre, e, &script, seed);
            crate::determinism::random::seed_for(key);
        }
        begin_run(Run {
            script,
            describe,
            pick: self.pick,
            ..Run::default()
        });
        if self.model.por {
            crate::model::por::begin();
        }
        let panic = if e.actor == ENV {
            // A duplication clones a message: its padding comes from the
            // stack, so scrub as before user code (when padding matters).
            if self.scrub {
                crate::sys::stack::scrub_stack(16 * 1024);
            }
            isolate::phase(isolate::IN_HANDLER, 0, u64::MAX, e.handler as u64, 0);
            self.run_environment(e.handler);
            None
        } else {
            let handler = &self.handlers[e.handler];
            if let Trigger::Timer(name) = handler.trigger {
                // The expiry consumes the timer before the handler runs.
                let _in = self.mem.enter(self.env_arena);
                // SAFETY: the environment root is live; no other reference.
                unsafe { (*self.env).cancel_timer(e.actor, name) };
            }
            let mut ctx = Ctx {
                me: e.actor,
                count: self.roots.len(),
                env: self.env,
                mem: &self.mem,
                env_arena: self.env_arena,
                net: &self.model.network,
            };
            let root = self.roots[e.actor];
            let body = handler.body;
            let _in = self.mem.enter(self.arenas[e.actor]);
            isolate::phase(isolate::IN_HANDLER, 0, e.actor as u64, e.handler as u64, 0);
            // SAFETY: the root is a live object of the restored state and the
            // handler has the only reference to it.
            user_code(self.scrub, || body(unsafe { &mut *root }, &mut ctx)).err()
        };
        let (handler, actor) = (self.handler_name(e), self.actor_name_lazy(e.actor));
        let thread_error = crate::memory::threads::after_user_code()
            .map(|left| left.message(&format!("handler `{handler}` of {}", actor()), "handler"));
        if thread_error.is_some() {
            // The thread left behind uses the arenas as they are now.
            self.mem.freeze();
        }
        let run = end_run();
        let owned = || -> Vec<(ArenaId, usize)> {
            self.arenas
                .iter()
                .zip(&self.roots)
                .map(|(&a, &r)| (a, r as usize))
                .chain([(self.env_arena, self.env as usize)])
                .collect()
        };
        let who = || format!("{handler} of {}", actor());
        let global_error = self.globals.after_user_code(&self.mem, &owned, &who).err();
        let drew = self.model.random_seeds > 1 && crate::determinism::random::drew();
        let mut footprint = crate::model::por::Footprint::default();
        if self.model.por {
            footprint = crate::model::por::take();
            if crate::determinism::random::enabled() && (drew || crate::determinism::random::drew())
            {
                footprint.flags |= crate::model::por::DREW;
            }
        }
        Outcome {
            drew,
            footprint,
            taken: run.taken.iter().map(|&(v, _)| v).collect(),
            ranges: run.taken,
            panic,
            model_error: run.model_error,
            misfit: run.misfit,
            delivered: run.delivered,
            sent: run.sent,
            timers: run.timers,
            global_error,
            thread_error,
        }
    }

    /// The seed of the randomness a transition draws: the pre-state's
    /// identity (see [`Engine::seed_base_of`]), the event and the choice
    /// script, and the random-seed variant (variant 0 adds nothing, so a
    /// search with one seed draws what it always did).
    pub(crate) fn seed_key(&mut self, pre: StateId, e: Event, script: &[usize], seed: u32) -> u128 {
        let base = match self.seed_base {
            Some((state, base, _)) if state == pre => base,
            _ => self.seed_base_of(pre).0,
        };
        // A script means its choices followed by zeros (a choice past its
        // end takes 0): the search's first run of an event has an empty
        // script, a replay or the determinism check passes the choices the
        // run took, such as [0]. Both must draw the same.
        let script = &script[..script.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1)];
        // Mixed, not hashed: a seed needs to differ, not to resist anyone
        // (this runs before every transition).
        use crate::sys::hash::fmix64;
        let mut lo = base as u64;
        let mut hi = (base >> 64) as u64;
        let words = [((e.actor as u64) << 32) ^ e.handler as u64, u64::from(seed)];
        for w in words.into_iter().chain(script.iter().map(|&c| c as u64)) {
            lo = fmix64(lo ^ w.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            hi = fmix64(hi.rotate_left(29) ^ lo);
        }
        (u128::from(hi) << 64) | u128::from(fmix64(lo ^ script.len() as u64))
    }

    /// The part of a transition's seed that comes from its pre-state, and
    /// whether it is exact. Under a canonical-heap identity it is
    /// provisional, the state's bytes: the exact base costs a traversal of
    /// every heap, paid only when a transition draws (see [`Engine::run`]).
    pub(crate) fn seed_base_of(&mut self, pre: StateId) -> (u128, bool) {
        if self.heap_identity() {
            return (self.mem.fingerprint(pre).0, false);
        }
        match self.fp.process {
            Chosen::Bytes => (self.mem.fingerprint(pre).0, true),
            _ => (self.state_fingerprint(pre).map_or(0, |f| f.0), true),
        }
    }

    /// Whether a type is identified by its canonical heap, whose canonical
    /// addresses depend on the states the search saw before.
    pub(crate) fn heap_identity(&self) -> bool {
        matches!(self.fp.process, Chosen::Heap) || matches!(self.fp.shared, Chosen::Heap)
    }

    /// The exact seed base of `pre` (the loaded state) under a heap
    /// identity: its fingerprint by a fresh fingerprinter, whose canonical
    /// addresses come from this state alone — the same in the search, in
    /// the determinism check and in a replay, whatever the path that led
    /// there and whatever garbage the arenas' free space holds.
    pub(crate) fn exact_seed_base(&mut self, pre: StateId) -> u128 {
        let mut fp = self.fresh_fingerprinter();
        let base = self.trace_fingerprint(&mut fp, pre).map_or(0, |f| f.0);
        fp.release(&mut self.mem);
        base
    }

    pub(crate) fn run_environment(&mut self, event: usize) {
        let distinct = {
            let _sys = system_scope();
            self.env().distinct()
        };
        let Some(pick) = ctx::choice_internal(distinct.len()) else {
            // The trace does not fit (the run's misfit says why).
            return;
        };
        let i = distinct[pick];
        let _in = self.mem.enter(self.env_arena);
        // SAFETY: the environment root is live; no other reference exists.
        let env = unsafe { &mut *self.env };
        if event == LOSE {
            let lost = env.remove(i);
            ctx::describe(|| {
                (
                    lost.from as usize,
                    lost.to as usize,
                    format!("{:?}", lost.msg),
                )
            });
        } else {
            let (from, to) = (env.msgs[i].from as usize, env.msgs[i].to as usize);
            ctx::describe(|| (from, to, format!("{:?}", env.msgs[i].msg)));
            env.duplicate(i);
        }
    }

    /// The invariants the loaded state violates (per-process ones first,
    /// then global ones, in declaration order); only the first when
    /// `first_only`.
    pub(crate) fn invariant_violations(&self, first_only: bool) -> Vec<ViolationRecord> {
        let _sys = system_scope();
        let mut found = Vec::new();
        let record = |property: &str, message: String, panic: Option<String>| ViolationRecord {
            kind: if panic.is_some() {
                ViolationKind::Panic
            } else {
                ViolationKind::Invariant
            },
            property: property.into(),
            message,
            location: panic,
        };
        // A per-process invariant reads its process's state, which in an
        // isolated state is its arena's contents: where every one held on
        // contents with the same key, they hold again (remembered only
        // when the search allows it, only for the first violation, and only
        // while the arenas hold the loaded state exactly).
        let loaded = self.mem.loaded_exactly();
        let remember = self
            .passed
            .as_ref()
            .filter(|_| first_only && !self.invariants.is_empty())
            .zip(loaded.filter(|&s| self.mem.isolated(s)));
        for (p, &root) in self.roots.iter().enumerate() {
            // SAFETY: a live root of the loaded state.
            let proc = unsafe { &*root };
            let key = remember.map(|(passed, state)| {
                let key = self.mem.arena_key(state, self.arenas[p]);
                (&passed[key as usize & (passed.len() - 1)], key)
            });
            if key.is_some_and(|(slot, key)| slot.get() == key) {
                continue;
            }
            let before = found.len();
            for (k, inv) in self.invariants.iter().enumerate() {
                isolate::phase(isolate::IN_INVARIANT, self.at, p as u64, k as u64, 0);
                match user_code(false, || (inv.check)(proc)) {
                    Ok(Ok(())) => continue,
                    Ok(Err(message)) => {
                        found.push(record(inv.name, format!("process {p}: {message}"), None))
                    }
                    Err((message, location)) => found.push(record(
                        inv.name,
                        format!("process {p}: {message}"),
                        Some(location),
                    )),
                }
                if first_only {
                    return found;
                }
            }
            if let (Some((slot, key)), true) = (key, found.len() == before) {
                slot.set(key);
            }
        }
        let world = self.world();
        let own = self
            .model
            .invariants
            .iter()
            .map(|inv| (inv.name, Ok(inv.check)));
        let registered = self
            .registered
            .iter()
            .map(|&(name, check)| (name, Err(check)));
        for (k, (name, check)) in own.chain(registered).enumerate() {
            isolate::phase(
                isolate::IN_INVARIANT,
                self.at,
                u64::MAX,
                (self.invariants.len() + k) as u64,
                0,
            );
            let result = user_code(false, || match check {
                Ok(f) => f(&world),
                Err(erased) => crate::model::registered::run_erased(erased, &world),
            });
            match result {
                Ok(Ok(())) => continue,
                Ok(Err(message)) => found.push(record(name, message, None)),
                Err((message, location)) => found.push(record(name, message, Some(location))),
            }
            if first_only {
                return found;
            }
        }
        found
    }

    /// Whether property `k` (of [`Engine::properties`]) holds in the loaded
    /// state; a panic in it is a violation.
    pub(crate) fn property_holds(&self, k: usize) -> Result<bool, ViolationRecord> {
        let _sys = system_scope();
        let world = self.world();
        let prop = &self.properties[k];
        let first = self.invariants.len() + self.model.invariants.len() + self.registered.len();
        isolate::phase(
            isolate::IN_INVARIANT,
            self.at,
            u64::MAX,
            (first + k) as u64,
            0,
        );
        let result = user_code(false, || match prop.check {
            Ok(f) => {
                if f(&world) {
                    Ok(())
                } else {
                    Err(String::new())
                }
            }
            Err(erased) => crate::model::registered::run_erased(erased, &world),
        });
        match result {
            Ok(Ok(())) => Ok(true),
            Ok(Err(_)) => Ok(false),
            Err((message, location)) => Err(ViolationRecord {
                kind: ViolationKind::Panic,
                property: prop.name.into(),
                message,
                location: Some(location),
            }),
        }
    }

    /// Checks the properties of the loaded state: per-process and global
    /// invariants, and leaks when enabled.
    pub(crate) fn check_state(&self) -> Option<ViolationRecord> {
        let _sys = system_scope();
        if let Some(record) = self.invariant_violations(true).pop() {
            return Some(record);
        }
        if self.model.detect_leaks {
            for (p, &arena) in self.arenas.iter().enumerate() {
                if let Some((count, bytes)) = self.leaked(arena, self.roots[p] as *const u8) {
                    return Some(ViolationRecord {
                        kind: ViolationKind::Leak,
                        property: format!("process {p}'s heap"),
                        message: format!(
                            "{count} object(s), {bytes} bytes, in process {p}'s arena are unreachable from its root"
                        ),
                        location: None,
                    });
                }
            }
        }
        None
    }

    /// Marks the arena's blocks reachable from `root` through aligned words
    /// that point into live blocks (interior pointers included); returns the
    /// number and bytes of the others, if any.
    pub(crate) fn leaked(&self, arena: ArenaId, root: *const u8) -> Option<(usize, usize)> {
        let blocks = self.mem.live_blocks(arena);
        let find = |addr: usize| -> Option<usize> {
            let i = blocks.partition_point(|&(start, _)| start as usize <= addr);
            (i > 0 && addr < blocks[i - 1].0 as usize + blocks[i - 1].1).then(|| i - 1)
        };
        let mut marked = vec![false; blocks.len()];
        let mut stack = Vec::new();
        if let Some(i) = find(root as usize) {
            marked[i] = true;
            stack.push(i);
        }
        while let Some(i) = stack.pop() {
            let (start, len) = blocks[i];
            for off in (0..len.saturating_sub(7)).step_by(8) {
                // SAFETY: the word lies inside a live block of the arena
                // (blocks are 16-aligned), which is mapped and readable.
                let word = unsafe { std::ptr::read_volatile(start.add(off) as *const usize) };
                if let Some(j) = find(word) {
                    if !marked[j] {
                        marked[j] = true;
                        stack.push(j);
                    }
                }
            }
        }
        let (count, bytes) = blocks
            .iter()
            .zip(&marked)
            .filter(|(_, &m)| !m)
            .fold((0, 0), |(c, b), (&(_, len), _)| (c + 1, b + len));
        (count > 0).then_some((count, bytes))
    }

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

    pub(crate) fn path(&self, node: u32) -> Vec<RawStep> {
        logged_path(
            self.tree
                .path(node)
                .expect("the path to a node the search recorded"),
        )
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
        let steps = steps
            .iter()
            .map(|step| Step {
                process: (step.event.actor != ENV).then_some(step.event.actor),
                actor: self.actor_name(step.event.actor),
                handler: self.handler_name(step.event).into(),
                kind: self.step_kind(step.event),
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
            })
            .collect();
        Trace {
            version: TRACE_VERSION,
            state_hash: crate::sys::hash::STATE_HASH.to_string(),
            model: self.model.name.clone(),
            fingerprint_bits: if self.model.width == FingerprintWidth::Bits128 {
                128
            } else {
                64
            },
            fingerprint: self.fp.mode,
            initial_fingerprint: String::new(),
            steps,
            also_violated: Vec::new(),
            violation: Some(record),
            sources: self.fp.sources.clone(),
            handlers: self.shape(),
            build: None,
            loop_start: None,
        }
    }

    fn build_trace_here(&mut self, steps: &[RawStep], record: ViolationRecord) -> Trace {
        self.mem.restore(self.initial);
        let mut fp = self.fresh_fingerprinter();
        let initial_fingerprint = self
            .trace_fingerprint(&mut fp, self.initial)
            .map_or_else(|_| String::new(), hex);
        let mut out = Vec::with_capacity(steps.len());
        let mut last_failed = false;
        // The state each step starts from, kept until the next one is
        // captured.
        let mut pre = self.initial;
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
        Trace {
            version: TRACE_VERSION,
            state_hash: crate::sys::hash::STATE_HASH.to_string(),
            model: self.model.name.clone(),
            fingerprint_bits: if self.model.width == FingerprintWidth::Bits128 {
                128
            } else {
                64
            },
            fingerprint: self.fp.mode,
            initial_fingerprint,
            steps: out,
            also_violated,
            violation: Some(record),
            sources: self.fp.sources.clone(),
            handlers: self.shape(),
            build: None,
            loop_start: None,
        }
    }

    /// A hash of the model's shape (see [`Trace::handlers`]): what a trace
    /// depends on besides the code of the handlers.
    pub(crate) fn shape(&self) -> String {
        Names::of(self.model, self.fp.mode).shape()
    }
}

/// A model's names — processes, handlers, invariants, the source of its
/// process type's identity — known without building its processes (which
/// the parent of an isolated run must not do: a constructor may be what
/// crashed the child).
pub(crate) struct Names<'m, P: Process> {
    pub(crate) model: &'m Model<P>,
    pub(crate) handlers: Vec<Handler<P>>,
    /// Per-process invariants, then the model's own global ones, then the
    /// registered ones (the crash log numbers them so).
    pub(crate) invariants: Vec<&'static str>,
    pub(crate) per_process: usize,
    /// The source of the process type's identity.
    pub(crate) source: &'static str,
}

impl<'m, P: Process> Names<'m, P> {
    pub(crate) fn of(model: &'m Model<P>, mode: Option<FingerprintMode>) -> Self {
        let per_process: Vec<&'static str> = P::invariants().iter().map(|i| i.name).collect();
        let per = per_process.len();
        let invariants = per_process
            .into_iter()
            .chain(model.invariants.iter().map(|i| i.name))
            .chain(
                crate::model::registered::invariants_for::<P>()
                    .into_iter()
                    .filter(|(name, _)| !model.without.iter().any(|w| w == name))
                    .map(|(n, _)| n),
            )
            .chain(property_fns(model).into_iter().map(|p| p.name))
            .collect();
        let source = mode
            .or(model.fingerprint)
            .or_else(|| P::hash_fns().process.best_or_typed().map(|(m, _)| m))
            .unwrap_or(FingerprintMode::Heap)
            .name();
        Names {
            model,
            handlers: P::handlers(),
            invariants,
            per_process: per,
            source,
        }
    }

    pub(crate) fn actor(&self, actor: usize) -> String {
        if actor == ENV {
            "environment".into()
        } else {
            format!("process {actor}")
        }
    }

    pub(crate) fn handler(&self, e: Event) -> &'static str {
        if e.actor == ENV {
            ENV_EVENTS.get(e.handler).copied().unwrap_or("?")
        } else {
            self.handlers.get(e.handler).map_or("?", |h| h.name)
        }
    }

    pub(crate) fn step_kind(&self, e: Event) -> StepKind {
        match (e.actor, e.handler) {
            (ENV, LOSE) => StepKind::Loss,
            (ENV, _) => StepKind::Duplication,
            _ if self
                .handlers
                .get(e.handler)
                .is_some_and(|h| matches!(h.trigger, Trigger::Timer(_))) =>
            {
                StepKind::Timer
            }
            _ => StepKind::Handler,
        }
    }

    /// A hash of the model's shape (see [`Trace::handlers`]).
    pub(crate) fn shape(&self) -> String {
        use std::hash::Hash;
        let mut h = StateHasher::default();
        self.model.name.hash(&mut h);
        self.model.count.hash(&mut h);
        std::any::type_name::<P>().hash(&mut h);
        std::any::type_name::<P::Msg>().hash(&mut h);
        std::any::type_name::<P::Shared>().hash(&mut h);
        for handler in &self.handlers {
            handler.name.hash(&mut h);
            format!("{:?}", handler.trigger).hash(&mut h);
        }
        for (k, name) in self.invariants.iter().enumerate() {
            // Per-process and global invariants hash apart.
            (k < self.per_process).hash(&mut h);
            name.hash(&mut h);
        }
        format!("{:032x}", h.finish128())
    }
}

/// `bytes` for people: "512 MiB".
pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The next choice script after a run that made `taken` (value, range)
/// choices: the odometer advanced at its last position that can move.
pub(crate) fn next_script(taken: &[(usize, usize)]) -> Option<Vec<usize>> {
    let i = taken.iter().rposition(|&(v, n)| v + 1 < n)?;
    let mut script: Vec<usize> = taken[..i].iter().map(|&(v, _)| v).collect();
    script.push(taken[i].0 + 1);
    Some(script)
}

/// Where two renderings of a process (its `Debug`, pretty or not) first
/// differ: the enclosing fields and the two lines, as "in `a.b`: `x`
/// against `y`".
pub(crate) fn first_difference(a: &str, b: &str) -> Option<String> {
    let mut path: Vec<String> = Vec::new();
    for (x, y) in a.lines().zip(b.lines()) {
        let (tx, ty) = (x.trim(), y.trim());
        if tx != ty {
            let field = tx.split_once(": ").map(|(k, _)| k.to_string());
            let mut at: Vec<String> = path.clone();
            at.extend(field);
            let place = if at.is_empty() {
                String::new()
            } else {
                format!("in `{}`: ", at.join("."))
            };
            let (tx, ty) = (tx.trim_end_matches(','), ty.trim_end_matches(','));
            return Some(format!("{place}`{tx}` against `{ty}`"));
        }
        if tx.starts_with(['}', ']', ')']) {
            path.pop();
        }
        if tx.ends_with(['{', '[', '(']) {
            let key = tx.split_once(": ").map_or_else(
                || tx.trim_end_matches(['{', '[', '(', ' ']).to_string(),
                |(k, _)| k.to_string(),
            );
            path.push(key);
        }
    }
    (a.lines().count() != b.lines().count()).then(|| "in its length".to_string())
}

/// Where a replayed step's result differs from the recorded one, as far as
/// the trace's `Debug` renderings tell: the acting process's state (which
/// fields), else the messages it sent (when known).
pub(crate) fn divergence_detail(
    step: &Step,
    after: Option<&str>,
    sent: Option<&[(usize, String)]>,
) -> Option<String> {
    let who = match step.process {
        Some(p) if step.actor != format!("process {p}") => format!("process {p} ({})", step.actor),
        _ => step.actor.clone(),
    };
    if let (Some(was), Some(now)) = (step.after.as_deref(), after) {
        if let Some(d) = first_difference(now, was) {
            return Some(format!(
                "the state of {who} differs {d} (now against recorded)"
            ));
        }
    }
    if let Some(sent) = sent {
        let recorded: Vec<(usize, String)> = step
            .sent
            .iter()
            .map(|s| (s.to, s.message.clone()))
            .collect();
        if recorded != sent {
            let show = |v: &[(usize, String)]| {
                let items: Vec<String> = v.iter().map(|(to, m)| format!("{m} to {to}")).collect();
                if items.is_empty() {
                    "nothing".to_string()
                } else {
                    items.join(", ")
                }
            };
            return Some(format!(
                "{who} sent {} now; the trace recorded {}",
                show(sent),
                show(&recorded)
            ));
        }
    }
    if step.after.is_some() && after.is_some() {
        Some(format!(
            "the `Debug` of {who} and the messages it sent are as recorded: the difference \
             is in what `Debug` does not show, or in its timers or the shared variables"
        ))
    } else {
        None
    }
}

/// The last lines of what the child printed, for a violation's message.
pub(crate) fn stderr_tail(stderr: &str) -> String {
    let said: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    // A panic's own lines (where, then what) say more than the end of the
    // backtrace that follows them.
    if let Some(at) = said
        .iter()
        .rposition(|l| l.starts_with("thread '") && l.contains("panicked at"))
    {
        return said[at..(at + 2).min(said.len())].join(" / ");
    }
    said[said.len().saturating_sub(3)..].join(" / ")
}

/// What happened to user code `who`, by how the child ended: the kind of
/// violation and its message.
pub(crate) fn ending(how: isolate::How, who: &str, stderr: &str) -> (ViolationKind, String) {
    let tail = stderr_tail(stderr);
    let said = if tail.is_empty() {
        String::new()
    } else {
        format!(" ({tail})")
    };
    match how {
        isolate::How::Signal(signal) => (
            ViolationKind::Crash,
            format!(
                "{who} crashed: killed by {}{said}",
                isolate::signal_name(signal)
            ),
        ),
        isolate::How::Exit(status) => (
            ViolationKind::Crash,
            format!(
                "{who} ended the checking process with exit status {status} \
                 (std::process::exit or a C library exit){said}"
            ),
        ),
        isolate::How::Hung(limit) => (
            ViolationKind::Timeout,
            format!(
                "{who} did not return within {} s (the transition timeout; \
                 `--transition-timeout` changes it)",
                limit.as_secs_f64()
            ),
        ),
        isolate::How::Deadline => (
            ViolationKind::Timeout,
            format!("{who} was still running at the time limit"),
        ),
        isolate::How::Interrupted(signal) => (
            ViolationKind::Timeout,
            format!(
                "{who} was still running a second after {}",
                isolate::signal_name(signal)
            ),
        ),
    }
}

/// The steps of the path to a node, from the crash log.
pub(crate) fn logged_path(ancestry: Vec<isolate::LoggedStep>) -> Vec<RawStep> {
    ancestry
        .into_iter()
        .map(|s| RawStep {
            event: Event {
                actor: if s.actor == u32::MAX {
                    ENV
                } else {
                    s.actor as usize
                },
                handler: s.handler as usize,
            },
            choices: s.choices.into_iter().map(|c| c as usize).collect(),
            seed: s.seed,
        })
        .collect()
}

/// The user code a phase names: the violated property and a description
/// of the culprit. `last` is the handler and actor of the step that ran,
/// for handler and identity phases. `None`: no user code was running.
pub(crate) fn blame<P: Process>(
    n: &Names<'_, P>,
    phase: isolate::Phase,
    last: Option<(&str, &str)>,
) -> Option<(String, String)> {
    let process = |a: u64| (a != u64::MAX && (a as usize) < n.model.count).then_some(a as usize);
    match phase.kind {
        isolate::IN_SETUP => Some(match process(phase.a) {
            Some(i) => (
                format!("initialisation of process {i}"),
                format!("the constructor of process {i}"),
            ),
            None => (
                "initialisation of the shared variables".to_string(),
                "the constructor of the shared variables".to_string(),
            ),
        }),
        isolate::IN_GUARD => {
            let handler = n.handlers.get(phase.b as usize).map_or("?", |h| h.name);
            Some((
                format!("guard of {handler}"),
                match process(phase.a) {
                    Some(p) => format!("the guard of {handler} in process {p}"),
                    None => format!("the guard of {handler}"),
                },
            ))
        }
        isolate::IN_INVARIANT => {
            let name = n
                .invariants
                .get(phase.b as usize)
                .copied()
                .unwrap_or("an invariant");
            Some((
                name.to_string(),
                match process(phase.a) {
                    Some(p) => format!("invariant {name} of process {p}"),
                    None => format!("invariant {name}"),
                },
            ))
        }
        isolate::IN_HANDLER => {
            let (handler, actor) = last?;
            Some((handler.to_string(), format!("handler {handler} of {actor}")))
        }
        isolate::IN_IDENTITY => {
            let (handler, actor) = last?;
            // `c` is 1 for the Debug a trace shows, 0 for the identity.
            let source = if phase.c == 1 { "debug" } else { n.source };
            let whose = match process(phase.a) {
                Some(i) => format!("process {i}"),
                None => "the shared variables".to_string(),
            };
            Some((
                format!("the {source} of {whose}"),
                format!("the {source} of {whose} (after {handler} of {actor})"),
            ))
        }
        _ => None,
    }
}

/// Why a child that ended without a result is nobody's fault in the user's
/// code (the operating system, or cmc itself).
pub(crate) fn no_culprit(ended: &isolate::Ended) -> String {
    match ended.how {
        isolate::How::Signal(libc::SIGKILL) => "the checking process was killed by SIGKILL \
             from outside cmc — most likely the kernel's out-of-memory killer (lower the \
             state bound, or set --max-memory)"
            .to_string(),
        isolate::How::Signal(signal) => format!(
            "the checking process died of {} in cmc's own code, not in user code: a bug in \
             cmc, please report it ({})",
            isolate::signal_name(signal),
            stderr_tail(&ended.stderr)
        ),
        isolate::How::Exit(status) => format!(
            "the checking process exited with status {status} without a result ({})",
            stderr_tail(&ended.stderr)
        ),
        _ => "the checking process was stopped".to_string(),
    }
}

/// Whom an isolated check that ended without a result blames: the steps
/// to the culprit (the last one the step that ran, for a handler or the
/// identity of its successor) and the violation; or, when no user code was
/// running (the checker itself, or the operating system, ended it), why.
pub(crate) fn culprit<P: Process>(
    n: &Names<'_, P>,
    ended: &isolate::Ended,
) -> Result<(Vec<RawStep>, ViolationRecord), String> {
    let phase = ended.phase;
    if ended.how == isolate::How::Signal(libc::SIGKILL) {
        return Err(no_culprit(ended));
    }
    let unavailable = || {
        if ended.published.log_full {
            "user code ended the child, and the search had outgrown the crash log: its \
             trace cannot be rebuilt"
                .to_string()
        } else {
            "user code ended the child, and its trace could not be read from the crash log"
                .to_string()
        }
    };
    let steps = match phase.kind {
        isolate::IN_SETUP => Vec::new(),
        isolate::IN_GUARD | isolate::IN_INVARIANT => {
            logged_path(ended.phase_ancestry.clone().ok_or_else(unavailable)?)
        }
        isolate::IN_HANDLER | isolate::IN_IDENTITY => {
            crash_steps(ended.log.as_deref(), ended.ancestry.clone()).ok_or_else(unavailable)?
        }
        _ => return Err(no_culprit(ended)),
    };
    let names = matches!(phase.kind, isolate::IN_HANDLER | isolate::IN_IDENTITY)
        .then(|| steps.last())
        .flatten()
        .map(|s| (n.handler(s.event).to_string(), n.actor(s.event.actor)));
    let (property, who) = blame(
        n,
        phase,
        names.as_ref().map(|(h, a)| (h.as_str(), a.as_str())),
    )
    .ok_or_else(|| no_culprit(ended))?;
    let (kind, message) = ending(ended.how, &who, &ended.stderr);
    Ok((
        steps,
        ViolationRecord {
            kind,
            property,
            message,
            location: None,
        },
    ))
}

/// A trace of raw steps with only the names of its events: what is left
/// when the steps cannot be re-run (they do not behave the same again).
pub(crate) fn bare_trace<P: Process>(
    n: &Names<'_, P>,
    steps: &[RawStep],
    record: ViolationRecord,
) -> Trace {
    Trace {
        version: TRACE_VERSION,
        state_hash: crate::sys::hash::STATE_HASH.to_string(),
        model: n.model.name.clone(),
        fingerprint_bits: if n.model.width == FingerprintWidth::Bits128 {
            128
        } else {
            64
        },
        fingerprint: n.model.fingerprint,
        initial_fingerprint: String::new(),
        steps: steps
            .iter()
            .map(|s| Step {
                process: (s.event.actor != ENV).then_some(s.event.actor),
                actor: n.actor(s.event.actor),
                handler: n.handler(s.event).to_string(),
                kind: n.step_kind(s.event),
                choices: s.choices.clone(),
                seed: s.seed,
                message: None,
                from: None,
                to: None,
                sent: Vec::new(),
                timers: Vec::new(),
                fingerprint: String::new(),
                before: None,
                after: None,
            })
            .collect(),
        violation: Some(record),
        also_violated: Vec::new(),
        sources: Vec::new(),
        handlers: n.shape(),
        build: None,
        loop_start: None,
    }
}
