//! Replaying a trace: running its steps again from the initial state,
//! checking each against its recorded fingerprint, and reporting whether the
//! final state still has the violation (in process, or in a child process
//! so that a crash reproduces as one).

use crate::engine::erased::Erased as P;
use crate::engine::isolate::{self, ChildEnd};
use crate::engine::trace::{Trace, ViolationKind, ViolationRecord};
use crate::engine::{
    blame, divergence_detail, ending, hex, no_culprit, CheckError, Engine, Event, Names, RawStep,
    SetupFailure, ENV, ENV_EVENTS,
};
use crate::model::{FingerprintMode, Model};

/// What replaying a trace showed.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum ReplayOutcome {
    /// Every step matched its fingerprint and the final state has this
    /// violation.
    Reproduced(ViolationRecord),
    /// Every step matched, but the final state violates nothing.
    NoViolation,
    /// The replay stopped after this step, as asked; every step so far
    /// matched.
    Stopped {
        /// The last step run, from 1.
        step: usize,
    },
    /// Step `step` (1-based) produced a different state than recorded, or
    /// was not enabled: the model changed since the trace was recorded
    /// (`changed` says how, when the model itself can tell), or hidden
    /// nondeterminism in `handler`.
    Diverged {
        /// The step number, from 1 (0: the initial state).
        step: usize,
        /// The handler that ran at that step.
        handler: String,
        /// What differed.
        message: String,
        /// Where the state differs from the recorded one, as far as the
        /// trace's recorded `Debug` tells: the acting process's fields, or
        /// the messages it sent.
        #[serde(default)]
        detail: Option<String>,
        /// How the model changed since the trace was recorded (its shape,
        /// its types' sources of identity), when it did.
        #[serde(default)]
        changed: Option<String>,
    },
    /// The trace does not fit the model: a step names a handler or a
    /// process the model does not have, or a recorded choice is out of its
    /// range now.
    Misfit {
        /// The step number, from 1.
        step: usize,
        /// What does not fit.
        message: String,
        /// How the model changed since the trace was recorded, when it can
        /// tell.
        #[serde(default)]
        changed: Option<String>,
    },
}

/// How the model differs from the one `trace` was recorded on, as far as
/// the trace's recorded shape and sources of identity tell; `None` when
/// they are the same (or not recorded).
fn model_change(e: &Engine<'_, P>, trace: &Trace) -> Option<String> {
    let mut changes = Vec::new();
    let hashed = trace.hashed_with();
    if hashed != crate::sys::hash::STATE_HASH {
        changes.push(format!(
            "the trace was recorded by a cmc that hashed states with {hashed}, and this one \
             hashes them with {}, so no recorded fingerprint can match: record the trace again",
            crate::sys::hash::STATE_HASH
        ));
    }
    if !trace.handlers.is_empty() && trace.handlers != e.shape() {
        changes.push(
            "the model's shape changed since the trace was recorded (its number of \
             processes, its types, its handlers or its invariants)"
                .to_string(),
        );
    }
    for was in &trace.sources {
        let now = e.sources().iter().find(|s| s.role == was.role);
        match now {
            Some(now) if now.type_name != was.type_name => changes.push(format!(
                "the {} type is `{}`, the trace recorded `{}`",
                was.role, now.type_name, was.type_name
            )),
            Some(now) if now.source != was.source => changes.push(format!(
                "the {} type `{}` is identified by its {} now, by its {} when the trace \
                 was recorded{}",
                was.role,
                was.type_name,
                now.source.name(),
                was.source.name(),
                if was.source == FingerprintMode::Typed {
                    " (the typed identity reads the executable's debugging information: \
                     build with `debug = 2`, as `cargo cmc` does)"
                } else {
                    ""
                }
            )),
            _ => {}
        }
    }
    (!changes.is_empty()).then(|| changes.join("; "))
}

