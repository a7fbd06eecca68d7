//! Results of a check: violations with their traces, statistics, verdicts.
//! Traces are saved and loaded as versioned JSON.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The version of the trace format this cmc writes and reads.
pub const TRACE_VERSION: u32 = 1;

/// The version of a long trace, one with a [`Trace::prefix`]: an earlier
/// cmc, which would replay its described steps from the initial state,
/// refuses it. This cmc reads both versions, and writes a trace without
/// a prefix as version [`TRACE_VERSION`].
pub const LONG_TRACE_VERSION: u32 = 2;

/// How many of a trace's last steps are described (states, messages,
/// fingerprints); the steps before them are kept as events only, in
/// [`Trace::prefix`]. A crash 17 million steps deep made a described
/// trace of gigabytes, built for minutes; its last steps are what a
/// reader reads.
pub const DESCRIBED_STEPS: usize = 500;

/// Steps of a long trace's prefix (see [`Trace::prefix`]): one event run
/// `times` times in a row with the same choices and seed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathRun {
    /// The process that ran, or `None` for an environment event.
    pub process: Option<usize>,
    /// The handler's index in the process's handler table (or the
    /// environment event's index); the trace's `handlers` hash names the
    /// tables it indexes.
    pub handler: usize,
    /// The choice values, in the order they were made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<usize>,
    /// The random-seed variant (0 is not written).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub seed: u32,
    /// How many times in a row.
    pub times: u64,
}

/// What to do with a trace this cmc cannot replay faithfully: the end of
/// the message [`Trace::from_json`] refuses it with. Tests emitted by
/// earlier versions of `cargo cmc check --emit-test` read their trace with
/// `Trace::from_json(..).expect(..)`, so they fail with this message too
/// instead of passing without a word.
pub(crate) const STALE: &str = "Check the model again to record a new trace \
    (`cargo cmc check`); if this trace is in a regression test emitted by \
    `cargo cmc check --emit-test`, emit it again (the same command with \
    `--emit-test FILE`), or delete the test if the bug is fixed.";

/// What kind of property was violated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ViolationKind {
    /// A handler, guard or invariant panicked.
    Panic,
    /// A per-process or global invariant failed.
    Invariant,
    /// No handler was enabled anywhere.
    Deadlock,
    /// User code crashed the checker (segfault, abort, stack overflow) or
    /// ended its process (`std::process::exit`).
    Crash,
    /// User code did not return within the transition timeout.
    Timeout,
    /// A process's arena ran out of its reservation.
    ArenaExhausted,
    /// Objects unreachable from a process's root after a transition.
    Leak,
    /// The same transition from the same state gave different successors.
    Nondeterminism,
    /// The model broke a rule of the environment's (the network bound) or
    /// of cmc's (a thread of a handler still running when it returned).
    ModelError,
    /// A complete search never reached a state where a `sometimes`
    /// property holds.
    NeverReached,
    /// An execution never reaches a state where an `eventually` property
    /// holds: the trace ends in a cycle (from [`Trace::loop_start`]) or in
    /// a state without successor.
    Liveness,
    /// Processes declared interchangeable (`Model::interchangeable`) are
    /// not: a state and its image under a renaming of them behave
    /// differently, so the counts of the reduced search cannot be trusted.
    Asymmetry,
}

impl ViolationKind {
    /// The name used in reports and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ViolationKind::Panic => "panic",
            ViolationKind::Invariant => "invariant",
            ViolationKind::Deadlock => "deadlock",
            ViolationKind::Crash => "crash",
            ViolationKind::Timeout => "timeout",
            ViolationKind::ArenaExhausted => "arena_exhausted",
            ViolationKind::Leak => "leak",
            ViolationKind::Nondeterminism => "nondeterminism",
            ViolationKind::ModelError => "model_error",
            ViolationKind::NeverReached => "never_reached",
            ViolationKind::Liveness => "liveness",
            ViolationKind::Asymmetry => "asymmetry",
        }
    }
}

impl fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of event a step is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepKind {
    /// A process's handler.
    Handler,
    /// A process's timer expired (its timer handler ran).
    Timer,
    /// The network lost a message.
    Loss,
    /// The network duplicated a message.
    Duplication,
}

/// A message a step sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sent {
    /// The receiver.
    pub to: usize,
    /// The message's `Debug`.
    pub message: String,
    /// "sent", "failed" (a nondeterministic send failure) or "dropped:
    /// network full".
    pub fate: String,
}

