//! What a user describes: process types with their handler tables, global
//! invariants, the environment's configuration, bounds and search options.
//!
//! Everything here is usable by hand; the attribute macros generate exactly
//! these tables.

use std::fmt;
use std::hash::Hash;
use std::time::Duration;

use crate::memory::arena::ArenaConfig;
use crate::memory::FingerprintWidth;
use crate::model::ctx::{Ctx, View};
use crate::model::world::World;

/// The most workers a search runs (`Model::jobs` is capped here; the
/// search sizes its shared tables by it).
pub const MAX_WORKERS: usize = 256;

/// What travels over the model's network. Messages are copied into the
/// environment's arena when sent and into the receiver's arena when
/// delivered (so each arena owns all its objects), and shown in traces by
/// their `Debug`. They are fingerprinted, and kept in a canonical order, by
/// their best source of identity (see [`crate::identity`]): cmc's
/// `StateHash`, their `Hash`, or their canonical `Debug`, which every
/// message has; so a third-party message type that derives only `Clone` and
/// `Debug` is a message.
pub trait Message: Clone + fmt::Debug + 'static {}

impl<T: Clone + fmt::Debug + 'static> Message for T {}

/// A process type: its handlers and invariants. Its state is captured from
/// memory, so it needs no `Clone`, `Hash`, `Eq` or `Serialize`.
///
/// `#[cmc::process]` implements this trait; it can also be written by hand.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a cmc process type",
    label = "not a process type",
    note = "put #[cmc::process] on an impl block of `{Self}` whose methods marked #[handler] are its steps"
)]
pub trait Process: Sized + 'static {
    /// The messages processes of this type exchange (`()` when none).
    type Msg: Message;

    /// Variables shared by all processes (`()` when none). They live in the
    /// environment's arena; handlers read them with [`Ctx::shared`] and
    /// change them with [`Ctx::with_shared`].
    type Shared: Default + 'static;

    /// The handler table, in the order the search tries handlers.
    fn handlers() -> Vec<Handler<Self>>;

    /// Invariants checked on every process of this type in every new state.
    fn invariants() -> Vec<Invariant<Self>> {
        Vec::new()
    }

    /// The sources of identity the process type, its shared variables and
    /// its messages offer (`StateHash`, `Hash`, `Debug`):
    /// `#[cmc::process]` detects them. The default knows only that messages
    /// have a `Debug`; hand-written implementations may say more.
    fn hash_fns() -> HashFns<Self> {
        HashFns::none()
    }
}

/// The body of a handler.
pub type Body<P> = fn(&mut P, &mut Ctx<'_, P>);
/// A guard: the handler may run in a state only when it returns true.
pub type Guard<P> = fn(&P, &View<'_, P>) -> bool;

/// When a handler is enabled.
pub enum Trigger<P: Process> {
    /// In every state.
    Always,
    /// When the guard holds.
    Guard(Guard<P>),
    /// When the process's timer of this name is pending: running the
    /// handler is the timer's expiry (the timer is cancelled first).
    Timer(&'static str),
    /// Once, when the model starts: after every process and the
    /// environment are built, before the initial state is taken, in
    /// process order. Such a handler sets the first timers and sends the
    /// first messages; it cannot make choices (see [`Handler::on_start`]).
    Start,
}

impl<P: Process> Clone for Trigger<P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P: Process> Copy for Trigger<P> {}

impl<P: Process> fmt::Debug for Trigger<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trigger::Always => f.write_str("Always"),
            Trigger::Guard(_) => f.write_str("Guard"),
            Trigger::Timer(t) => write!(f, "Timer({t:?})"),
            Trigger::Start => f.write_str("Start"),
        }
    }
}

/// One entry of a handler table.
pub struct Handler<P: Process> {
    /// The name traces show (the method name, for generated tables).
    pub name: &'static str,
    /// When it is enabled.
    pub trigger: Trigger<P>,
    /// What it does.
    pub body: Body<P>,
    /// Whether it runs under weak fairness (see [`Handler::fair`]).
    pub fair: bool,
    /// Which processes have the handler: all (`None`), or those where the
    /// function holds (see [`Handler::applies`]).
    pub applies: Option<fn(&P) -> bool>,
}

