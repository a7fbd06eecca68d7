//! A model set up in memory: the [`Engine`] (arenas, roots, the initial
//! state) and how it is built — the constructors run in their arenas, the
//! runtime's lazily initialized parts warmed up before any user code — and
//! its small accessors.

use super::error::CheckError;
use super::events::Event;
use super::events::SetupFailure;
use super::events::ENV;
use super::events::ENV_EVENTS;
use super::fingerprint::message_key;
use super::fingerprint::Chosen;
use super::fingerprint::Fingerprinter;
use super::fingerprint::Parts;
use super::properties::property_fns;
use super::properties::PropertyFn;
use crate::engine::erased::kind_of;
use crate::engine::erased::Erased as P;
use crate::engine::erased::{ErasedMsg, ErasedShared};
use std::collections::HashSet;

use rand::Rng;

use crate::engine::isolate::{self};
use crate::engine::trace::{ViolationKind, ViolationRecord};
use crate::engine::tree::Tree;
use crate::memory::globals::Globals;
use crate::memory::{ArenaId, Fingerprint, FingerprintWidth, Memory, MemoryConfig, StateId};
use crate::model::ctx::{self, begin_run, end_run, user_code, Run};
use crate::model::env::Env;
use crate::model::world::World;
use crate::model::Ctx;
use crate::model::{FingerprintMode, Handler, Invariant, Model, Trigger};
use crate::sys::scope::system_scope;

