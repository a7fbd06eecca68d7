//! Names of processes, handlers and steps as traces show them, from the
//! model alone (a crashed run's trace is named without an engine).

use super::events::Event;
use super::events::ENV_EVENTS;
use super::events::{ENV, LOSE};
use super::properties::property_fns;
use super::setup::Engine;
use crate::engine::erased::kind_of;
use crate::engine::erased::Erased as P;

use crate::engine::trace::StepKind;
use crate::model::{FingerprintMode, Handler, Model, StateHasher, Trigger};

/// A model's names — processes, handlers, invariants, the source of its
/// process type's identity — known without building its processes (which
/// the parent of an isolated run must not do: a constructor may be what
/// crashed the child).
pub(crate) struct Names<'m, P: crate::model::Process> {
    pub(crate) model: &'m Model<P>,
    pub(crate) handlers: Vec<Handler<P>>,
    /// Per-process invariants, then the model's own global ones, then the
    /// registered ones (the crash log numbers them so).
    pub(crate) invariants: Vec<&'static str>,
    pub(crate) per_process: usize,
    /// The source of the process type's identity.
    pub(crate) source: &'static str,
}

impl<'m> Names<'m, P> {
    pub(crate) fn of(model: &'m Model<P>, mode: Option<FingerprintMode>) -> Self {
        let kind = kind_of(model);
        let per_process: Vec<&'static str> = (kind.invariants)().iter().map(|i| i.name).collect();
        let per = per_process.len();
        let invariants = per_process
            .into_iter()
            .chain(model.invariants.iter().map(|i| i.name))
            .chain(
                kind.registered_invariants()
                    .into_iter()
                    .filter(|(name, _)| !model.without.iter().any(|w| w == name))
                    .map(|(n, _)| n),
            )
            .chain(property_fns(model).into_iter().map(|p| p.name))
            .collect();
        let source = mode
            .or(model.fingerprint)
            .or_else(|| kind.process_best().map(|(m, _)| m))
            .unwrap_or(FingerprintMode::Heap)
            .name();
        Names {
            model,
            handlers: (kind.handlers)(),
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
        let kind = kind_of(self.model);
        kind.process.name.hash(&mut h);
        kind.msg.name.hash(&mut h);
        kind.shared.name.hash(&mut h);
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

impl<'m> Engine<'m, P> {
    /// A hash of the model's shape (see [`Trace::handlers`]): what a trace
    /// depends on besides the code of the handlers.
    pub(crate) fn shape(&self) -> String {
        Names::of(self.model, self.fp.mode).shape()
    }
}
