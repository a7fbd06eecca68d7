//! A state's fingerprint composed from its parts: each process's and the
//! environment's component, from the source of identity its type offers
//! ([`Chosen`]), kept per state so that a transition re-fingerprints only
//! the arenas it wrote.

use super::error::CheckError;

use crate::engine::isolate::{self};
use crate::engine::trace::{ViolationKind, ViolationRecord};
use crate::identity::canon::{CanonTable, HeapGraph};
use crate::identity::{HashFn, TypeSource};
use crate::memory::{ArenaId, Fingerprint, FingerprintWidth, Memory, StateId};
use crate::model::ctx::user_code;
use crate::model::env::Env;
use crate::model::{FingerprintMode, Model, Process, StateHasher};
use crate::sys::scope::system_scope;

/// How one type of the model is fingerprinted.
pub(crate) enum Chosen<T> {
    /// By a function of its value (`StateHash`, `Hash` or `Debug`).
    Value(FingerprintMode, HashFn<T>),
    /// By the canonical heap.
    Heap,
    /// By the raw pages of its arena.
    Bytes,
    /// By the model's abstraction function.
    Abstract,
    /// Not at all (a type of size zero with no source: nothing to see).
    Nothing,
}

impl<T> Clone for Chosen<T> {
    fn clone(&self) -> Self {
        match self {
            Chosen::Value(m, f) => Chosen::Value(*m, *f),
            Chosen::Heap => Chosen::Heap,
            Chosen::Bytes => Chosen::Bytes,
            Chosen::Abstract => Chosen::Abstract,
            Chosen::Nothing => Chosen::Nothing,
        }
    }
}

impl<T> Chosen<T> {
    pub(crate) fn mode(&self) -> Option<FingerprintMode> {
        match self {
            Chosen::Value(m, _) => Some(*m),
            Chosen::Heap => Some(FingerprintMode::Heap),
            Chosen::Bytes => Some(FingerprintMode::Bytes),
            Chosen::Abstract => Some(FingerprintMode::Abstract),
            Chosen::Nothing => None,
        }
    }
}

/// What the search's fingerprints are made of: one component per process,
/// computed from the source chosen for the process type and cached on the
/// arena's page table (an arena a transition did not touch keeps its table,
/// hence its component), and the environment's, computed from its meaning
/// (messages by their identity keys, the shared variables by their source).
pub(crate) struct Fingerprinter<P: Process> {
    pub(crate) process: Chosen<P>,
    pub(crate) shared: Chosen<P::Shared>,
    /// Heap mode: one graph per process arena.
    pub(crate) graphs: Vec<HeapGraph>,
    /// The shared variables' heap, when they are fingerprinted by it.
    pub(crate) shared_graph: Option<HeapGraph>,
    pub(crate) table: CanonTable,
    /// Which source each type uses, for reports.
    pub(crate) sources: Vec<TypeSource>,
    /// The mode that overrode each type's best source, if any.
    pub(crate) mode: Option<FingerprintMode>,
}