/// One step of a trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// The process that ran, or `None` for an environment event.
    pub process: Option<usize>,
    /// The process's (or the environment's) name.
    pub actor: String,
    /// The handler (or environment event: "lose message", "duplicate message").
    pub handler: String,
    /// What kind of event this is.
    pub kind: StepKind,
    /// The choice values, in the order they were made.
    pub choices: Vec<usize>,
    /// The random-seed variant the step ran with (`--random-seeds`; 0, the
    /// default seed, is not written).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub seed: u32,
    /// The message this step delivered (or lost, or duplicated), as `Debug`.
    pub message: Option<String>,
    /// Its sender.
    pub from: Option<usize>,
    /// Its receiver.
    pub to: Option<usize>,
    /// The messages this step sent.
    #[serde(default)]
    pub sent: Vec<Sent>,
    /// The timers this step started or cancelled, in order ("sets timer
    /// `t`", "cancels timer `t`"; a timer already pending that it set
    /// again, or one not pending that it cancelled, is not listed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timers: Vec<String>,
    /// The fingerprint of the state after this step (hex).
    pub fingerprint: String,
    /// The acting process's state before the step (`Debug`), when shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// The acting process's state after the step (`Debug`), when shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// The property a trace violates.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViolationRecord {
    /// Its kind.
    pub kind: ViolationKind,
    /// The invariant's name, or the handler that panicked or crashed, or
    /// "deadlock".
    pub property: String,
    /// What went wrong.
    pub message: String,
    /// Where, for panics ("file:line:column").
    pub location: Option<String>,
}

impl ViolationRecord {
    /// What went wrong and where, before the message: `invariant
    /// violated: NAME`, `panic in HANDLER`, `deadlock`, … (the kind, and
    /// the property or the code it happened in).
    pub fn headline(&self) -> String {
        let p = &self.property;
        match self.kind {
            ViolationKind::Invariant | ViolationKind::Liveness => {
                format!("{} violated: {p}", self.kind)
            }
            ViolationKind::NeverReached => format!("never reached: {p}"),
            ViolationKind::Deadlock => "deadlock".to_string(),
            ViolationKind::Panic => format!("panic in {p}"),
            ViolationKind::Crash => format!("crash in {p}"),
            ViolationKind::Timeout => format!("timeout in {p}"),
            ViolationKind::ArenaExhausted => format!("arena exhausted in {p}"),
            ViolationKind::Leak => format!("leak in {p}"),
            ViolationKind::Nondeterminism => format!("nondeterminism in {p}"),
            ViolationKind::ModelError => format!("model error in {p}"),
            ViolationKind::Asymmetry => "the declared symmetry does not hold".to_string(),
        }
    }
}

impl fmt::Display for ViolationRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.headline(), self.message)?;
        if let Some(location) = &self.location {
            write!(f, " (at {location})")?;
        }
        Ok(())
    }
}