impl<P: Process> Handler<P> {
    /// A handler enabled in every state.
    pub fn new(name: &'static str, body: Body<P>) -> Self {
        Handler {
            name,
            trigger: Trigger::Always,
            body,
            fair: false,
            applies: None,
        }
    }

    /// Gives the handler only to the processes where `applies` holds: in
    /// the others it is never enabled, whatever its trigger (a timer of
    /// the same name there is another handler's), and a start handler does
    /// not run. It says what kind of process this is, not what state it
    /// is in, so it must give the same answer in every state. A
    /// `#[cmc::roles]` enum gives each role's handlers to the processes of
    /// that role this way.
    pub fn applies(mut self, applies: fn(&P) -> bool) -> Self {
        self.applies = Some(applies);
        self
    }

    /// Whether the handler is one of `process`'s (see [`Handler::applies`]).
    pub(crate) fn applies_to(&self, process: &P) -> bool {
        self.applies.is_none_or(|applies| applies(process))
    }

    /// Puts the handler under weak fairness for liveness properties
    /// ([`Model::eventually`]): an execution in which it stays enabled in
    /// one process forever without ever running there is not a
    /// counterexample (`#[handler(fair)]` in a `#[cmc::process]` block).
    pub fn fair(mut self) -> Self {
        self.fair = true;
        self
    }

    /// Enables the handler only where `guard` holds.
    pub fn guard(mut self, guard: Guard<P>) -> Self {
        self.trigger = Trigger::Guard(guard);
        self
    }

    /// Makes the handler the expiry of the timer `name`.
    pub fn on_timer(mut self, name: &'static str) -> Self {
        self.trigger = Trigger::Timer(name);
        self
    }

    /// Runs the handler once per process when the model starts, before the
    /// initial state (`#[handler(start)]`): where a process arms its first
    /// timers and sends its first messages, which a constructor cannot (it
    /// has no `Ctx`). It is part of building the initial state, not an
    /// event of the search; `cmc::choose` and `recv` are refused there
    /// (the initial state is one state).
    pub fn on_start(mut self) -> Self {
        self.trigger = Trigger::Start;
        self
    }
}

impl<P: Process> Clone for Handler<P> {
    fn clone(&self) -> Self {
        Handler {
            fair: self.fair,
            name: self.name,
            trigger: self.trigger,
            body: self.body,
            applies: self.applies,
        }
    }
}

impl<P: Process> fmt::Debug for Handler<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handler")
            .field("name", &self.name)
            .field("trigger", &self.trigger)
            .field("applies", &self.applies.is_some())
            .finish()
    }
}

/// What an invariant returns: `Err(message)` when it is violated.
pub type Check = Result<(), String>;

/// A per-process invariant.
pub struct Invariant<P> {
    /// Its name in reports.
    pub name: &'static str,
    /// The check.
    pub check: fn(&P) -> Check,
}

impl<P> Invariant<P> {
    /// An invariant named `name`.
    pub fn new(name: &'static str, check: fn(&P) -> Check) -> Self {
        Invariant { name, check }
    }
}

impl<P> Clone for Invariant<P> {
    fn clone(&self) -> Self {
        Invariant {
            name: self.name,
            check: self.check,
        }
    }
}

impl<P> fmt::Debug for Invariant<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Invariant")
            .field("name", &self.name)
            .finish()
    }
}

/// A global invariant: sees every process and the environment.
pub struct GlobalInvariant<P: Process> {
    /// Its name in reports.
    pub name: &'static str,
    /// The check.
    pub check: fn(&World<'_, P>) -> Check,
}

impl<P: Process> GlobalInvariant<P> {
    /// A global invariant named `name`.
    pub fn new(name: &'static str, check: fn(&World<'_, P>) -> Check) -> Self {
        GlobalInvariant { name, check }
    }
}

impl<P: Process> Clone for GlobalInvariant<P> {
    fn clone(&self) -> Self {
        GlobalInvariant {
            name: self.name,
            check: self.check,
        }
    }
}

/// What a [`Property`] asks of the model's executions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PropertyKind {
    /// Some reachable state satisfies it: the search reports a witness,
    /// and a complete search that never reaches one is a violation.
    Sometimes,
    /// Every execution reaches a state that satisfies it: a
    /// counterexample is a path to a cycle, or to a state without
    /// successor, along which it never holds.
    Eventually,
}

