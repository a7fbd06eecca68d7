//! What the attribute macros register about a model's process type (its
//! global invariants and properties, found at run time with `inventory`),
//! and the options a harness such as `cargo cmc` applies to a model. The
//! registered models themselves, which name the whole check, are the
//! driver's (`driver::registry`).

use std::any::TypeId;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::memory::FingerprintWidth;
use crate::model::process::{Check, Process};
use crate::model::spec::{FingerprintMode, Model, PropertyKind, Strategy};
use crate::model::world::World;

/// Overrides a harness applies to a model before checking it (the flags of
/// `cargo cmc check`). `None` keeps the model's own setting.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunOptions {
    /// The search strategy.
    pub strategy: Option<Strategy>,
    /// The depth bound.
    pub max_depth: Option<usize>,
    /// The bound on unique states.
    pub max_states: Option<usize>,
    /// The time limit.
    pub time_limit: Option<Duration>,
    /// The bound on random walks.
    #[serde(default)]
    pub max_walks: Option<u64>,
    /// The seed of the random strategy.
    pub seed: Option<u64>,
    /// Worker processes (`Model::jobs`; 0: one per core, unless the model
    /// chose a number).
    #[serde(default)]
    pub jobs: Option<usize>,
    /// Whether to keep going after a violation.
    pub keep_going: Option<bool>,
    /// Partial-order reduction (`Model::por`).
    #[serde(default)]
    pub por: Option<bool>,
    /// The transition cache (`Model::transition_cache`).
    #[serde(default)]
    pub transition_cache: Option<bool>,
    /// Guided random walks (`Model::guided_walks`).
    #[serde(default)]
    pub guided_walks: Option<bool>,
    /// The fingerprint width.
    pub width: Option<FingerprintWidth>,
    /// The fingerprint mode.
    pub fingerprint: Option<FingerprintMode>,
    /// Whether to run every transition twice.
    pub check_determinism: Option<bool>,
    /// Seeds per transition that draws randomness.
    #[serde(default)]
    pub random_seeds: Option<usize>,
    /// Whether to run in a child process (crashes become violations).
    pub isolate: bool,
    /// How long one piece of user code may run (`Duration::ZERO`: no
    /// limit); see `Model::transition_timeout`.
    #[serde(default)]
    pub transition_timeout: Option<Duration>,
    /// The memory budget in bytes (0: none).
    #[serde(default)]
    pub max_memory: Option<u64>,
    /// The most breadth-first frontier entries kept in memory (0: all);
    /// see `Model::frontier_in_memory`.
    #[serde(default)]
    pub frontier_in_memory: Option<usize>,
    /// Runs of each transition, guard and invariant under the determinism
    /// check.
    #[serde(default)]
    pub determinism_runs: Option<usize>,
    /// Whether symmetry reduction is on where a model declares
    /// interchangeable processes (`--no-symmetry`: off).
    #[serde(default)]
    pub symmetry: Option<bool>,
    /// How much of a declared symmetry is checked (`--check-symmetry`).
    #[serde(default)]
    pub check_symmetry: Option<crate::model::SymmetryCheck>,
    /// Whether the check is one process's part of a search across the
    /// processes of an MPI job (`cargo cmc check --processes N`).
    #[serde(default)]
    pub cluster: Option<bool>,
}