impl<P: Process> Fingerprinter<P> {
    /// Chooses the sources: the mode the model asks for, else each type's
    /// best.
    pub(crate) fn new(
        model: &Model<P>,
        mode: Option<FingerprintMode>,
        mem: &Memory,
        arenas: &[ArenaId],
        roots: &[*mut P],
        env_arena: ArenaId,
        env: *mut Env<P::Msg, P::Shared>,
    ) -> Result<Self, CheckError> {
        let fns = P::hash_fns();
        crate::identity::typed::new_check();
        let process = match mode {
            None => fns
                .process
                .best_or_typed()
                .map_or(Chosen::Heap, |(m, f)| Chosen::Value(m, f)),
            Some(FingerprintMode::Typed) => match crate::identity::typed::available::<P>() {
                Ok(()) => Chosen::Value(
                    FingerprintMode::Typed,
                    crate::identity::typed::typed_hash::<P>,
                ),
                Err(why) => {
                    return Err(CheckError::Model(format!(
                        "fingerprint mode `typed` cannot describe the process type {}: {why}",
                        std::any::type_name::<P>()
                    )))
                }
            },
            Some(FingerprintMode::Heap) => Chosen::Heap,
            Some(FingerprintMode::Bytes) => Chosen::Bytes,
            Some(FingerprintMode::Abstract) => {
                if model.abstraction.is_none() {
                    return Err(CheckError::Model(
                        "fingerprint mode `abstract` needs an abstraction function \
                         (Model::abstraction); this model has none"
                            .into(),
                    ));
                }
                Chosen::Abstract
            }
            Some(mode) => match fns.process.get(mode) {
                Some(f) => Chosen::Value(mode, f),
                None => {
                    let need = match mode {
                        FingerprintMode::State => "cmc::StateHash (derive it)",
                        FingerprintMode::Hash => "Hash (derive it)",
                        _ => "Debug (derive it)",
                    };
                    return Err(CheckError::Model(format!(
                        "fingerprint mode `{}` needs the process type {} to implement {need}, \
                         or choose another mode",
                        mode.name(),
                        std::any::type_name::<P>()
                    )));
                }
            },
        };
        let shared = match fns.shared.best() {
            Some((m, f)) => Chosen::Value(m, f),
            None if size_of::<P::Shared>() == 0 => Chosen::Nothing,
            None if crate::identity::typed::available::<P::Shared>().is_ok() => Chosen::Value(
                FingerprintMode::Typed,
                crate::identity::typed::typed_hash::<P::Shared>,
            ),
            None => Chosen::Heap,
        };
        let graphs = if matches!(process, Chosen::Heap) {
            arenas
                .iter()
                .zip(roots)
                .map(|(&a, &r)| HeapGraph::new(mem, a, r as *const u8))
                .collect()
        } else {
            Vec::new()
        };
        let shared_graph = matches!(shared, Chosen::Heap).then(|| {
            // SAFETY: the environment was just built and is live.
            let shared: *const P::Shared = unsafe { &*(*env).shared };
            HeapGraph::new(mem, env_arena, shared.cast())
        });
        let msg_mode = fns.msg.best().map_or(FingerprintMode::Debug, |(m, _)| m);
        let mut sources = vec![TypeSource::of::<P>(
            "process",
            process.mode().expect("a process type always has a source"),
        )];
        if let Some(source) = shared.mode().filter(|_| size_of::<P::Shared>() != 0) {
            sources.push(TypeSource::of::<P::Shared>("shared", source));
        }
        sources.push(TypeSource::of::<P::Msg>("message", msg_mode));
        Ok(Fingerprinter {
            process,
            shared,
            graphs,
            shared_graph,
            table: CanonTable::new(),
            sources,
            mode,
        })
    }

    /// The same choices with nothing computed yet: fingerprints along a
    /// trace, which a replay in another process computes the same way from
    /// the same states (the canonical heap's table depends on the states it
    /// has seen).
    pub(crate) fn fresh(
        &self,
        mem: &Memory,
        arenas: &[ArenaId],
        roots: &[*mut P],
        env_arena: ArenaId,
        env: *mut Env<P::Msg, P::Shared>,
    ) -> Self {
        let graphs = if self.graphs.is_empty() {
            Vec::new()
        } else {
            arenas
                .iter()
                .zip(roots)
                .map(|(&a, &r)| HeapGraph::new(mem, a, r as *const u8))
                .collect()
        };
        let shared_graph = self.shared_graph.as_ref().map(|_| {
            // SAFETY: the environment root is live in every state.
            let shared: *const P::Shared = unsafe { &*(*env).shared };
            HeapGraph::new(mem, env_arena, shared.cast())
        });
        Fingerprinter {
            process: self.process.clone(),
            shared: self.shared.clone(),
            graphs,
            shared_graph,
            table: CanonTable::new(),
            sources: self.sources.clone(),
            mode: self.mode,
        }
    }

    /// Drops the states the heap graphs hold.
    pub(crate) fn release(&mut self, mem: &mut Memory) {
        for g in &mut self.graphs {
            g.release(mem);
        }
        if let Some(g) = &mut self.shared_graph {
            g.release(mem);
        }
    }
}

/// What computing a fingerprint needs of an engine, borrowed apart from its
/// fingerprinters.
pub(crate) struct Parts<'a, P: Process> {
    pub(crate) mem: &'a mut Memory,
    pub(crate) model: &'a Model<P>,
    pub(crate) arenas: &'a [ArenaId],
    pub(crate) env_arena: ArenaId,
    pub(crate) roots: &'a [*mut P],
    pub(crate) env: *mut Env<P::Msg, P::Shared>,
}