/// A reachability or liveness property over the whole system (see
/// [`Model::sometimes`] and [`Model::eventually`]).
pub struct Property<P: Process> {
    /// Its name in reports.
    pub name: &'static str,
    /// What it asks.
    pub kind: PropertyKind,
    /// Whether it holds in a state.
    pub check: fn(&World<'_, P>) -> bool,
}

impl<P: Process> Clone for Property<P> {
    fn clone(&self) -> Self {
        Property {
            name: self.name,
            kind: self.kind,
            check: self.check,
        }
    }
}

impl<P: Process> fmt::Debug for Property<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Property")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .finish()
    }
}

impl<P: Process> fmt::Debug for GlobalInvariant<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GlobalInvariant")
            .field("name", &self.name)
            .finish()
    }
}

/// What a send does when the network already holds its bound of messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnFull {
    /// The message is silently lost, as a congested network drops packets
    /// (the default).
    #[default]
    Drop,
    /// `send` returns `Err(SendError::Full)`: the code must handle it.
    Error,
    /// Reaching the bound is a model error reported as a violation.
    Violation,
}

/// The network of the model: a bounded multiset of in-flight messages.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct NetworkConfig {
    /// The most messages in flight at once.
    pub capacity: usize,
    /// Whether any in-flight message may be lost (an environment event).
    pub loss: bool,
    /// Whether any in-flight message may be duplicated (an environment
    /// event, within the capacity).
    pub duplication: bool,
    /// Whether each link (sender, receiver) delivers in order; otherwise any
    /// pending message can be delivered next.
    pub fifo: bool,
    /// Whether every send may fail nondeterministically (`Err(SendError::Failed)`).
    pub send_failure: bool,
    /// What a send does at the capacity.
    pub on_full: OnFull,
}

impl Default for NetworkConfig {
    fn default() -> Self {
        NetworkConfig {
            capacity: 4,
            loss: false,
            duplication: false,
            fifo: false,
            send_failure: false,
            on_full: OnFull::Drop,
        }
    }
}

impl NetworkConfig {
    /// A reliable, unordered network of capacity 4.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the capacity.
    pub fn capacity(mut self, n: usize) -> Self {
        self.capacity = n;
        self
    }

    /// Lets the environment lose messages.
    pub fn lossy(mut self, yes: bool) -> Self {
        self.loss = yes;
        self
    }

    /// Lets the environment duplicate messages.
    pub fn duplicating(mut self, yes: bool) -> Self {
        self.duplication = yes;
        self
    }

    /// Makes every link deliver in order.
    pub fn fifo(mut self, yes: bool) -> Self {
        self.fifo = yes;
        self
    }

    /// Lets every send fail nondeterministically.
    pub fn send_failure(mut self, yes: bool) -> Self {
        self.send_failure = yes;
        self
    }

    /// Sets what a send does at the capacity.
    pub fn on_full(mut self, on_full: OnFull) -> Self {
        self.on_full = on_full;
        self
    }
}

/// The order in which states are explored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Strategy {
    /// Depth-first: little memory, long traces.
    Dfs,
    /// Breadth-first (the default, as in TLC): the first violation found
    /// has a shortest trace; its frontier holds a level of states, which
    /// the memory budget bounds.
    #[default]
    Bfs,
    /// Random order, reproducible from the seed: depth-first, each state's
    /// successors taken in a random order, so it holds no more states than
    /// depth-first search does.
    Random,
    /// Highest priority first (see [`Model::priority`]); ties in the order
    /// states were found.
    BestFirst,
    /// Random walks from the initial state, reproducible from the seed: at
    /// each step one enabled event, with random choices; a walk ends at the
    /// depth bound (`max_depth`, default [`DEFAULT_WALK_DEPTH`]) or in a
    /// state without successor, and the next starts from the initial state
    /// again. Nothing is stored but the walk in progress, so memory does
    /// not grow with the run; such a search is never complete. It stops at
    /// a violation, the time limit or `max_walks`; one of the two bounds is
    /// required. A violation's trace is shortened (loops cut) before it is
    /// shown. `unique` counts distinct states seen, estimated by a sketch.
    Walk,
}

/// The depth at which a random walk ends when the model sets no depth
/// bound.
pub const DEFAULT_WALK_DEPTH: usize = 1000;

/// The default of [`Model::transition_timeout`].
pub const DEFAULT_TRANSITION_TIMEOUT: Duration = Duration::from_secs(5);