/// A sequence of steps from the initial state, with the violation it leads to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trace {
    /// The format version ([`TRACE_VERSION`]).
    pub version: u32,
    /// The function that hashed states into the recorded fingerprints
    /// ([`crate::STATE_HASH`]; empty in traces recorded before it was
    /// named, which hashed with SipHash-1-3). Replay says so when it is
    /// not this cmc's: every recorded fingerprint then differs.
    #[serde(default)]
    pub state_hash: String,
    /// The model's name.
    pub model: String,
    /// The fingerprint width, 64 or 128.
    pub fingerprint_bits: u32,
    /// The fingerprint mode the search forced on every type
    /// (`--fingerprint`, `Model::fingerprint`); absent when each type used
    /// its best source. Replay uses the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<crate::model::FingerprintMode>,
    /// The fingerprint of the initial state (hex).
    pub initial_fingerprint: String,
    /// The first steps of a long trace, as events only (no states, no
    /// fingerprints), in runs: empty unless the trace has more than
    /// [`DESCRIBED_STEPS`] steps. Replay runs them before `steps`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefix: Vec<PathRun>,
    /// The steps, described: after the prefix's (numbered from
    /// [`Trace::skipped`] + 1).
    pub steps: Vec<Step>,
    /// The violation at the end of the steps.
    pub violation: Option<ViolationRecord>,
    /// The other invariants the final state violates, by name (evaluated
    /// once the first violation is found; empty when the last step itself
    /// failed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_violated: Vec<String>,
    /// The source of identity each type of the model was fingerprinted
    /// from when the trace was recorded (process, shared variables,
    /// messages).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<crate::identity::TypeSource>,
    /// A hash of the model's shape when the trace was recorded: its
    /// process count, its types, its handler table (names and triggers)
    /// and its invariants' names (empty: not recorded). Replay compares it
    /// with the model's now to tell a changed model from hidden
    /// nondeterminism.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub handlers: String,
    /// How the checked program was built, when `cargo cmc` recorded it:
    /// `cargo cmc replay` rebuilds it the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildInfo>,
    /// For a lasso (a liveness counterexample that ends in a cycle): the
    /// number of steps before the cycle. The state after the last step is
    /// the state after the first `loop_start` steps, and the steps from
    /// there on repeat forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_start: Option<usize>,
    /// Whether the search reduced by the model's declared symmetry
    /// (`Model::interchangeable`): the recorded fingerprints are those of
    /// the states' smallest images, and replay computes them so.
    #[serde(default, skip_serializing_if = "is_false")]
    pub symmetric: bool,
    /// For a violation of the declared symmetry: the path, as events, to
    /// the image of the trace's last state that behaves differently.
    /// Replay runs it and compares the two states again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub twin: Vec<PathRun>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// How the program a trace comes from was built (recorded by `cargo cmc`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildInfo {
    /// The packages selected (`-p`), if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<String>,
    /// The features enabled (`--features`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
    /// `--all-features`.
    #[serde(default)]
    pub all_features: bool,
    /// `--no-default-features`.
    #[serde(default)]
    pub no_default_features: bool,
    /// The version of cmc that checked it.
    #[serde(default)]
    pub cmc_version: String,
    /// A hash of the project's source files when it was checked (empty:
    /// not recorded), so that a replay that diverges can tell a changed
    /// program from hidden nondeterminism.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sources: String,
    /// The cargo profile of the checking binary (`cargo cmc` always builds
    /// it as `release`, with debug assertions and overflow checks on).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub profile: String,
    /// The search's options as given on the command line (strategy,
    /// bounds, seed, fingerprint mode and width, …): with the model, they
    /// rerun the same search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<crate::model::registered::RunOptions>,
}

impl Trace {
    /// The trace as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a trace always serialises")
    }

    /// Writes the trace as JSON to `path`.
    pub fn save(&self, path: &std::path::Path) -> std::io::Result<()> {
        std::fs::write(path, self.to_json())
    }

    /// Reads a trace from a JSON file, checking its version.
    pub fn load(path: &std::path::Path) -> Result<Trace, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Trace::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Reads a trace, checking its version.
    pub fn from_json(text: &str) -> Result<Trace, String> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not a cmc trace: {e}"))?;
        match value.get("version").and_then(serde_json::Value::as_u64) {
            Some(v) if v == u64::from(TRACE_VERSION) || v == u64::from(LONG_TRACE_VERSION) => {}
            Some(v) if v > u64::from(LONG_TRACE_VERSION) => {
                return Err(format!(
                    "trace format version {v} is not supported (this cmc reads versions \
                     {TRACE_VERSION} and {LONG_TRACE_VERSION}): a newer cmc wrote it; replay it \
                     with that one"
                ))
            }
            Some(v) => {
                return Err(format!(
                    "trace format version {v} is not supported (this cmc reads versions \
                     {TRACE_VERSION} and {LONG_TRACE_VERSION}): an older cmc wrote it. {STALE}"
                ))
            }
            None => return Err("not a cmc trace: no \"version\" field".into()),
        }
        let trace: Trace =
            serde_json::from_value(value).map_err(|e| format!("not a cmc trace: {e}"))?;
        let hashed = trace.hashed_with();
        if hashed != crate::sys::hash::STATE_HASH {
            return Err(format!(
                "this trace was recorded by an older cmc, which hashed states with {hashed} \
                 (this one hashes them with {}), so none of its fingerprints can match and \
                 replaying it could not tell whether the bug is still there. {STALE}",
                crate::sys::hash::STATE_HASH
            ));
        }
        Ok(trace)
    }

    /// The number of steps in the prefix, which are not described.
    pub fn skipped(&self) -> usize {
        self.prefix.iter().map(|r| r.times as usize).sum()
    }

    /// The number of steps: the prefix's and the described ones.
    pub fn len(&self) -> usize {
        self.skipped() + self.steps.len()
    }

    /// Whether the trace has no step (a violation of the initial state).
    pub fn is_empty(&self) -> bool {
        self.prefix.is_empty() && self.steps.is_empty()
    }

    /// The name of the function that hashed the trace's fingerprints
    /// (traces recorded before it was named used SipHash-1-3).
    pub fn hashed_with(&self) -> &str {
        if self.state_hash.is_empty() {
            crate::sys::hash::OLD_STATE_HASH
        } else {
            &self.state_hash
        }
    }
}

impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.len();
        let s = if n == 1 { "" } else { "s" };
        writeln!(f, "trace of {} ({n} step{s}):", self.model)?;
        let skipped = self.skipped();
        if skipped > 0 {
            writeln!(
                f,
                "  … steps 1 to {skipped}: events only, in the trace file (the last {} are \
                 described)",
                self.steps.len()
            )?;
        }
        for (i, step) in self.steps.iter().enumerate() {
            let i = skipped + i;
            if self.loop_start == Some(i) {
                writeln!(
                    f,
                    "  ── the cycle: from here, these steps repeat forever ──"
                )?;
            }
            write!(f, "  {:>3}. {} {}", i + 1, step.actor, step.handler)?;
            if !step.choices.is_empty() {
                write!(f, " choices={:?}", step.choices)?;
            }
            if step.seed != 0 {
                write!(f, " seed={}", step.seed)?;
            }
            match (step.kind, &step.message, step.from, step.to) {
                (StepKind::Loss, Some(m), Some(from), Some(to)) => {
                    write!(f, " loses {m} ({from} → {to})")?
                }
                (StepKind::Duplication, Some(m), Some(from), Some(to)) => {
                    write!(f, " duplicates {m} ({from} → {to})")?
                }
                (_, Some(m), Some(from), _) => write!(f, " receives {m} from process {from}")?,
                _ => {}
            }
            if step.kind == StepKind::Timer {
                write!(f, " (timer expired)")?;
            }
            for s in &step.sent {
                write!(f, "\n         sends {} to process {}", s.message, s.to)?;
                if s.fate != "sent" {
                    write!(f, " ({})", s.fate)?;
                }
            }
            for t in &step.timers {
                write!(f, "\n         {t}")?;
            }
            writeln!(f)?;
            if let Some(before) = &step.before {
                writeln!(
                    f,
                    "       before: {}",
                    before.replace('\n', "\n               ")
                )?;
            }
            if let Some(after) = &step.after {
                writeln!(
                    f,
                    "       after:  {}",
                    after.replace('\n', "\n               ")
                )?;
            }
        }
        if let Some(l) = self.loop_start {
            writeln!(
                f,
                "  ── back to the state after step {l}: the cycle repeats ──"
            )?;
        }
        if let Some(v) = &self.violation {
            writeln!(f, "  {v}")?;
        }
        if !self.also_violated.is_empty() {
            writeln!(
                f,
                "  also violated in this state: {}",
                self.also_violated.join(", ")
            )?;
        }
        Ok(())
    }
}

/// A violation found by a check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// What was violated.
    pub record: ViolationRecord,
    /// How to get there.
    pub trace: Trace,
}

impl fmt::Display for Violation {
    /// The trace, which ends with the violated property.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.trace)
    }
}

/// How a check ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole bounded state space was explored without violation.
    Pass,
    /// A limit (depth, states, time) stopped the search first.
    Bounded,
    /// At least one violation was found.
    Violation,
    /// The search was stopped before it could finish (a signal, the
    /// operating system killing it); the statistics are those so far.
    Interrupted,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Pass => "pass",
            Verdict::Bounded => "bounded",
            Verdict::Violation => "violation",
            Verdict::Interrupted => "interrupted",
        })
    }
}