/// Replays a trace on a fresh copy of the model.
pub(crate) fn replay(model: &Model<P>, trace: &Trace) -> Result<ReplayOutcome, CheckError> {
    if trace.model != model.name {
        return Err(CheckError::Trace(format!(
            "it is a trace of `{}`, not of `{}`",
            trace.model, model.name
        )));
    }
    // The identity the search used: the mode it forced, if any.
    let mode = trace.fingerprint.or(model.fingerprint);
    let mut e = match Engine::new(model, mode) {
        Ok(e) => e,
        Err(SetupFailure::Error(err)) => return Err(err),
        Err(SetupFailure::Violation(record)) => return Ok(ReplayOutcome::Reproduced(record)),
    };
    e.set_symmetric(trace.symmetric)?;
    let mut fp = e.fresh_fingerprinter();
    let initial = match e.trace_fingerprint(&mut fp, e.initial()) {
        Ok(f) => hex(f),
        Err(record) => return Ok(ReplayOutcome::Reproduced(record)),
    };
    let changed = model_change(&e, trace);
    if !trace.initial_fingerprint.is_empty() && initial != trace.initial_fingerprint {
        return Ok(ReplayOutcome::Diverged {
            step: 0,
            handler: "initialisation".into(),
            message: format!(
                "the initial state's fingerprint is {initial}, the trace recorded {}",
                trace.initial_fingerprint
            ),
            detail: None,
            changed,
        });
    }
    // A liveness counterexample: the property it names must not hold in
    // any state of the trace (checked as the steps run), and the trace
    // must end where its cycle starts, or in a state without successor.
    let liveness = match &trace.violation {
        Some(v) if v.kind == ViolationKind::NeverReached => {
            return Err(CheckError::Trace(format!(
                "`{}` was never reached: that is a finding about every state, with no trace                  to replay; check the model again",
                v.property
            )))
        }
        Some(v) if v.kind == ViolationKind::Liveness => {
            match e.properties().iter().position(|p| p.name == v.property) {
                Some(k) => Some((k, v.clone())),
                None => {
                    return Ok(ReplayOutcome::Misfit {
                        step: 0,
                        message: format!("the model has no property `{}`", v.property),
                        changed,
                    })
                }
            }
        }
        _ => None,
    };
    let holds = |e: &Engine<'_, P>, k: usize| e.property_holds(k).unwrap_or(true);
    if let Some((k, _)) = &liveness {
        if holds(&e, *k) {
            return Ok(ReplayOutcome::NoViolation);
        }
    }
    let mut prints = vec![initial.clone()];
    let count = e.process_count();
    // The state each step starts from (see `Engine::build_trace`).
    let mut pre = e.initial();
    // A long trace's prefix: its events run as recorded, without
    // fingerprints to compare (it has none) and without being shown.
    let base = trace.skipped();
    let mut k = 0usize;
    for run in &trace.prefix {
        let misfit = |message: String| {
            Ok(ReplayOutcome::Misfit {
                step: k + 1,
                message,
                changed: changed.clone(),
            })
        };
        let actor = match run.process {
            Some(p) if p < count => p,
            Some(p) => {
                return misfit(format!(
                    "step {} names process {p}; the model has {count} (0 to {})",
                    k + 1,
                    count.saturating_sub(1)
                ))
            }
            None => ENV,
        };
        let handlers = if actor == ENV {
            ENV_EVENTS.len()
        } else {
            e.handlers().len()
        };
        if run.handler >= handlers {
            return misfit(format!(
                "step {} runs handler {} of {}, which has {handlers}",
                k + 1,
                run.handler,
                e.actor_name(actor)
            ));
        }
        let event = Event {
            actor,
            handler: run.handler,
        };
        let name = e.handler_name(event).to_string();
        for _ in 0..run.times {
            k += 1;
            let enabled = match e.enabled() {
                Ok(events) => events,
                Err(record) => return Ok(ReplayOutcome::Reproduced(record)),
            };
            if !enabled.contains(&event) {
                return Ok(ReplayOutcome::Diverged {
                    step: k,
                    handler: name.clone(),
                    message: format!(
                        "{name} of {} is not enabled at step {k}",
                        e.actor_name(actor)
                    ),
                    detail: None,
                    changed,
                });
            }
            isolate::record(|| vec![isolate::REPLAYING, k as u64]);
            let outcome = e.run(event, run.choices.clone(), run.seed, false, pre);
            if let Some(m) = outcome.global_error.clone() {
                return Err(CheckError::Model(m));
            }
            if let Some(m) = outcome.misfit.clone() {
                return Ok(ReplayOutcome::Misfit {
                    step: k,
                    message: format!("{name} of {} at step {k}: {m}", e.actor_name(actor)),
                    changed,
                });
            }
            let failed = outcome.cut_short()
                || outcome.model_error.is_some()
                || e.take_exhaustion().is_some();
            if failed {
                // The trace's violation is at its end: failing before the
                // described steps, the program no longer behaves as
                // recorded.
                return Ok(ReplayOutcome::Diverged {
                    step: k,
                    handler: name.clone(),
                    message: format!(
                        "{name} of {} failed at step {k} of {}, before the step the trace \
                         fails at",
                        e.actor_name(actor),
                        trace.len()
                    ),
                    detail: None,
                    changed,
                });
            }
            let s = e.capture();
            if liveness.is_some() {
                // A lasso's cycle may start in the prefix.
                match e.trace_fingerprint(&mut fp, s) {
                    Ok(f) => prints.push(hex(f)),
                    Err(record) => return Ok(ReplayOutcome::Reproduced(record)),
                }
            }
            if pre != e.initial() {
                e.release(pre);
            }
            pre = s;
            if crate::search::progress::replay_stop() == Some(k) {
                return Ok(ReplayOutcome::Stopped { step: k });
            }
        }
    }
    if liveness.is_none() {
        prints.clear();
    }
    for (k, step) in trace.steps.iter().enumerate() {
        // Steps are numbered from the prefix's end.
        let k = base + k;
        let misfit = |message: String| {
            Ok(ReplayOutcome::Misfit {
                step: k + 1,
                message,
                changed: changed.clone(),
            })
        };
        let actor = match step.process {
            Some(p) if p < count => p,
            Some(p) => {
                return misfit(format!(
                    "step {} names process {p}; the model has {count} (0 to {})",
                    k + 1,
                    count.saturating_sub(1)
                ))
            }
            None => ENV,
        };
        let handler = if actor == ENV {
            ENV_EVENTS.iter().position(|&n| n == step.handler)
        } else {
            e.handlers().iter().position(|h| h.name == step.handler)
        };
        let Some(handler) = handler else {
            let known: Vec<&str> = if actor == ENV {
                ENV_EVENTS.to_vec()
            } else {
                e.handlers().iter().map(|h| h.name).collect()
            };
            return misfit(format!(
                "step {} runs `{}`, which {} does not have (its handlers: {})",
                k + 1,
                step.handler,
                step.actor,
                known.join(", ")
            ));
        };
        let event = Event { actor, handler };
        let enabled = match e.enabled() {
            Ok(events) => events,
            Err(record) => return Ok(ReplayOutcome::Reproduced(record)),
        };
        if !enabled.contains(&event) {
            return Ok(ReplayOutcome::Diverged {
                step: k + 1,
                handler: step.handler.clone(),
                message: format!(
                    "{} of {} is not enabled at this step",
                    step.handler, step.actor
                ),
                detail: None,
                changed,
            });
        }
        isolate::record(|| vec![isolate::REPLAYING, (k + 1) as u64]);
        let stepping = crate::search::progress::stepping();
        let before = if stepping { e.show(actor) } else { None };
        let outcome = if stepping {
            e.run_described(event, step.choices.clone(), step.seed, pre)
        } else {
            e.run(event, step.choices.clone(), step.seed, false, pre)
        };
        if let Some(m) = outcome.global_error.clone() {
            return Err(CheckError::Model(m));
        }
        let name = e.handler_name(event).to_string();
        if let Some(m) = outcome.misfit.clone() {
            return misfit(format!("{name} of {} at step {}: {m}", step.actor, k + 1));
        }
        let failure = if let Some(m) = outcome.thread_error.clone() {
            Some(ViolationRecord {
                kind: ViolationKind::ModelError,
                property: name.clone(),
                message: m,
                location: None,
            })
        } else if let Some((message, location)) = outcome.panic.clone() {
            Some(ViolationRecord {
                kind: ViolationKind::Panic,
                property: name.clone(),
                message: format!("{}: {message}", e.actor_name(actor)),
                location: Some(location),
            })
        } else if let Some(x) = e.take_exhaustion() {
            Some(ViolationRecord {
                kind: ViolationKind::ArenaExhausted,
                property: name.clone(),
                message: x.to_string(),
                location: None,
            })
        } else {
            outcome.model_error.clone().map(|m| ViolationRecord {
                kind: ViolationKind::ModelError,
                property: name.clone(),
                message: m,
                location: None,
            })
        };
        let (print, failure) = if failure.is_none() {
            let s = e.capture();
            let print = e.trace_fingerprint(&mut fp, s);
            if pre != e.initial() {
                e.release(pre);
            }
            pre = s;
            match print {
                Ok(f) => (hex(f), None),
                Err(record) => (String::new(), Some(record)),
            }
        } else {
            (String::new(), failure)
        };
        let after = if failure.is_none() && (stepping || step.after.is_some()) {
            e.show(actor)
        } else {
            None
        };
        let sent_now: Option<Vec<(usize, String)>> = stepping.then(|| {
            outcome
                .sent
                .iter()
                .map(|(to, m, _)| (*to, m.clone()))
                .collect()
        });
        if stepping {
            let described = e.describe_step(
                &RawStep {
                    event,
                    choices: step.choices.clone(),
                    seed: step.seed,
                },
                outcome,
                print.clone(),
                before,
                after.clone(),
            );
            crate::search::progress::step(k + 1, &described);
        }
        if let Some(record) = failure {
            return Ok(ReplayOutcome::Reproduced(record));
        }
        // The last step's state may differ from the recorded one: what
        // matters there is whether it still has the violation (a fix in
        // the last handler changes it, and the verdict is then "no
        // violation", not "diverged").
        // (A trace of nondeterminism is the exception: its last step's
        // difference is the violation.)
        let last = k + 1 == trace.len()
            && trace
                .violation
                .as_ref()
                .is_none_or(|v| v.kind != ViolationKind::Nondeterminism);
        if !last && !step.fingerprint.is_empty() && print != step.fingerprint {
            let detail = divergence_detail(step, after.as_deref(), sent_now.as_deref());
            return Ok(ReplayOutcome::Diverged {
                step: k + 1,
                handler: name.clone(),
                message: format!(
                    "{name} of {} at step {} reached a state whose fingerprint is {print}; the trace recorded {}",
                    step.actor,
                    k + 1,
                    step.fingerprint
                ),
                detail,
                changed,
            });
        }
        if crate::search::progress::replay_stop() == Some(k + 1) {
            return Ok(ReplayOutcome::Stopped { step: k + 1 });
        }
        if let Some((p, _)) = &liveness {
            if holds(&e, *p) {
                return Ok(ReplayOutcome::NoViolation);
            }
        }
        if liveness.is_some() {
            prints.push(print);
        }
    }
    if let Some((_, record)) = liveness {
        let ends = match trace.loop_start {
            Some(l) => l < prints.len() && prints.last() == prints.get(l),
            None => e.enabled().is_ok_and(|events| events.is_empty()),
        };
        return Ok(if ends {
            ReplayOutcome::Reproduced(record)
        } else {
            ReplayOutcome::NoViolation
        });
    }
    if trace
        .violation
        .as_ref()
        .is_some_and(|v| v.kind == ViolationKind::Asymmetry)
    {
        return twins_again(&mut e, trace, pre);
    }
    if let Some(record) = e.check_state() {
        return Ok(ReplayOutcome::Reproduced(record));
    }
    match e.enabled() {
        Err(record) => Ok(ReplayOutcome::Reproduced(record)),
        Ok(events) if events.is_empty() && !model.quiescence_ok => {
            Ok(ReplayOutcome::Reproduced(ViolationRecord {
                kind: ViolationKind::Deadlock,
                property: "deadlock".into(),
                message: "no handler is enabled in any process".into(),
                location: None,
            }))
        }
        Ok(_) => Ok(ReplayOutcome::NoViolation),
    }
}