impl<P: Process> Parts<'_, P> {
    /// The fingerprint of `state`, the loaded state, computed by `fp`;
    /// components are cached on the page tables, and their sum on the
    /// state, when `cached`.
    pub(crate) fn fingerprint(
        mut self,
        fp: &mut Fingerprinter<P>,
        state: StateId,
        cached: bool,
    ) -> Result<Fingerprint, ViolationRecord> {
        let (fingerprint, sum) = self.combine(
            fp,
            state,
            |mem, arena| mem.tag(state, arena).filter(|_| cached),
            |mem, arena, c| {
                if cached {
                    mem.set_tag(state, arena, c);
                }
            },
        )?;
        if cached {
            self.mem.set_state_tag(state, sum);
        }
        Ok(fingerprint)
    }

    /// The fingerprint of the loaded memory, a successor of `pre` not
    /// captured yet, whose arenas differ from `pre` where `changed` (indexed
    /// by arena) says: an unchanged arena's component is `pre`'s. Only for
    /// sources computed from the live objects (a value's or an abstraction's
    /// hash), which need no captured state. The components computed are
    /// left in `computed` as (arena, component), for tagging the state
    /// once captured, with the sum of all components (returned). When
    /// `pre` carries its sum and its components, the cost is that of the
    /// changed arenas alone.
    pub(crate) fn fingerprint_changed(
        mut self,
        fp: &mut Fingerprinter<P>,
        pre: StateId,
        changed: &[bool],
        computed: &mut Vec<(ArenaId, u128)>,
    ) -> Result<(Fingerprint, u128), ViolationRecord> {
        computed.clear();
        if let Some(mut sum) = self.mem.state_tag(pre) {
            let n = self.arenas.len();
            let mut complete = true;
            for i in 0..=n {
                let arena = if i < n {
                    self.arenas[i]
                } else {
                    self.env_arena
                };
                if !changed[arena.0] {
                    continue;
                }
                let Some(old) = self.mem.tag(pre, arena) else {
                    complete = false;
                    break;
                };
                let c = if i < n {
                    self.process_component(fp, i, pre)?
                } else {
                    self.env_component(fp, pre)?
                };
                computed.push((arena, c));
                sum = sum
                    .wrapping_sub(crate::sys::hash::term(i, usize::MAX, old))
                    .wrapping_add(crate::sys::hash::term(i, usize::MAX, c));
            }
            if complete {
                return Ok((self.finish(sum), sum));
            }
            computed.clear();
        }
        self.combine(
            fp,
            pre,
            |mem, arena| mem.tag(pre, arena).filter(|_| !changed[arena.0]),
            |_, arena, c| computed.push((arena, c)),
        )
    }

    /// The fingerprint a sum of components gives.
    pub(crate) fn finish(&self, sum: u128) -> Fingerprint {
        if self.model.width == FingerprintWidth::Bits64 {
            return Fingerprint(u128::from(crate::sys::hash::finish64(sum)));
        }
        Fingerprint(crate::sys::hash::finish(sum))
    }

    /// Sums the components of the processes and the environment: `known`
    /// gives an arena's component when it need not be computed, `computed`
    /// receives each one that was. `state` is the loaded state for the
    /// sources that read a captured state. Returns the fingerprint and the
    /// sum.
    pub(crate) fn combine(
        &mut self,
        fp: &mut Fingerprinter<P>,
        state: StateId,
        known: impl Fn(&Memory, ArenaId) -> Option<u128>,
        mut computed: impl FnMut(&mut Memory, ArenaId, u128),
    ) -> Result<(Fingerprint, u128), ViolationRecord> {
        let mut sum = 0u128;
        for i in 0..self.arenas.len() {
            let arena = self.arenas[i];
            let c = match known(self.mem, arena) {
                Some(c) => c,
                None => {
                    let c = self.process_component(fp, i, state)?;
                    computed(self.mem, arena, c);
                    c
                }
            };
            sum = sum.wrapping_add(crate::sys::hash::term(i, usize::MAX, c));
        }
        let env = self.env_arena;
        let c = match known(self.mem, env) {
            Some(c) => c,
            None => {
                let c = self.env_component(fp, state)?;
                computed(self.mem, env, c);
                c
            }
        };
        sum = sum.wrapping_add(crate::sys::hash::term(self.arenas.len(), usize::MAX, c));
        Ok((self.finish(sum), sum))
    }

    /// Runs a source's function (user code) in checker memory.
    /// `what` names the source in a violation (called only if it panics).
    pub(crate) fn user<T: ?Sized>(
        what: impl FnOnce() -> String,
        value: &T,
        f: &dyn Fn(&T, &mut StateHasher),
    ) -> Result<u128, ViolationRecord> {
        let _sys = system_scope();
        user_code(false, || {
            let mut h = StateHasher::default();
            f(value, &mut h);
            h.finish128()
        })
        .map_err(|(message, location)| ViolationRecord {
            kind: ViolationKind::Panic,
            property: what(),
            message,
            location: Some(location),
        })
    }

    pub(crate) fn process_component(
        &mut self,
        fp: &mut Fingerprinter<P>,
        i: usize,
        state: StateId,
    ) -> Result<u128, ViolationRecord> {
        // SAFETY: a live root of the loaded state.
        let proc = unsafe { &*self.roots[i] };
        let what = |source: &'static str| move || format!("the {source} of process {i}");
        if matches!(fp.process, Chosen::Value(..) | Chosen::Abstract) {
            isolate::phase(isolate::IN_IDENTITY, 0, i as u64, 0, 0);
        }
        match &fp.process {
            Chosen::Bytes => Ok(self.mem.arena_sum(state, self.arenas[i])),
            Chosen::Heap => Ok(fp.graphs[i].fingerprint(self.mem, &mut fp.table, state)),
            Chosen::Value(mode, f) => crate::identity::chunks::with_memory(self.mem, || {
                Self::user(what(source_name(*mode)), proc, f)
            }),
            Chosen::Abstract => {
                let f = self.model.abstraction.as_ref().expect("checked at setup");
                crate::identity::chunks::with_memory(self.mem, || {
                    Self::user(what("abstraction"), proc, &|p, h| f(p, h))
                })
            }
            Chosen::Nothing => Ok(0),
        }
    }

    /// The network and timers by meaning (messages in their canonical
    /// order, each by its identity key), and the shared variables by their
    /// source.
    pub(crate) fn env_component(
        &mut self,
        fp: &mut Fingerprinter<P>,
        state: StateId,
    ) -> Result<u128, ViolationRecord> {
        use std::hash::{Hash, Hasher};
        // SAFETY: the environment root is live in every state.
        let env = unsafe { &*self.env };
        let net = {
            let _sys = system_scope();
            let mut h = StateHasher::default();
            env.fifo.hash(&mut h);
            h.write_usize(env.msgs.len());
            for m in &env.msgs {
                (m.to, m.from, m.key).hash(&mut h);
            }
            env.timers.hash(&mut h);
            h.finish128()
        };
        if matches!(fp.shared, Chosen::Value(..)) {
            isolate::phase(isolate::IN_IDENTITY, 0, u64::MAX, 0, 0);
        }
        let shared = match &fp.shared {
            Chosen::Value(mode, f) => crate::identity::chunks::with_memory(self.mem, || {
                Self::user(
                    || format!("the {} of the shared variables", source_name(*mode)),
                    &*env.shared,
                    f,
                )
            })?,
            Chosen::Heap => {
                let g = fp.shared_graph.as_mut().expect("a graph for a shared heap");
                g.fingerprint(self.mem, &mut fp.table, state)
            }
            _ => 0,
        };
        Ok(crate::sys::hash::finish(net).wrapping_add(crate::sys::hash::term(0, 1, shared)))
    }
}

/// How a violation names a source whose code panicked.
pub(crate) fn source_name(mode: FingerprintMode) -> &'static str {
    match mode {
        FingerprintMode::State => "StateHash implementation",
        FingerprintMode::Hash => "Hash implementation",
        FingerprintMode::Debug => "Debug implementation",
        _ => "fingerprint",
    }
}

/// The message identity function of `P`: its best source, or its `Debug`
/// (every message has one).
pub(crate) fn message_key<P: Process>() -> HashFn<P::Msg> {
    P::hash_fns()
        .msg
        .best()
        .map_or(crate::identity::debug_hash::<P::Msg>, |(_, f)| f)
}

pub(crate) fn hex(fp: Fingerprint) -> String {
    fp.to_string()
}