/// What a search did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Stats {
    /// Successor states generated (handler runs that produced a state).
    pub generated: u64,
    /// Distinct states stored (the initial state included, pruned states
    /// excluded).
    pub unique: u64,
    /// Transitions executed (every handler run, including those that
    /// panicked).
    pub transitions: u64,
    /// The deepest state stored.
    pub max_depth: usize,
    /// The largest frontier.
    pub peak_frontier: usize,
    /// States outside the model's value bounds (`prune`).
    pub pruned: u64,
    /// Distinct pages in the page store at the end.
    pub pages: usize,
    /// Bytes of page contents at the end.
    pub page_bytes: usize,
    /// Wall-clock time.
    pub elapsed: Duration,
    /// How states were fingerprinted (absent in results of older versions).
    #[serde(default)]
    pub fingerprint: Option<crate::model::FingerprintMode>,
    /// The most resident memory the process that searched ever held
    /// (`VmHWM`), in bytes; with several workers, the sum of each
    /// worker's largest proportional memory (PSS, which counts a page the
    /// workers share once in all, where their resident memory counts it
    /// once per worker) read at its memory checks; 0 where unknown.
    #[serde(default)]
    pub peak_memory_bytes: u64,
    /// Random walks started (`Strategy::Walk`; 0 for the other
    /// strategies). Under walks, `unique` is an estimate (a sketch of the
    /// fingerprints seen).
    #[serde(default)]
    pub walks: u64,
    /// Transitions a parallel search ran again to hand states from one
    /// worker to another (replaying their paths); not counted in
    /// `transitions`.
    #[serde(default)]
    pub replayed: u64,
    /// Worker processes that searched (0 or 1: the search ran alone).
    #[serde(default)]
    pub jobs: usize,
    /// Processes of a search across processes (0: not one).
    #[serde(default)]
    pub processes: usize,
    /// States a process of a search across processes sent to the others,
    /// and their bytes (pages or page deltas, with fingerprint, depth and
    /// step), summed over the processes.
    #[serde(default)]
    pub sent_states: u64,
    /// The bytes of those states (see `sent_states`), as they went:
    /// compressed.
    #[serde(default)]
    pub sent_bytes: u64,
    /// Their bytes before compression.
    #[serde(default)]
    pub sent_raw_bytes: u64,
    /// Whether the search covered every reachable state (no bound, no
    /// interruption, no violation that stopped it).
    #[serde(default)]
    pub complete: bool,
    /// Transitions run to check `eventually` properties after the search
    /// (not counted in `transitions`).
    #[serde(default)]
    pub liveness_transitions: u64,
    /// Under partial-order reduction (`Model::por`): events not run in a
    /// state because they were asleep there (each would have run all its
    /// transitions), and states put back on the frontier to run events
    /// that a later arrival woke.
    #[serde(default)]
    pub slept: u64,
    /// See `slept`.
    #[serde(default)]
    pub reexpanded: u64,
    /// Transitions (counted in `transitions`) that were not run because
    /// the transition cache knew their successor (see
    /// `Model::transition_cache`): an already visited one, or a new one it
    /// could build (counted in `derived` too).
    #[serde(default)]
    pub cached: u64,
    /// Of `cached`, the transitions whose successor was new and was built
    /// from the contents the cache kept.
    #[serde(default)]
    pub derived: u64,
    /// Under a depth bound (`max_depth`) in a depth-first, random or
    /// best-first order: states expanded again because a shorter path
    /// reached them after a longer one had (so that every state within
    /// the bound is reached, as breadth-first search reaches it).
    #[serde(default)]
    pub revisited: u64,
    /// Where the search's memory went, at the reading of its largest
    /// resident memory (see [`MemoryUse`]).
    #[serde(default)]
    pub memory: MemoryUse,
    /// Symmetry reduction, when the model declares interchangeable
    /// processes and the search used them.
    #[serde(default)]
    pub symmetry: Option<SymmetryStats>,
}

/// What symmetry reduction did (see `Model::interchangeable`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SymmetryStats {
    /// The processes declared interchangeable (in all groups).
    pub processes: usize,
    /// Successors merged with a different state of their orbit that the
    /// search had stored (each such merge saves a state).
    pub merged: u64,
    /// Of those, the pairs whose behaviour was compared (the check of the
    /// declared symmetry; see `Model::check_symmetry`).
    pub checked: u64,
    /// States whose smallest image was not computed exactly (too many
    /// processes tied; their fingerprint is that of some image): an orbit
    /// may be counted more than once.
    pub inexact: u64,
}