/// The search limits.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Bounds {
    /// States at this depth are not expanded.
    pub max_depth: Option<usize>,
    /// The search stops after this many unique states.
    pub max_states: Option<usize>,
    /// The search stops after this long.
    pub time_limit: Option<Duration>,
    /// A random-walk search ([`Strategy::Walk`]) stops after this many
    /// walks.
    pub max_walks: Option<u64>,
    /// The search stops before the process's resident memory exceeds this
    /// many bytes. `None`: 80 % of the memory available when it starts;
    /// `Some(0)`: no budget.
    pub max_memory: Option<u64>,
}

pub use crate::identity::hasher::{FingerprintMode, StateHasher};
pub use crate::identity::HashFn;
use crate::identity::Sources;

/// The sources of identity a process type, its shared variables and its
/// messages offer (filled in by `#[cmc::process]`, which detects them).
pub struct HashFns<P: Process> {
    /// The process type's.
    pub process: Sources<P>,
    /// The shared variables'.
    pub shared: Sources<P::Shared>,
    /// The message type's.
    pub msg: Sources<P::Msg>,
}

impl<P: Process> HashFns<P> {
    /// Nothing known but what every message has: a `Debug`.
    pub fn none() -> Self {
        HashFns {
            process: Sources::none(),
            shared: Sources::none(),
            msg: Sources::debug_only(),
        }
    }
}

impl<P: Process> fmt::Debug for HashFns<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HashFns")
            .field("process", &self.process)
            .field("shared", &self.shared)
            .field("msg", &self.msg)
            .finish()
    }
}

type Abstraction<P> = Box<dyn Fn(&P, &mut StateHasher)>;

type Pred<P> = Box<dyn Fn(&World<'_, P>) -> bool>;
type ProcessPred<P> = Box<dyn Fn(&P) -> bool>;
type Priority<P> = Box<dyn Fn(&World<'_, P>) -> i64>;

/// A model: processes, environment, properties, bounds and search options.
pub struct Model<P: Process> {
    pub(crate) name: String,
    pub(crate) count: usize,
    pub(crate) init: Box<dyn Fn(usize) -> P>,
    pub(crate) network: NetworkConfig,
    pub(crate) invariants: Vec<GlobalInvariant<P>>,
    pub(crate) properties: Vec<Property<P>>,
    pub(crate) bounds: Bounds,
    pub(crate) prune: Option<Pred<P>>,
    /// A bound on each process's state alone (see [`Model::prune_process`]).
    pub(crate) prune_process: Option<ProcessPred<P>>,
    pub(crate) priority: Option<Priority<P>>,
    pub(crate) quiescence_ok: bool,
    pub(crate) width: FingerprintWidth,
    pub(crate) fingerprint: Option<FingerprintMode>,
    pub(crate) abstraction: Option<Abstraction<P>>,
    pub(crate) strategy: Strategy,
    pub(crate) seed: u64,
    pub(crate) keep_going: bool,
    pub(crate) check_determinism: bool,
    pub(crate) determinism_runs: usize,
    pub(crate) random_seeds: usize,
    pub(crate) detect_leaks: bool,
    pub(crate) arena: ArenaConfig,
    pub(crate) env_arena: ArenaConfig,
    pub(crate) debug: Option<fn(&P) -> String>,
    /// How long one piece of user code may run in an isolated check (see
    /// [`Model::transition_timeout`]).
    pub(crate) transition_timeout: Option<Duration>,
    /// Worker processes of the search (see [`Model::jobs`]); `None`: not
    /// set (one), `Some(0)`: one per core.
    pub(crate) jobs: Option<usize>,
    /// Whether a harness's options (`--seed`) set the seed: an error
    /// unless the strategy uses one.
    pub(crate) seed_given: bool,
    /// Registered global invariants this model leaves out, by name.
    pub(crate) without: Vec<String>,
    /// Partial-order reduction by sleep sets (see [`Model::por`]).
    pub(crate) por: bool,
    /// The transition cache (see [`Model::transition_cache`]).
    pub(crate) transition_cache: bool,
}

impl<P: Process> fmt::Debug for Model<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Model")
            .field("name", &self.name)
            .field("processes", &self.count)
            .field("network", &self.network)
            .field("bounds", &self.bounds)
            .field("strategy", &self.strategy)
            .finish_non_exhaustive()
    }
}