/// A model set up in memory: arenas, roots, the initial state.
pub(crate) struct Engine<'m, P: crate::model::Process> {
    pub(super) model: &'m Model<P>,
    pub(super) mem: Memory,
    pub(super) arenas: Vec<ArenaId>,
    pub(super) env_arena: ArenaId,
    pub(super) roots: Vec<*mut P>,
    pub(super) env: *mut Env<ErasedMsg, ErasedShared>,
    pub(super) handlers: Vec<Handler<P>>,
    /// For each handler, the states it was found enabled in
    /// (`Stats::handlers`).
    pub(super) enabled_counts: Vec<std::cell::Cell<u64>>,
    pub(super) invariants: Vec<Invariant<P>>,
    /// Global invariants registered with `#[cmc::invariant]` for `P`.
    pub(super) registered: Vec<(&'static str, crate::model::registered::ErasedCheck)>,
    /// The model's `sometimes` and `eventually` properties, then the
    /// registered ones.
    pub(super) properties: Vec<PropertyFn<P>>,
    pub(super) initial: StateId,
    /// How each stored state was first reached (shared with the parent
    /// process in an isolated run, see [`crate::engine::tree`]).
    pub(super) tree: Tree,
    pub(super) fp: Fingerprinter<P>,
    /// Whether handlers run on a scrubbed stack (see [`Engine::new`]).
    pub(super) scrub: bool,
    /// The generator state that picks a run's choices beyond its script
    /// (a random walk's; see `ctx::Run::pick`), while the caller sets it.
    pub(super) pick: Option<u64>,
    pub(super) globals: Globals,
    /// The seed base of the state being expanded (see
    /// [`Engine::seed_key`]), computed once for all its transitions; set
    /// and cleared by the search around each expansion. The flag tells
    /// whether it is exact (a function of the state's identity) or
    /// provisional (its bytes, under a heap identity).
    pub(super) seed_base: Option<(StateId, u128, bool)>,
    /// Under symmetry reduction, the smallest image's sum and the
    /// processes' colours of the state being expanded (see
    /// `Engine::orbit_seed_key`).
    pub(super) orbit_seed: Option<(StateId, u128, Vec<u128>)>,
    /// The node of the search tree whose guards or invariants run next
    /// (for the crash log: a crash there is attributed to that state).
    pub(super) at: u32,
    /// Scratch for [`Engine::pending_fingerprint`]: which arenas changed,
    /// and the components it computed.
    pub(super) changed: Vec<bool>,
    pub(super) computed: Vec<(ArenaId, u128)>,
    /// The sum of components [`Engine::pending_fingerprint`] found last.
    pub(super) pending_sum: u128,
    /// Contents of process arenas (their `Memory::arena_key`s) on which
    /// every per-process invariant held, when the search lets the engine
    /// remember them (see [`Engine::invariant_violations`]).
    pub(super) passed: Option<Box<[std::cell::Cell<u128>]>>,
    /// In a search across processes, the nodes of this process's tree
    /// whose states came from another process: for each, that process and
    /// the node of its tree the state was reached from (see
    /// [`Engine::path`]). `None` elsewhere.
    pub(super) links: Option<std::collections::HashMap<u32, (u32, u32)>>,
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

/// The index a process's constructor and start handler draw by: its own,
/// or under symmetry reduction the first of its group's, so that the
/// interchangeable processes start alike (the initial state is its own
/// image, as a symmetric model's is).
fn seed_index(model: &Model<P>, i: usize) -> usize {
    if !model.reduce {
        return i;
    }
    model
        .symmetry
        .iter()
        .find(|g| g.processes.contains(&i))
        .map_or(i, |g| g.processes[0])
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
pub(crate) fn warm_up(model: &Model<P>) -> Result<(), ViolationRecord> {
    let kind = kind_of(model);
    let _sys = system_scope();
    for i in 0..model.count {
        if crate::determinism::random::enabled() {
            crate::determinism::random::seed_for(0x696e_6974_0000 | seed_index(model, i) as u128);
        }
        isolate::phase(isolate::IN_SETUP, 0, i as u64, 0, 0);
        let _ = user_code(true, || kind.drop_init(i));
        constructor_threads(Some(i))?;
    }
    isolate::phase(isolate::IN_SETUP, 0, u64::MAX, 0, 0);
    let _ = user_code(true, || kind.drop_shared());
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

impl<'m> Engine<'m, P> {
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
        let kind = kind_of(model);
        let handlers = user_code(false, kind.handlers).map_err(|(message, location)| {
            SetupFailure::Error(CheckError::Model(format!(
                "the handler table of {} could not be built: {message} (at {location})",
                kind.process.name
            )))
        })?;
        let invariants = user_code(false, kind.invariants).map_err(|(message, location)| {
            SetupFailure::Error(CheckError::Model(format!(
                "the invariants of {} could not be listed: {message} (at {location})",
                kind.process.name
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
            // (determinism::random), like a handler's of its state and event.
            if crate::determinism::random::enabled() {
                crate::determinism::random::seed_for(
                    0x696e_6974_0000 | seed_index(model, i) as u128,
                );
            }
            isolate::phase(isolate::IN_SETUP, 0, i as u64, 0, 0);
            let built = {
                let _in = mem.enter(arena);
                user_code(true, || kind.init(i))
            };
            constructor_threads(Some(i)).map_err(SetupFailure::Violation)?;
            match built {
                Ok(root)
                    if kind.process.size > 0
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
            match user_code(true, || kind.new_env(message_key(model))) {
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
                    crate::determinism::random::seed_for(
                        0x7374_6172_7400_0000 | seed_index(model, p) as u128,
                    );
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
            enabled_counts: handlers.iter().map(|_| std::cell::Cell::new(0)).collect(),
            handlers,
            invariants,
            registered: kind
                .registered_invariants()
                .into_iter()
                .filter(|(name, _)| !model.without.iter().any(|w| w == name))
                .collect(),
            properties: property_fns(model),
            initial,
            seed_base: None,
            orbit_seed: None,
            changed: Vec::new(),
            computed: Vec::new(),
            pending_sum: 0,
            passed: None,
            at: 0,
            tree,
            links: None,
            fp,
            scrub,
            pick: None,
            globals,
        })
    }
}

impl<'m> Engine<'m, P> {
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

    /// Fingerprints states by their smallest images under the model's
    /// declared symmetry, or not: as the trace being replayed was.
    pub(crate) fn set_symmetric(&mut self, on: bool) -> Result<(), CheckError> {
        if !on {
            self.fp.symmetry = None;
        } else if self.fp.symmetry.is_none() {
            if self.model.symmetry.is_empty() {
                return Err(CheckError::Trace(
                    "the trace was recorded under symmetry reduction, and the model declares \
                     no interchangeable processes now"
                        .into(),
                ));
            }
            self.fp.symmetry = Some(super::fingerprint::symmetry_of(self.model, &self.fp)?);
        }
        Ok(())
    }

    /// The smallest image computed last, under symmetry reduction.
    pub(crate) fn last_canonical(&self) -> Option<&super::fingerprint::Canonical> {
        self.fp.last.as_ref()
    }

    /// How many states' smallest images were not computed exactly.
    pub(crate) fn inexact_images(&self) -> u64 {
        self.fp.inexact
    }

    /// Whether states are fingerprinted by their smallest image under the
    /// declared symmetry.
    pub(crate) fn symmetric(&self) -> bool {
        self.fp.symmetry.is_some()
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
        kind_of(self.model).msgs(self.env()).len()
    }

    pub(crate) fn env(&self) -> &Env<ErasedMsg, ErasedShared> {
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
}
