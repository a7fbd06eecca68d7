//! Models and global invariants registered by the attribute macros, found
//! at run time with `inventory` (no list to keep), and the options a harness
//! such as `cargo cmc` applies to a registered model.

use std::any::TypeId;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::engine::CheckError;
use crate::memory::FingerprintWidth;
use crate::model::{Check, FingerprintMode, Model, Process, Strategy};
use crate::replay::ReplayOutcome;
use crate::trace::{CheckResult, Trace};
use crate::world::World;

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
    /// Runs of each transition, guard and invariant under the determinism
    /// check.
    #[serde(default)]
    pub determinism_runs: Option<usize>,
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
        if let Some(c) = options.transition_cache {
            self.transition_cache = c;
        }
        if let Some(w) = options.width {
            self.width = w;
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
        if let Some(t) = options.transition_timeout {
            self.transition_timeout = (!t.is_zero()).then_some(t);
        }
        self
    }
}

/// A model registered with `#[cmc::model]`.
#[derive(Debug)]
pub struct ModelEntry {
    /// Its full path, `crate::module::function`.
    pub path: &'static str,
    /// Where it is defined.
    pub file: &'static str,
    /// The line of the definition.
    pub line: u32,
    check: fn(&'static str, &RunOptions) -> Result<CheckResult, CheckError>,
    replay: fn(&'static str, &RunOptions, &Trace) -> Result<ReplayOutcome, CheckError>,
}

impl ModelEntry {
    /// Used by `#[cmc::model]`.
    #[doc(hidden)]
    pub const fn new(
        path: &'static str,
        file: &'static str,
        line: u32,
        check: fn(&'static str, &RunOptions) -> Result<CheckResult, CheckError>,
        replay: fn(&'static str, &RunOptions, &Trace) -> Result<ReplayOutcome, CheckError>,
    ) -> Self {
        ModelEntry {
            path,
            file,
            line,
            check,
            replay,
        }
    }

    /// Builds the model, applies `options` and checks it.
    pub fn check(&self, options: &RunOptions) -> Result<CheckResult, CheckError> {
        (self.check)(self.path, options)
    }

    /// Builds the model, applies `options` and replays `trace` on it.
    pub fn replay(&self, options: &RunOptions, trace: &Trace) -> Result<ReplayOutcome, CheckError> {
        (self.replay)(self.path, options, trace)
    }
}

inventory::collect!(ModelEntry);

/// Every registered model, sorted by path.
pub fn models() -> Vec<&'static ModelEntry> {
    let mut all: Vec<&'static ModelEntry> = inventory::iter::<ModelEntry>.into_iter().collect();
    all.sort_by_key(|m| m.path);
    all
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
    kind: Option<crate::model::PropertyKind>,
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
        kind: crate::model::PropertyKind,
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

/// The registered global invariants over `World<P>`, as (name, check).
pub(crate) fn invariants_for<P: Process>() -> Vec<(&'static str, ErasedCheck)> {
    let want = TypeId::of::<P>();
    let mut all: Vec<_> = inventory::iter::<InvariantEntry>
        .into_iter()
        .filter(|e| (e.process)() == want && e.kind.is_none())
        .map(|e| (e.name, e.check))
        .collect();
    all.sort_by_key(|&(name, _)| name);
    all
}

/// The registered `sometimes` and `eventually` properties over
/// `World<P>`, as (name, kind, check), by name.
pub(crate) fn properties_for<P: Process>(
) -> Vec<(&'static str, crate::model::PropertyKind, ErasedCheck)> {
    let want = TypeId::of::<P>();
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
    // SAFETY: `invariants_for::<P>` returned `check` only for entries whose
    // process type is `P`, and the macro generates a `check` that reads its
    // argument as `&World<'_, P>`.
    unsafe { check(world as *const World<'_, P> as *const ()) }
}

/// What generated code calls; not public API.
#[doc(hidden)]
pub mod private {
    use super::*;

    /// Builds a registered model; a panic in the model's function (bad
    /// bounds, say) becomes an error that names it, not a crash. When
    /// `isolated`, the function runs once in a child process first, so that
    /// a crash, an exit or a hang there is an error too, not the end of the
    /// harness (and of the other models' checks).
    fn build<P: Process>(
        path: &'static str,
        build: impl Fn() -> Model<P>,
        isolated: bool,
    ) -> Result<Model<P>, CheckError> {
        if isolated {
            let watch = crate::isolate::Watch {
                transition_timeout: Some(crate::model::DEFAULT_TRANSITION_TIMEOUT),
                deadline: None,
            };
            let probe = crate::isolate::run_in_child(watch, || {
                crate::isolate::phase(crate::isolate::IN_BUILD, 0, 0, 0, 0);
                let _ = crate::ctx::user_code(false, &build);
                crate::isolate::phase(crate::isolate::IN_CHECKER, 0, 0, 0, 0);
                "built".to_string()
            })?;
            if let crate::isolate::ChildEnd::Ended(ended) = probe {
                let how = match ended.how {
                    crate::isolate::How::Signal(s) => {
                        format!("crashed: killed by {}", crate::isolate::signal_name(s))
                    }
                    crate::isolate::How::Exit(status) => {
                        format!("ended the process with exit status {status}")
                    }
                    crate::isolate::How::Hung(limit) => {
                        format!("did not return within {} s", limit.as_secs_f64())
                    }
                    crate::isolate::How::Deadline => "did not return".to_string(),
                    crate::isolate::How::Interrupted(s) => {
                        format!("was interrupted by {}", crate::isolate::signal_name(s))
                    }
                };
                let tail = ended.stderr.trim();
                return Err(CheckError::Model(if tail.is_empty() {
                    format!("building `{path}` {how}")
                } else {
                    format!("building `{path}` {how} ({tail})")
                }));
            }
        }
        crate::ctx::user_code(false, build).map_err(|(message, location)| {
            CheckError::Model(format!(
                "building `{path}` failed: {message} (at {location})"
            ))
        })
    }

    /// Checks a registered model under its registered path.
    pub fn check_model<P: Process>(
        path: &'static str,
        model: impl Fn() -> Model<P>,
        options: &RunOptions,
    ) -> Result<CheckResult, CheckError> {
        let mut model = build(path, model, options.isolate)?.apply(options);
        model.name = path.to_string();
        if options.isolate {
            model.check_isolated()
        } else {
            model.check()
        }
    }

    /// Replays a trace on a registered model.
    pub fn replay_model<P: Process>(
        path: &'static str,
        model: impl Fn() -> Model<P>,
        options: &RunOptions,
        trace: &Trace,
    ) -> Result<ReplayOutcome, CheckError> {
        let mut model = build(path, model, options.isolate)?.apply(options);
        model.name = path.to_string();
        // A fingerprint mode given now overrides the trace's.
        let overridden;
        let trace = match options.fingerprint {
            Some(mode) if trace.fingerprint != Some(mode) => {
                overridden = Trace {
                    fingerprint: Some(mode),
                    ..trace.clone()
                };
                &overridden
            }
            _ => trace,
        };
        if options.isolate {
            model.replay_isolated(trace)
        } else {
            model.replay(trace)
        }
    }
}