/// The checker's memory by owner, in bytes, at one reading of the
/// resident memory of the process that searched: what each structure
/// holds, counted from its sizes (the allocator's rounding left out), and
/// the rest. A parallel search's figures are its workers' sums.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MemoryUse {
    /// The resident memory at the reading (`VmRSS`).
    pub resident: u64,
    /// Unique states stored at the reading.
    pub states: u64,
    /// The visited set (fingerprints).
    pub visited: u64,
    /// The frontier's entries (the states to expand, as references).
    pub frontier: u64,
    /// The records states are built from: one per state, one per arena
    /// that changed, and the lists of page ids.
    pub records: u64,
    /// The contents of the stored pages.
    pub pages: u64,
    /// The page store's own structures (slots, index, spare buffers).
    pub page_index: u64,
    /// The search tree (parents and steps, for traces).
    pub tree: u64,
    /// Caches (the transition cache, guard results, sleep sets, depths).
    pub caches: u64,
    /// Bytes of the frontier on disk at the reading (not resident).
    #[serde(default)]
    pub disk: u64,
    /// The most bytes the frontier ever had on disk, and the entries it
    /// wrote there in all (by the end of the search).
    #[serde(default)]
    pub disk_peak: u64,
    /// See `disk_peak`.
    #[serde(default)]
    pub disk_entries: u64,
}

impl MemoryUse {
    /// Everything but the resident figure, summed: what the checker's
    /// structures hold.
    pub fn counted(&self) -> u64 {
        self.visited
            + self.frontier
            + self.records
            + self.pages
            + self.page_index
            + self.tree
            + self.caches
    }

    /// Resident bytes no structure accounts for (code, libraries, the
    /// allocator's slack, the arenas themselves).
    pub fn other(&self) -> u64 {
        self.resident.saturating_sub(self.counted())
    }

    /// Sums two workers' figures.
    pub fn add(&mut self, o: &MemoryUse) {
        self.resident += o.resident;
        self.states += o.states;
        self.visited += o.visited;
        self.frontier += o.frontier;
        self.records += o.records;
        self.pages += o.pages;
        self.page_index += o.page_index;
        self.tree += o.tree;
        self.caches += o.caches;
        self.disk += o.disk;
        self.disk_peak += o.disk_peak;
        self.disk_entries += o.disk_entries;
    }
}

/// How often a handler was enabled (see [`CheckResult::handlers`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandlerUse {
    /// The handler's name.
    pub name: String,
    /// The states it was enabled in.
    pub enabled: u64,
}

impl Stats {
    /// Unique states per second.
    pub fn states_per_second(&self) -> f64 {
        self.unique as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// A `sometimes` property and a trace to a state where it holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reached {
    /// The property's name.
    pub property: String,
    /// The steps to the state (its record's kind is `never_reached`'s
    /// opposite: the trace's `violation` is `None`).
    pub trace: Trace,
}

/// The result of checking a model.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckResult {
    /// The model's name.
    pub model: String,
    /// How it ended.
    pub verdict: Verdict,
    /// The violations found (at most one unless keep-going).
    pub violations: Vec<Violation>,
    /// The `sometimes` properties the search reached, each with a trace
    /// to the first state where it held.
    #[serde(default)]
    pub reached: Vec<Reached>,
    /// Statistics.
    pub stats: Stats,
    /// The source of identity each type of the model was fingerprinted
    /// from (process, shared variables, messages).
    #[serde(default)]
    pub sources: Vec<crate::identity::TypeSource>,
    /// Why the search stopped before it finished, when it did (a bound, a
    /// signal, the operating system).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// Each handler of the process type, in table order, with the number
    /// of states the search found it enabled in (summed over workers; a
    /// state expanded twice counts twice). A handler at 0 was never
    /// enabled: its guard never held, its timer was never set, or no
    /// process has it. Empty when the search ended in a crash.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub handlers: Vec<HandlerUse>,
}

impl CheckResult {
    /// The one-line summary `cmc: <model> <verdict> unique=… transitions=… depth=… time=…s`.
    pub fn summary(&self) -> String {
        let walks = if self.stats.walks > 0 {
            // Under random walks `unique` is a sketch's estimate.
            format!(" walks={} (unique estimated)", self.stats.walks)
        } else {
            String::new()
        };
        let walks = match self.stats.symmetry {
            Some(_) => format!("{walks} (one state per orbit)"),
            None => walks,
        };
        // A swarm of walks across processes sends no states.
        let walks = match (self.stats.processes, self.stats.walks) {
            (0, _) => walks,
            (p, 0) => format!(
                "{walks} processes={p} sent/state={:.0}B",
                self.stats.sent_bytes as f64 / self.stats.unique.max(1) as f64
            ),
            (p, _) => format!("{walks} processes={p}"),
        };
        format!(
            "cmc: {} {} unique={} transitions={} depth={} time={:.2}s{walks}",
            self.model,
            self.verdict,
            self.stats.unique,
            self.stats.transitions,
            self.stats.max_depth,
            self.stats.elapsed.as_secs_f64()
        )
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