impl<P: Process> Model<P> {
    /// Applies a harness's overrides.
    pub fn apply(mut self, options: &RunOptions) -> Self {
        if let Some(s) = options.strategy {
            self.strategy = s;
        }
        if let Some(d) = options.max_depth {
            self.bounds.max_depth = Some(d);
        }
        if let Some(n) = options.max_states {
            self.bounds.max_states = Some(n);
        }
        if let Some(t) = options.time_limit {
            self.bounds.time_limit = Some(t);
        }
        if let Some(w) = options.max_walks {
            self.bounds.max_walks = Some(w);
        }
        if let Some(seed) = options.seed {
            self.seed = seed;
            self.seed_given = true;
        }
        match options.jobs {
            Some(0) if self.jobs.is_some() => {}
            Some(jobs) => self = self.jobs(jobs),
            None => {}
        }
        if let Some(k) = options.keep_going {
            self.keep_going = k;
        }
        if let Some(p) = options.por {
            self.por = p;
        }
        if let Some(g) = options.guided_walks {
            self.guided_walks = g;
        }
        if let Some(c) = options.transition_cache {
            self.transition_cache = c;
            self.visited_flags.push("--no-transition-cache");
        }
        if let Some(w) = options.width {
            self.width = w;
            self.visited_flags.push("--fingerprint-bits");
        }
        if let Some(m) = options.fingerprint {
            self.fingerprint = Some(m);
        }
        if let Some(d) = options.check_determinism {
            self.check_determinism = d;
        }
        if let Some(n) = options.determinism_runs {
            self.determinism_runs = n.max(2);
        }
        if let Some(k) = options.random_seeds {
            self = self.random_seeds(k);
        }
        if let Some(m) = options.max_memory {
            self.bounds.max_memory = Some(m);
        }
        if let Some(yes) = options.symmetry {
            self.reduce = yes;
        }
        if let Some(c) = options.check_symmetry {
            self.check_symmetry = c;
        }
        if let Some(c) = options.cluster {
            self.cluster = c;
        }
        if let Some(n) = options.frontier_in_memory {
            self = self.frontier_in_memory(n);
        }
        if let Some(t) = options.transition_timeout {
            self.transition_timeout = (!t.is_zero()).then_some(t);
        }
        self
    }
}

/// A registered invariant's check with its world type erased.
pub(crate) type ErasedCheck = unsafe fn(*const ()) -> Check;

/// A global invariant registered with `#[cmc::invariant]`: it applies to
/// every model whose process type is the one its `World` is over.
#[derive(Debug)]
pub struct InvariantEntry {
    /// Its name in reports (the function's name).
    pub name: &'static str,
    process: fn() -> TypeId,
    check: unsafe fn(*const ()) -> Check,
    /// `None`: an invariant (`#[cmc::invariant]`); otherwise a
    /// `#[cmc::sometimes]` or `#[cmc::eventually]` property.
    kind: Option<PropertyKind>,
}

impl InvariantEntry {
    /// Used by `#[cmc::invariant]`.
    ///
    /// `check` must be a function that reads its argument as a
    /// `&World<'_, P>` where `process()` is `TypeId::of::<P>()`.
    #[doc(hidden)]
    pub const fn new(
        name: &'static str,
        process: fn() -> TypeId,
        check: unsafe fn(*const ()) -> Check,
    ) -> Self {
        InvariantEntry {
            name,
            process,
            check,
            kind: None,
        }
    }

    /// Used by `#[cmc::sometimes]` and `#[cmc::eventually]`, as
    /// [`InvariantEntry::new`]; `check` says whether the property holds.
    #[doc(hidden)]
    pub const fn property(
        name: &'static str,
        process: fn() -> TypeId,
        check: unsafe fn(*const ()) -> Check,
        kind: PropertyKind,
    ) -> Self {
        InvariantEntry {
            name,
            process,
            check,
            kind: Some(kind),
        }
    }
}

inventory::collect!(InvariantEntry);

/// The registered global invariants of the process type `want`, as
/// (name, check).
pub(crate) fn invariants_of(want: TypeId) -> Vec<(&'static str, ErasedCheck)> {
    let mut all: Vec<_> = inventory::iter::<InvariantEntry>
        .into_iter()
        .filter(|e| (e.process)() == want && e.kind.is_none())
        .map(|e| (e.name, e.check))
        .collect();
    all.sort_by_key(|&(name, _)| name);
    all
}

/// The registered `sometimes` and `eventually` properties of the process
/// type `want`, as (name, kind, check), by name.
pub(crate) fn properties_of(want: TypeId) -> Vec<(&'static str, PropertyKind, ErasedCheck)> {
    let mut all: Vec<_> = inventory::iter::<InvariantEntry>
        .into_iter()
        .filter(|e| (e.process)() == want)
        .filter_map(|e| e.kind.map(|k| (e.name, k, e.check)))
        .collect();
    all.sort_by_key(|&(name, _, _)| name);
    all
}

/// Runs a registered invariant on a world.
pub(crate) fn run_erased<P: Process>(
    check: unsafe fn(*const ()) -> Check,
    world: &World<'_, P>,
) -> Check {
    // SAFETY: `invariants_of` returned `check` only for entries whose
    // process type is `P`, and the macro generates a `check` that reads its
    // argument as `&World<'_, P>`.
    unsafe { check(world as *const World<'_, P> as *const ()) }
}