/// The end of the replay of a violation of the declared symmetry: the
/// trace's last state `s` (loaded) and the state its twin path leads to
/// are compared again (see `engine::twins`).
fn twins_again(
    e: &mut Engine<'_, P>,
    trace: &Trace,
    s: crate::memory::StateId,
) -> Result<ReplayOutcome, CheckError> {
    if !trace.symmetric || trace.twin.is_empty() {
        return Err(CheckError::Trace(
            "the trace records a violation of the declared symmetry without the path to the \
             state's image: record it again"
                .into(),
        ));
    }
    let canonical = |e: &mut Engine<'_, P>, state| -> Result<_, ViolationRecord> {
        e.load(state);
        let mut fp = e.fresh_fingerprinter();
        e.trace_fingerprint(&mut fp, state)?;
        Ok(fp
            .last
            .take()
            .expect("a symmetric fingerprinter keeps its image"))
    };
    let mine = match canonical(e, s) {
        Ok(c) => c,
        Err(record) => return Ok(ReplayOutcome::Reproduced(record)),
    };
    // The twin: its events run from the initial state.
    let mut t = e.initial();
    e.retain(t);
    for run in &trace.twin {
        let event = Event {
            actor: run.process.unwrap_or(ENV),
            handler: run.handler,
        };
        for _ in 0..run.times {
            e.load(t);
            let outcome = e.run(event, run.choices.clone(), run.seed, false, t);
            if outcome.cut_short() || outcome.misfit.is_some() || outcome.global_error.is_some() {
                e.release(t);
                return Ok(ReplayOutcome::NoViolation);
            }
            let next = e.capture();
            e.release(t);
            t = next;
        }
    }
    let theirs = match canonical(e, t) {
        Ok(c) => c,
        Err(record) => {
            e.release(t);
            return Ok(ReplayOutcome::Reproduced(record));
        }
    };
    if mine.sum != theirs.sum || mine.own == theirs.own {
        // No longer twins: the program changed.
        e.release(t);
        return Ok(ReplayOutcome::NoViolation);
    }
    let inverse = crate::engine::symmetry::inverse(&theirs.perm);
    let perm: Vec<usize> = mine.perm.iter().map(|&slot| inverse[slot]).collect();
    let node = e.node();
    let differ = e.twins_differ(s, node, t, node, &perm);
    e.release(t);
    Ok(match differ {
        Some(message) => ReplayOutcome::Reproduced(crate::engine::twins::asymmetry(message)),
        None => ReplayOutcome::NoViolation,
    })
}

