//! Models and global invariants registered by the attribute macros, found
//! at run time with `inventory` (no list to keep), and the options a harness
//! such as `cargo cmc` applies to a registered model.

use crate::driver::trace_replay::ReplayOutcome;
use crate::engine::trace::{CheckResult, Trace};
use crate::engine::CheckError;
use crate::model::{Model, Process};

pub use crate::model::registered::{InvariantEntry, RunOptions};

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

/// What a test emitted by `cargo cmc check --emit-test` runs: replays the
/// counterexample `trace` (its JSON) on the registered model `model`, its
/// handlers each in a child process, and panics while the counterexample
/// still reproduces, when it now ends in another violation, and when the
/// program changed so that the trace no longer fits it (the test could not
/// tell whether the bug is gone); it returns once the trace's last state
/// violates nothing. A trace this cmc cannot replay faithfully (recorded
/// by an older one) fails too, saying to emit the test again. The verdicts
/// live here rather than in the emitted file, so that a test keeps the
/// judgement of the cmc it is built with.
#[track_caller]
pub fn regression_test(model: &str, trace: &str) {
    let trace = match Trace::from_json(trace) {
        Ok(trace) => trace,
        Err(e) => panic!("the emitted counterexample cannot be replayed: {e}"),
    };
    assert!(
        trace.model == model,
        "the emitted test names model `{model}` but its trace is of `{}`: emit it again",
        trace.model
    );
    let Some(entry) = models().into_iter().find(|m| m.path == model) else {
        let all: Vec<&str> = models().iter().map(|m| m.path).collect();
        panic!(
            "model `{model}` is not registered (the registered models: {}): if it was \
             renamed, emit the test again; if it was removed, delete the test",
            all.join(", ")
        )
    };
    let recorded = trace
        .violation
        .clone()
        .unwrap_or_else(|| panic!("the emitted trace records no violation: emit it again"));
    let options = RunOptions {
        isolate: true,
        ..RunOptions::default()
    };
    match entry.replay(&options, &trace) {
        Ok(ReplayOutcome::Reproduced(v))
            if v.kind == recorded.kind && v.property == recorded.property =>
        {
            panic!("the counterexample still reproduces: {v}")
        }
        Ok(ReplayOutcome::Reproduced(v)) => {
            panic!("the counterexample now ends in another violation: {v} (recorded: {recorded})")
        }
        Ok(ReplayOutcome::NoViolation) => {
            eprintln!("the counterexample no longer reproduces: its last state violates nothing")
        }
        Ok(other) => panic!(
            "the counterexample no longer fits the program ({other:?}), so this test cannot \
             tell whether the bug is gone: run `cargo cmc check --emit-test` again to \
             regenerate it, or delete it if the change fixed the bug"
        ),
        Err(e) => panic!("the emitted counterexample cannot be replayed: {e}"),
    }
}

/// Every registered model, sorted by path.
pub fn models() -> Vec<&'static ModelEntry> {
    let mut all: Vec<&'static ModelEntry> = inventory::iter::<ModelEntry>.into_iter().collect();
    all.sort_by_key(|m| m.path);
    all
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
            // The probe's report is not generic: one copy for every model.
            probe_build(path, &|| {
                let _ = crate::model::ctx::user_code(false, &build);
            })?;
        }
        crate::model::ctx::user_code(false, build).map_err(|(message, location)| {
            CheckError::Model(format!(
                "building `{path}` failed: {message} (at {location})"
            ))
        })
    }

    /// Runs `run` (a model's builder) once in a child process: a crash, an
    /// exit or a hang there is an error naming the model at `path`.
    fn probe_build(path: &'static str, run: &dyn Fn()) -> Result<(), CheckError> {
        let watch = crate::engine::isolate::Watch {
            transition_timeout: Some(crate::model::DEFAULT_TRANSITION_TIMEOUT),
            deadline: None,
        };
        let probe = crate::engine::isolate::run_in_child(watch, || {
            crate::engine::isolate::phase(crate::engine::isolate::IN_BUILD, 0, 0, 0, 0);
            run();
            crate::engine::isolate::phase(crate::engine::isolate::IN_CHECKER, 0, 0, 0, 0);
            "built".to_string()
        })?;
        if let crate::engine::isolate::ChildEnd::Ended(ended) = probe {
            let how = match ended.how {
                crate::engine::isolate::How::Signal(s) => {
                    format!(
                        "crashed: killed by {}",
                        crate::engine::isolate::signal_name(s)
                    )
                }
                crate::engine::isolate::How::Exit(status) => {
                    format!("ended the process with exit status {status}")
                }
                crate::engine::isolate::How::Hung(limit) => {
                    format!("did not return within {} s", limit.as_secs_f64())
                }
                crate::engine::isolate::How::Deadline => "did not return".to_string(),
                crate::engine::isolate::How::Interrupted(s, _) => {
                    format!(
                        "was interrupted by {}",
                        crate::engine::isolate::signal_name(s)
                    )
                }
                // One child: no other worker to end before it.
                crate::engine::isolate::How::Abandoned => "was stopped".to_string(),
            };
            let tail = ended.stderr.trim();
            return Err(CheckError::Model(if tail.is_empty() {
                format!("building `{path}` {how}")
            } else {
                format!("building `{path}` {how} ({tail})")
            }));
        }
        Ok(())
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