impl<P: Process> Model<P> {
    /// A model named `name` (its full path, for registered models) with
    /// `count` processes; process `i` is built by `init(i)` inside its own
    /// arena.
    pub fn new(name: impl Into<String>, count: usize, init: impl Fn(usize) -> P + 'static) -> Self {
        Model {
            name: name.into(),
            count,
            init: Box::new(init),
            network: NetworkConfig::default(),
            invariants: Vec::new(),
            properties: Vec::new(),
            bounds: Bounds::default(),
            prune: None,
            prune_process: None,
            priority: None,
            quiescence_ok: false,
            width: FingerprintWidth::Bits64,
            fingerprint: None,
            abstraction: None,
            strategy: Strategy::Bfs,
            seed: 0,
            keep_going: false,
            check_determinism: false,
            determinism_runs: 2,
            random_seeds: 1,
            detect_leaks: false,
            arena: ArenaConfig::default(),
            env_arena: ArenaConfig::default(),
            debug: None,
            transition_timeout: Some(DEFAULT_TRANSITION_TIMEOUT),
            jobs: None,
            seed_given: false,
            without: Vec::new(),
            por: false,
            transition_cache: true,
        }
    }

    /// How long one piece of user code — a handler, guard, invariant,
    /// constructor, `Hash` or `Debug` — may run before an isolated check
    /// (`cargo cmc`, `check_isolated`) stops it and reports a `timeout`
    /// violation with its trace ("handler `tick` of process 0 did not
    /// return within 5 s"); `None` lets it run forever. Default: 5 s.
    pub fn transition_timeout(mut self, limit: Option<Duration>) -> Self {
        self.transition_timeout = limit;
        self
    }

    /// The model's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Configures the network.
    pub fn network(mut self, network: NetworkConfig) -> Self {
        self.network = network;
        self
    }