/// [`replay`] in a child process: a crash, an exit or a hang at the
/// trace's last step (or in the final state's guards or invariants)
/// reproduces that violation; earlier, it is a divergence.
pub(crate) fn replay_isolated(
    model: &Model<P>,
    trace: &Trace,
) -> Result<ReplayOutcome, CheckError> {
    let watch = isolate::Watch {
        transition_timeout: model.transition_timeout,
        deadline: None,
    };
    let end = isolate::run_in_child(watch, || {
        let result = replay(model, trace).map_err(|e| e.to_string());
        serde_json::to_string(&result).expect("a replay outcome always serialises")
    })?;
    let ended = match end {
        ChildEnd::Finished(text) => {
            let result: Result<ReplayOutcome, String> =
                serde_json::from_str(&text).map_err(|e| {
                    CheckError::Isolation(format!("unreadable result from the child: {e}"))
                })?;
            return result.map_err(CheckError::Trace);
        }
        ChildEnd::Ended(ended) => ended,
    };
    let done = match ended.log.as_deref() {
        Some([isolate::REPLAYING, step]) => *step as usize,
        _ => 0,
    };
    let names_of = Names::of(model, trace.fingerprint.or(model.fingerprint));
    let base = trace.skipped();
    let step = done.checked_sub(1 + base).and_then(|k| trace.steps.get(k));
    // A step of the prefix is named from its run.
    let prefix_names = (done >= 1 && done <= base)
        .then(|| {
            let mut at = 0;
            trace.prefix.iter().find(|r| {
                at += r.times as usize;
                at >= done
            })
        })
        .flatten()
        .map(|r| {
            let event = Event {
                actor: r.process.unwrap_or(ENV),
                handler: r.handler,
            };
            (
                names_of.handler(event).to_string(),
                names_of.actor(event.actor),
            )
        });
    let names = match (&prefix_names, step) {
        (Some((h, a)), _) => Some((h.as_str(), a.as_str())),
        (None, Some(s)) => Some((s.handler.as_str(), s.actor.as_str())),
        (None, None) => None,
    };
    let outside = (ended.how == isolate::How::Signal(libc::SIGKILL)
        && ended.self_signal != Some(libc::SIGKILL))
        || ended.how == isolate::How::Exit(crate::sys::process::CHECKER_FAILED);
    let culprit = (!outside)
        .then(|| blame(&names_of, ended.phase, names))
        .flatten();
    let Some((property, who)) = culprit else {
        return Err(CheckError::Isolation(no_culprit(&ended)));
    };
    let (kind, message) = ending(ended.how, ended.self_signal, &who, &ended.stderr);
    let record = ViolationRecord {
        kind,
        property,
        message,
        location: None,
    };
    // Where the replay was: the constructors come before any step; a step's
    // handler ran at step `done`; guards and invariants after it.
    let at_end = match ended.phase.kind {
        isolate::IN_SETUP => trace.is_empty(),
        _ => done == trace.len(),
    };
    if at_end {
        Ok(ReplayOutcome::Reproduced(record))
    } else {
        Ok(ReplayOutcome::Diverged {
            step: done,
            handler: names.map_or_else(|| "initialisation".to_string(), |(h, _)| h.to_string()),
            message: format!(
                "at step {done} of {}: {} {}",
                trace.len(),
                record.kind,
                record.message
            ),
            detail: None,
            changed: None,
        })
    }
}
