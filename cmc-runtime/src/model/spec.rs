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
use crate::model::env::NetworkConfig;
use crate::model::process::{Check, Process};
use crate::model::world::World;

/// The most workers a search runs (`Model::jobs` is capped here; the
/// search sizes its shared tables by it).
pub const MAX_WORKERS: usize = 256;

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
    /// Random walks, reproducible from the seed; a walk ends at the depth
    /// bound (`max_depth`, default 1000) or in a state without successor.
    /// By default they are guided by novelty (see
    /// [`Model::guided_walks`]): a walk moves only into states no walk
    /// entered before at that depth or shallower, stepping back where none
    /// is left, and starts from a state an earlier walk left with
    /// successors untried. Plain walks take one random enabled event at
    /// each step, with random choices, and each starts from the initial
    /// state. Memory does not grow with the run (guided walks keep a fixed
    /// table and a bounded corpus); such a search is never complete. It
    /// stops at a violation, the time limit or `max_walks`; one of the two
    /// bounds is required. A violation's trace is shortened (loops cut,
    /// steps dropped) before it is shown. `unique` counts distinct states
    /// seen, estimated by a sketch.
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
    /// Whether this process searches with the other processes of an MPI
    /// job (`cargo cmc check --processes N`; see `search::cluster`).
    pub(crate) cluster: bool,
    /// Whether a harness's options (`--seed`) set the seed: an error
    /// unless the strategy uses one.
    pub(crate) seed_given: bool,
    /// The command-line flags that overrode the model's settings of the
    /// visited set (`--fingerprint-bits`, `--no-transition-cache`), which
    /// a search that keeps no visited set must refuse.
    pub(crate) visited_flags: Vec<&'static str>,
    /// Registered global invariants this model leaves out, by name.
    pub(crate) without: Vec<String>,
    /// Partial-order reduction by sleep sets (see [`Model::por`]).
    pub(crate) por: bool,
    /// The transition cache (see [`Model::transition_cache`]).
    pub(crate) transition_cache: bool,
    /// Random walks start from a corpus of interesting states (see
    /// [`Model::guided_walks`]).
    pub(crate) guided_walks: bool,
    /// The most breadth-first frontier entries kept in memory (`None`:
    /// the default, `Some(usize::MAX)`: all).
    pub(crate) frontier_in_memory: Option<usize>,
    /// The groups of interchangeable processes (see
    /// [`Model::interchangeable`]).
    pub(crate) symmetry: Vec<Interchangeable>,
    /// Whether symmetry reduction is on, when groups are declared
    /// (`--no-symmetry` turns it off, to count the states without it).
    pub(crate) reduce: bool,
    /// How much of the declared symmetry is checked (see
    /// [`Model::check_symmetry`]).
    pub(crate) check_symmetry: SymmetryCheck,
    /// Where the states hold identifiers as plain integers: (type name,
    /// field paths) (see [`Model::ids_in`]).
    pub(crate) typed_ids: Vec<(String, Vec<String>)>,
    /// Fields that are not part of a state's meaning: (type name, field
    /// names) (see [`Model::hidden_in`]).
    pub(crate) hidden: Vec<(String, Vec<String>)>,
    /// Sequences whose order is not part of a state's meaning: (type
    /// name, field names) (see [`Model::unordered_in`]).
    pub(crate) unordered: Vec<(String, Vec<String>)>,
    /// The erased model's process type (an `engine::erased::Kind`), in a
    /// model the engine runs; `None` in the user's.
    pub(crate) erased: Option<Box<dyn std::any::Any>>,
}

/// A group of interchangeable processes: their indices and their
/// identifiers.
#[derive(Clone, Debug)]
pub(crate) struct Interchangeable {
    pub(crate) processes: Vec<usize>,
    pub(crate) ids: Vec<u64>,
    /// The identifiers are plain integers (named by [`Model::ids_in`]),
    /// not a [`ProcessId`](crate::ProcessId) type.
    pub(crate) plain: bool,
}