    /// Adds a global invariant.
    pub fn invariant(mut self, name: &'static str, check: fn(&World<'_, P>) -> Check) -> Self {
        self.invariants.push(GlobalInvariant::new(name, check));
        self
    }

    /// Leaves out the global invariant `name` registered with
    /// `#[cmc::invariant]` for this model's process type (it holds for the
    /// other models). Naming an invariant that is not registered for the
    /// type is an error when the model is checked.
    pub fn without_invariant(mut self, name: impl Into<String>) -> Self {
        self.without.push(name.into());
        self
    }

    /// Adds a reachability property: some reachable state satisfies
    /// `holds`. The search reports a trace to the first such state it
    /// finds (under breadth-first search, a shortest one); a complete
    /// search that finds none reports the property as never reached, a
    /// violation. `#[cmc::sometimes]` registers one for every model of the
    /// process type.
    pub fn sometimes(mut self, name: &'static str, holds: fn(&World<'_, P>) -> bool) -> Self {
        self.properties.push(Property {
            name,
            kind: PropertyKind::Sometimes,
            check: holds,
        });
        self
    }

    /// Adds a liveness property: every execution reaches a state that
    /// satisfies `holds`. After a complete search, the states from which
    /// the property has not held yet are searched for a cycle among them
    /// (a *lasso*: a path into the cycle, then the cycle) or a state
    /// without successor; either is a counterexample. Cycles that starve a
    /// handler marked fair ([`Handler::fair`]) — it stays enabled in a
    /// process all along the cycle and never runs there — are not.
    /// `#[cmc::eventually]` registers one for every model of the process
    /// type.
    pub fn eventually(mut self, name: &'static str, holds: fn(&World<'_, P>) -> bool) -> Self {
        self.properties.push(Property {
            name,
            kind: PropertyKind::Eventually,
            check: holds,
        });
        self
    }

    /// Stops the search, bounded, before its resident memory exceeds
    /// `bytes` (0: no budget). Default: 80 % of the memory available when
    /// the search starts.
    pub fn max_memory(mut self, bytes: u64) -> Self {
        self.bounds.max_memory = Some(bytes);
        self
    }

    /// Limits the depth.
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.bounds.max_depth = Some(depth);
        self
    }

    /// Limits the number of unique states.
    pub fn max_states(mut self, states: usize) -> Self {
        self.bounds.max_states = Some(states);
        self
    }

    /// Stops a random-walk search ([`Strategy::Walk`]) after this many
    /// walks.
    pub fn max_walks(mut self, walks: u64) -> Self {
        self.bounds.max_walks = Some(walks);
        self
    }

    /// Limits the running time.
    pub fn time_limit(mut self, limit: Duration) -> Self {
        self.bounds.time_limit = Some(limit);
        self
    }

    /// States where `prune` returns true are outside the model (a value bound
    /// such as "sequence numbers ≤ 5"): they are neither stored nor explored.
    pub fn prune(mut self, prune: impl Fn(&World<'_, P>) -> bool + 'static) -> Self {
        self.prune = Some(Box::new(prune));
        self
    }

    /// States in which any process's state satisfies `prune` are outside
    /// the model, as with [`Model::prune`], for a bound that reads one
    /// process at a time (`|node| node.seq > 5`). Unlike a prune over the
    /// whole world it combines with partial-order reduction
    /// ([`Model::por`]): a step of one process cannot move another across
    /// such a bound, so commuting steps stay commuting in the bounded
    /// model. `prune` must read nothing but the process it is given.
    pub fn prune_process(mut self, prune: impl Fn(&P) -> bool + 'static) -> Self {
        self.prune_process = Some(Box::new(prune));
        self
    }

    /// The priority for [`Strategy::BestFirst`] (higher first).
    pub fn priority(mut self, priority: impl Fn(&World<'_, P>) -> i64 + 'static) -> Self {
        self.priority = Some(Box::new(priority));
        self
    }

    /// Whether a state where no handler is enabled is acceptable quiescence
    /// (true) or a deadlock (false, the default).
    pub fn quiescence_ok(mut self, ok: bool) -> Self {
        self.quiescence_ok = ok;
        self
    }

    /// Sets the fingerprint width.
    pub fn fingerprint_width(mut self, width: FingerprintWidth) -> Self {
        self.width = width;
        self
    }

    /// Sets how processes are fingerprinted. Without this, each process
    /// type uses the best source it offers (see [`FingerprintMode`]).
    pub fn fingerprint(mut self, mode: FingerprintMode) -> Self {
        self.fingerprint = Some(mode);
        self
    }

    /// Fingerprints each process by `abstraction(process)` (and selects
    /// [`FingerprintMode::Abstract`]): states whose processes have equal
    /// abstractions are explored once. The abstraction must keep everything
    /// the process's future behaviour depends on, or the search may miss
    /// states.
    pub fn abstraction<A: Hash>(mut self, abstraction: impl Fn(&P) -> A + 'static) -> Self {
        self.abstraction = Some(Box::new(move |p, h| abstraction(p).hash(h)));
        self.fingerprint = Some(FingerprintMode::Abstract);
        self
    }

    /// The fingerprint mode a check of this model uses for its processes.
    pub fn fingerprint_mode(&self) -> FingerprintMode {
        self.fingerprint.unwrap_or_else(|| {
            P::hash_fns()
                .process
                .best_or_typed()
                .map_or(FingerprintMode::Heap, |(mode, _)| mode)
        })
    }

    /// Sets the search strategy.
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// Searches with `jobs` worker processes at once (1, the default: in
    /// this process). The workers share the visited set, so a complete
    /// search finds exactly the states and violations one finds; each
    /// worker is watched like an isolated check (a crash in user code
    /// becomes a violation with its trace). Depth-first, breadth-first and
    /// random order only; breadth-first workers go level by level, so
    /// traces stay shortest (which of the shortest traces is shown may
    /// differ between runs). 0 means one worker per available core (one
    /// for best-first search, which has no parallel form); at most 256.
    pub fn jobs(mut self, jobs: usize) -> Self {
        self.jobs = Some(jobs.min(MAX_WORKERS));
        self
    }

    /// The workers this model's search runs with.
    /// Whether a depth bound cuts a depth-first or random-order search,
    /// which then revisits states a shorter path reaches (one worker: the
    /// depths live with the worker's own visited set).
    pub(crate) fn depth_first_bounded(&self) -> bool {
        self.bounds.max_depth.is_some() && matches!(self.strategy, Strategy::Dfs | Strategy::Random)
    }

    pub(crate) fn workers(&self) -> usize {
        match self.jobs {
            None => 1,
            Some(0)
                if self.strategy == Strategy::BestFirst
                    || self.por
                    || self.depth_first_bounded() =>
            {
                1
            }
            Some(0) => std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(MAX_WORKERS),
            Some(n) => n,
        }
    }

    /// Partial-order reduction by sleep sets (`--por`): after a state's
    /// event of one process has been explored, an event of another process
    /// that commutes with it (each touches nothing the other reads: its
    /// own process, messages to neither, no shared variable both use and
    /// one writes, no randomness, room in the network for both) does not
    /// run it again in the successor; the successor of the first explores
    /// that order. Every reachable state is still visited and every
    /// invariant checked in it, so the unique count is the same as
    /// without; fewer transitions run. Exhaustive strategies (depth-first,
    /// breadth-first, random order, best-first) on one worker: with
    /// [`Model::jobs`] 0 the search runs on one core, and more than one
    /// worker is an error. Random walks have nothing to reduce.
    pub fn por(mut self, yes: bool) -> Self {
        self.por = yes;
        self
    }

    /// Whether the search may skip running a transition whose successor
    /// it can tell is known (default: yes). The transition cache
    /// remembers, for each event run from a state whose arenas point only
    /// into themselves, how the run changed the fingerprint, keyed by the
    /// contents of the two arenas the event can read (its process's and
    /// the environment's), the event and its choices; a run that drew
    /// randomness is not remembered. It changes no count: switch it off to
    /// measure what it saves, or to run every transition (for a handler
    /// that reads something outside the state, such as a file or a static
    /// counter, whose results cmc cannot judge anyway).
    pub fn transition_cache(mut self, yes: bool) -> Self {
        self.transition_cache = yes;
        self
    }

    /// Sets the seed of [`Strategy::Random`].
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Keeps searching after a violation, collecting distinct violations
    /// (by kind and property or location).
    pub fn keep_going(mut self, yes: bool) -> Self {
        self.keep_going = yes;
        self
    }

    /// Runs every transition twice (see [`Model::determinism_runs`]),
    /// evaluates every state's guards and invariants twice, and reports
    /// the first that differs (hidden nondeterminism). The repeated runs
    /// start from a stack shifted a little deeper, so that code keeping a
    /// stack address is caught too.
    pub fn check_determinism(mut self, yes: bool) -> Self {
        self.check_determinism = yes;
        self
    }

    /// With [`Model::check_determinism`], how many times in all each
    /// transition, guard and invariant runs (at least 2; more catches
    /// values that change rarely).
    pub fn determinism_runs(mut self, runs: usize) -> Self {
        self.determinism_runs = runs.max(2);
        self
    }

    /// Runs each transition that draws randomness (the thread RNG, the
    /// operating system's entropy, a new `HashMap`'s keys) with `k` seeds
    /// derived from the state and the event, as up to `k` successors; a
    /// transition that draws nothing runs once. With one seed (the
    /// default) a draw is a single function of the state and the event.
    /// Widens the coverage of randomized code (a randomized timeout) without
    /// rewriting it as `cmc::choose`.
    ///
    /// # Panics
    /// When `k` is 0 or above 2^16.
    pub fn random_seeds(mut self, k: usize) -> Self {
        assert!(
            (1..=1 << 16).contains(&k),
            "random_seeds({k}): the number of seeds must be between 1 and 65536"
        );
        self.random_seeds = k;
        self
    }

    /// Reports objects in a process's arena that are unreachable from its
    /// root after a transition (a conservative mark from the root).
    pub fn detect_leaks(mut self, yes: bool) -> Self {
        self.detect_leaks = yes;
        self
    }

    /// Configures every process arena (reservation, tracking).
    pub fn process_arena(mut self, config: ArenaConfig) -> Self {
        self.arena = config;
        self
    }

    /// Configures the environment's arena.
    pub fn environment_arena(mut self, config: ArenaConfig) -> Self {
        self.env_arena = config;
        self
    }

    /// Shows each process's state in traces with `show`.
    pub fn debug_with(mut self, show: fn(&P) -> String) -> Self {
        self.debug = Some(show);
        self
    }
}

impl<P: Process + fmt::Debug> Model<P> {
    /// Shows each process's state in traces with its `Debug` (pretty).
    pub fn debug_states(self) -> Self {
        self.debug_with(|p| format!("{p:#?}"))
    }
}
