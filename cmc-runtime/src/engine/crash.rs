//! Crash attribution: what a child process that ended without a result
//! was doing (the phase in its crash log), which step it ran, and the
//! violation its end becomes.

use super::events::Event;
use super::events::RawStep;
use super::events::ENV;
use super::names::Names;
use crate::engine::erased::Erased as P;

use crate::engine::isolate::{self};
use crate::engine::trace::{ViolationKind, ViolationRecord};

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

/// The last lines of what the child printed, for a violation's message.
pub(crate) fn stderr_tail(stderr: &str) -> String {
    let said: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    // What cmc said of the end (two panics at once), then what std said of
    // an allocation it could not make, say more than anything after them.
    if let Some(line) = said.iter().rev().find_map(|l| {
        l.strip_prefix("cmc: ")
            .filter(|l| l.starts_with(crate::model::ctx::TWO_PANICS))
    }) {
        return line.to_string();
    }
    if let Some(line) = said
        .iter()
        .rev()
        .find(|l| l.starts_with("memory allocation of ") && l.ends_with(" failed"))
    {
        return line.to_string();
    }
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
pub(crate) fn ending(
    how: isolate::How,
    self_signal: Option<i32>,
    who: &str,
    stderr: &str,
) -> (ViolationKind, String) {
    let tail = stderr_tail(stderr);
    let said = if tail.is_empty() {
        String::new()
    } else {
        format!(" ({tail})")
    };
    match how {
        isolate::How::Signal(signal) if self_signal == Some(signal) => (
            ViolationKind::Crash,
            format!(
                "{who} crashed: killed by {}, which it sent its own process{said}",
                isolate::signal_name(signal)
            ),
        ),
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
        isolate::How::Interrupted(signal, true) => (
            ViolationKind::Timeout,
            format!(
                "{who} had been running for more than a second when {} asked the search to \
                 stop; it was stopped",
                isolate::signal_name(signal)
            ),
        ),
        // The code running when the child was killed had only just started:
        // the child was slow to stop, not that code.
        isolate::How::Interrupted(signal, false) => (
            ViolationKind::Timeout,
            format!(
                "the search had not stopped a second after {}, and was stopped (while {who} \
                 ran, which had just started)",
                isolate::signal_name(signal)
            ),
        ),
        // `culprit` blames nobody for it; named for completeness.
        isolate::How::Abandoned => (
            ViolationKind::Timeout,
            format!("the search was stopped after another worker ended (while {who} ran)"),
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
pub(crate) fn blame(
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

/// What a worker stopped after another ended is said to be: the
/// consequence of the other's end, which the merged result names instead.
pub(crate) const ABANDONED: &str =
    "was stopped after another worker of the search had ended without a result";

/// Why a child that ended without a result is nobody's fault in the user's
/// code (the operating system, or cmc itself).
pub(crate) fn no_culprit(ended: &isolate::Ended) -> String {
    let failure = ended
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix(crate::sys::process::CHECKER_FAILURE));
    match ended.how {
        isolate::How::Exit(crate::sys::process::CHECKER_FAILED) => format!(
            "cmc's own machinery failed, not user code: {}",
            failure.unwrap_or("(it did not say how)")
        ),
        isolate::How::Abandoned => format!("a worker {ABANDONED}"),
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
pub(crate) fn culprit(
    n: &Names<'_, P>,
    ended: &isolate::Ended,
) -> Result<(Vec<RawStep>, ViolationRecord), String> {
    let phase = ended.phase;
    // SIGKILL comes from outside (the out-of-memory killer, a user),
    // unless user code sent it to its own process; a checker that failed
    // says so and exits with a status of its own.
    if (ended.how == isolate::How::Signal(libc::SIGKILL)
        && ended.self_signal != Some(libc::SIGKILL))
        || ended.how == isolate::How::Exit(crate::sys::process::CHECKER_FAILED)
        || ended.how == isolate::How::Abandoned
    {
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
    let (kind, message) = ending(ended.how, ended.self_signal, &who, &ended.stderr);
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