/// How much of a declared symmetry a search checks (see
/// [`Model::check_symmetry`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SymmetryCheck {
    /// A sample: the first states the reduction merges with a different
    /// state of their orbit (the default).
    #[default]
    Sampled,
    /// Every merge whose first state is still held (`--check-symmetry`).
    All,
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
            cluster: false,
            seed_given: false,
            visited_flags: Vec::new(),
            without: Vec::new(),
            por: false,
            transition_cache: true,
            guided_walks: true,
            frontier_in_memory: None,
            symmetry: Vec::new(),
            reduce: true,
            check_symmetry: SymmetryCheck::Sampled,
            typed_ids: Vec::new(),
            hidden: Vec::new(),
            unordered: Vec::new(),
            erased: None,
        }
    }

    /// Declares the processes `processes` interchangeable, process `i`
    /// named by `id(i)`: they run the same code and differ only in their
    /// names, so a state and its image under any permutation of them (every
    /// identifier of type `I` renamed everywhere: in processes, messages in
    /// flight with their senders and receivers, timers, shared variables,
    /// maps and sets keyed by identifiers) behave alike, and the search
    /// counts each such orbit once: it fingerprints a state by the smallest
    /// fingerprint of its images. Traces stay concrete.
    ///
    /// `I` derives [`ProcessId`](crate::ProcessId); every type the state
    /// holds is fingerprinted by its `cmc::StateHash` (derive it), whose
    /// fields of type `I` are renamed (a `Hash` or `Debug` could not be).
    /// Or `I` is a plain integer, as in a crate written without cmc in
    /// mind (raft's `u64` ids): then the types are walked by their type
    /// information and [`Model::ids_in`] names the fields that hold
    /// identifiers.
    /// Called once per group (a role: the replicas; the clients); processes
    /// not in any group keep their names.
    ///
    /// The declaration is checked, not trusted: where the reduction merges
    /// a state with another state of its orbit, cmc runs both and compares
    /// their successors and the invariants' verdicts (on a sample of the
    /// merges, or all of them with [`Model::check_symmetry`]). A process
    /// with a role of its own or an identifier compared by order is
    /// reported as a violation of the declared symmetry.
    ///
    /// # Panics
    /// When a group has fewer than two processes or names one twice.
    pub fn interchangeable<I: crate::identity::rename::Identifier>(
        mut self,
        processes: impl IntoIterator<Item = usize>,
        id: impl Fn(usize) -> I,
    ) -> Self {
        let processes: Vec<usize> = processes.into_iter().collect();
        assert!(
            processes.len() >= 2,
            "a group of interchangeable processes has at least two, not {processes:?}"
        );
        let mut sorted = processes.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(
            sorted.len(),
            processes.len(),
            "a group of interchangeable processes names each once: {processes:?}"
        );
        let ids = sorted.iter().map(|&i| id(i).number()).collect();
        self.symmetry.push(Interchangeable {
            processes: sorted,
            ids,
            plain: I::PLAIN,
        });
        self
    }

    /// Names where the states hold process identifiers as plain integers,
    /// for a crate that cannot derive [`ProcessId`](crate::ProcessId)
    /// (unmodified third-party code): the fields `fields` of the struct
    /// named `type_name` (as `std::any::type_name` writes it, generic
    /// arguments left out: `"raft::tracker::ProgressTracker"`). A field
    /// may be a path through nested fields (`"outbox.0"`), passing
    /// through options, boxes, sequences and map values; it ends at
    /// integers or containers of them: sequences of identifiers count as
    /// sets, maps and sets keyed by identifiers as keyed by the renamed
    /// ones.
    ///
    /// Such types are fingerprinted by their type information (the
    /// debugging information `cargo cmc` builds with), and so are the
    /// messages then. Used with [`Model::interchangeable`] and integer
    /// identifiers; what is named is checked when the search starts (a
    /// type no state holds, a field it lacks, a path that does not end at
    /// integers are errors).
    pub fn ids_in(mut self, type_name: &str, fields: &[&str]) -> Self {
        self.typed_ids.push((
            type_name.to_string(),
            fields.iter().map(|f| f.to_string()).collect(),
        ));
        self
    }

    /// Declares the fields `fields` of the struct named `type_name` (as in
    /// [`Model::ids_in`]) hidden: written for humans (a log of the last
    /// event, statistics) and not part of what the state means, as SPIN's
    /// `hidden` variables or a TLC `VIEW` that leaves them out. Two states
    /// that differ only there count as one, with or without a symmetry
    /// (the types that hold them are fingerprinted by their type
    /// information).
    ///
    /// A hidden field must not change what the program does. With
    /// interchangeable processes that is checked where the symmetry is
    /// (two merged states run and compared, their hidden fields as they
    /// are): a log that names identifiers as text cannot be renamed, so it
    /// would make the symmetry fail its check if it were not hidden.
    /// Without a symmetry nothing checks it.
    pub fn hidden_in(mut self, type_name: &str, fields: &[&str]) -> Self {
        self.hidden.push((
            type_name.to_string(),
            fields.iter().map(|f| f.to_string()).collect(),
        ));
        self
    }

    /// Declares the fields `fields` of the struct named `type_name` (as in
    /// [`Model::ids_in`]), each a `Vec`, unordered: the order of their
    /// elements is not part of what the state means (messages queued for
    /// an unordered network in the order a hash map of peers gave them),
    /// so they are hashed as multisets. Two states that differ only in
    /// that order count as one, with or without a symmetry (the types that
    /// hold them are fingerprinted by their type information).
    ///
    /// Like a hidden field, an order that does change what the program
    /// does is found by the symmetry check where processes are
    /// interchangeable (the order a hash map keyed by identifiers gives
    /// depends on the identifiers), and is the user's word elsewhere.
    pub fn unordered_in(mut self, type_name: &str, fields: &[&str]) -> Self {
        self.unordered.push((
            type_name.to_string(),
            fields.iter().map(|f| f.to_string()).collect(),
        ));
        self
    }

    /// How much of the declared symmetry ([`Model::interchangeable`]) the
    /// search checks: [`SymmetryCheck::Sampled`] (the default) checks the
    /// first merges of a state with another of its orbit, and
    /// [`SymmetryCheck::All`] (`--check-symmetry`) every merge whose first
    /// state the search still holds.
    pub fn check_symmetry(mut self, check: SymmetryCheck) -> Self {
        self.check_symmetry = check;
        self
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
    /// handler marked fair ([`Handler::fair`](crate::Handler::fair)) — it stays enabled in a
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

    /// The most entries a breadth-first frontier keeps in memory; the
    /// rest wait on disk, in files under `CMC_SPILL_DIR` (`cargo cmc`:
    /// `target/cmc/spill`), written and read back in segments of
    /// consecutive entries (at most 8,192, and an eighth of `entries`).
    /// Default: 65,536 (about 60 MB for a state of a kilobyte), or the
    /// number in `CMC_SPILL` (`off`: all in memory); 0: all in memory.
    /// Under partial-order reduction on one worker the frontier stays in
    /// memory (its sleep sets know states by where they are stored).
    pub fn frontier_in_memory(mut self, entries: usize) -> Self {
        self.frontier_in_memory = Some(if entries == 0 { usize::MAX } else { entries });
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
    /// walks (a guided walk ends when its budget of transitions is spent,
    /// 2^6 to 2^14, or when it has nothing novel left to try).
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

    /// Whether random walks ([`Strategy::Walk`]) are guided by novelty
    /// (default: yes), as coverage-guided fuzzers (AFL, libFuzzer) and
    /// Go-Explore are: a walk tries its state's events in random order and
    /// moves to the first successor that is *novel* — no walk entered it
    /// before, or only deeper —, steps back to try the rest where none is
    /// novel, and after a random budget of transitions leaves the states on
    /// its way that still have untried successors to a corpus, from which
    /// later walks start. The budget goes to states no walk has seen, and a
    /// bug at the end of a long exact sequence of events (at the depth
    /// bound, where only shortest paths reach) is found once the walks have
    /// covered the states before it, as a complete search would, instead of
    /// by the luck of one walk making every step right. A violation's trace
    /// still starts at the initial state. One transition in four goes to
    /// plain walks instead (a portfolio): where a bug is common along the
    /// paths a random scheduler takes but the space around them is deep
    /// and wide, a plain walk meets it sooner than an even cover.
    ///
    /// Memory is bounded per worker: a table of 64 MiB that remembers about
    /// eight million states with their least depth (past that, it forgets
    /// the deepest: they may be explored again, nothing is lost), and a
    /// corpus of at most 16,384 states whose paths hold at most 2^20 steps
    /// in all. Workers walk with seeds, tables and corpora of their own.
    /// When the corpus runs dry, every state within the bound was covered
    /// (but what the table forgot): the table is cleared and the walks
    /// begin again.
    ///
    /// `false`: plain walks, each from the initial state, one random event
    /// at a time (`cargo cmc check --plain-walks`).
    pub fn guided_walks(mut self, yes: bool) -> Self {
        self.guided_walks = yes;
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
