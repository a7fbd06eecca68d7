//! A state's fingerprint composed from its parts: each process's and the
//! environment's component, from the source of identity its type offers
//! ([`Chosen`]), kept per state so that a transition re-fingerprints only
//! the arenas it wrote.

use super::error::CheckError;
use crate::engine::erased::Erased as P;
use crate::engine::erased::{kind_of, ErasedMsg, ErasedShared};

use crate::engine::isolate::{self};
use crate::engine::symmetry::Symmetry;
use crate::engine::trace::{ViolationKind, ViolationRecord};
use crate::identity::canon::{CanonTable, HeapGraph};
use crate::identity::rename::{self, hashing_renamed, Renaming};
use crate::identity::{HashFn, TypeSource};
use crate::memory::{ArenaId, Fingerprint, FingerprintWidth, Memory, StateId};
use crate::model::ctx::user_code;
use crate::model::env::Env;
use crate::model::{FingerprintMode, Model, StateHasher};
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
pub(crate) struct Fingerprinter<P: crate::model::Process> {
    pub(crate) process: Chosen<P>,
    pub(crate) shared: Chosen<ErasedShared>,
    /// Heap mode: one graph per process arena.
    pub(crate) graphs: Vec<HeapGraph>,
    /// The shared variables' heap, when they are fingerprinted by it.
    pub(crate) shared_graph: Option<HeapGraph>,
    pub(crate) table: CanonTable,
    /// Which source each type uses, for reports.
    pub(crate) sources: Vec<TypeSource>,
    /// The mode that overrode each type's best source, if any.
    pub(crate) mode: Option<FingerprintMode>,
    /// The declared symmetry, when the search reduces by it: states are
    /// fingerprinted by their smallest image (see `engine::symmetry`).
    pub(crate) symmetry: Option<Symmetry>,
    /// The smallest image computed last (under symmetry reduction).
    pub(crate) last: Option<Canonical>,
    /// How many smallest images were not computed exactly.
    pub(crate) inexact: u64,
}

impl Fingerprinter<P> {
    /// Chooses the sources: the mode the model asks for, else each type's
    /// best.
    pub(crate) fn new(
        model: &Model<P>,
        mode: Option<FingerprintMode>,
        mem: &Memory,
        arenas: &[ArenaId],
        roots: &[*mut P],
        env_arena: ArenaId,
        env: *mut Env<ErasedMsg, ErasedShared>,
    ) -> Result<Self, CheckError> {
        let kind = kind_of(model);
        let fns = (kind.hash_fns)();
        crate::identity::typed::new_check();
        // A model that names its identifiers by type and field
        // (`ids_in`) is walked by its type information where it has no
        // `StateHash`: a `Hash` or `Debug` writes identifiers as numbers
        // (and hashes hidden fields, `hidden_in`).
        let typed_ids = typed_walk(model);
        let walk =
            |state: bool, available: Result<(), String>| typed_ids && !state && available.is_ok();
        let process = match mode {
            None if walk(fns.process.state.is_some(), (kind.process.available)()) => {
                Chosen::Value(FingerprintMode::Typed, kind.process.typed_hash)
            }
            None => kind
                .process_best()
                .map_or(Chosen::Heap, |(m, f)| Chosen::Value(m, f)),
            Some(FingerprintMode::Typed) => match (kind.process.available)() {
                Ok(()) => Chosen::Value(FingerprintMode::Typed, kind.process.typed_hash),
                Err(why) => {
                    return Err(CheckError::Model(format!(
                        "fingerprint mode `typed` cannot describe the process type {}: {why}",
                        kind.process.name
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
                        kind.process.name
                    )));
                }
            },
        };
        let shared = match fns.shared.best() {
            _ if kind.shared.size != 0
                && walk(fns.shared.state.is_some(), (kind.shared.available)()) =>
            {
                Chosen::Value(FingerprintMode::Typed, kind.shared.typed_hash)
            }
            Some((m, f)) => Chosen::Value(m, f),
            None if kind.shared.size == 0 => Chosen::Nothing,
            None if (kind.shared.available)().is_ok() => {
                Chosen::Value(FingerprintMode::Typed, kind.shared.typed_hash)
            }
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
            let shared: *const ErasedShared = unsafe { &*(*env).shared };
            HeapGraph::new(mem, env_arena, shared.cast())
        });
        let msg_mode = message_source(model).0;
        let mut sources = vec![(kind.process.source)(
            "process",
            process.mode().expect("a process type always has a source"),
        )];
        if let Some(source) = shared.mode().filter(|_| kind.shared.size != 0) {
            sources.push((kind.shared.source)("shared", source));
        }
        sources.push((kind.msg.source)("message", msg_mode));
        let symmetry = if model.symmetry.is_empty() || !model.reduce {
            None
        } else {
            Some(symmetry_for(model, &process, &shared, msg_mode)?)
        };
        // Where the typed walk finds identifiers (none unless reduced).
        let mut walked = Vec::new();
        if matches!(process, Chosen::Value(FingerprintMode::Typed, _)) {
            walked.push((kind.process.root)());
        }
        if matches!(shared, Chosen::Value(FingerprintMode::Typed, _)) {
            walked.push((kind.shared.root)());
        }
        if msg_mode == FingerprintMode::Typed {
            walked.push((kind.msg.root)());
        }
        let decls = if symmetry.is_some() {
            &model.typed_ids[..]
        } else {
            &[]
        };
        crate::identity::typed::declare_ids(&walked, decls, &model.hidden, &model.unordered)
            .map_err(CheckError::Model)?;
        Ok(Fingerprinter {
            process,
            shared,
            graphs,
            shared_graph,
            table: CanonTable::new(),
            sources,
            mode,
            symmetry,
            last: None,
            inexact: 0,
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
        env: *mut Env<ErasedMsg, ErasedShared>,
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
            let shared: *const ErasedShared = unsafe { &*(*env).shared };
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
            symmetry: self.symmetry.clone(),
            last: None,
            inexact: 0,
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
pub(crate) struct Parts<'a, P: crate::model::Process> {
    pub(crate) mem: &'a mut Memory,
    pub(crate) model: &'a Model<P>,
    pub(crate) arenas: &'a [ArenaId],
    pub(crate) env_arena: ArenaId,
    pub(crate) roots: &'a [*mut P],
    pub(crate) env: *mut Env<ErasedMsg, ErasedShared>,
}

impl Parts<'_, P> {
    /// The fingerprint of `state`, the loaded state, computed by `fp`;
    /// components are cached on the page tables, and their sum on the
    /// state, when `cached`.
    pub(crate) fn fingerprint(
        mut self,
        fp: &mut Fingerprinter<P>,
        state: StateId,
        cached: bool,
    ) -> Result<Fingerprint, ViolationRecord> {
        if fp.symmetry.is_some() {
            let canonical = self.canonical(fp)?;
            let sum = canonical.sum;
            fp.inexact += u64::from(!canonical.exact);
            fp.last = Some(canonical);
            if cached {
                self.mem.set_state_tag(state, sum);
            }
            return Ok(self.finish(sum));
        }
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
        if fp.symmetry.is_some() {
            // No component is kept: the smallest image is computed whole.
            let canonical = self.canonical(fp)?;
            let sum = canonical.sum;
            fp.inexact += u64::from(!canonical.exact);
            fp.last = Some(canonical);
            return Ok((self.finish(sum), sum));
        }
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
            let msgs = kind_of(self.model).msgs(env);
            h.write_usize(msgs.len());
            for (m, _) in msgs.iter() {
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

/// The smallest image of a state (see `engine::symmetry`).
pub(crate) struct Canonical {
    /// The sum of its components, which the fingerprint is finished from.
    pub(crate) sum: u128,
    /// The permutation that gives it: process `i` goes to slot `perm[i]`.
    pub(crate) perm: Vec<usize>,
    /// Whether every permutation that could give a smaller image was
    /// tried (else the fingerprint is that of some image).
    pub(crate) exact: bool,
    /// The sum of the state's own components (its image under the
    /// identity): equal for two states only if they are the same.
    pub(crate) own: u128,
    /// Each process's colour: what no renaming changes about it (equal
    /// for a process of a state and its image in the state's image).
    pub(crate) colours: Vec<u128>,
}

/// A component hashed under the identity renaming: its hash, whether it
/// wrote an identifier, and its hash under the masked renaming (the same
/// when it wrote none).
#[derive(Clone, Copy)]
struct Part {
    hash: u128,
    named: bool,
    masked: u128,
}

impl Parts<'_, P> {
    /// `value` hashed by `f` under `renaming`, and whether it wrote a
    /// process identifier.
    fn hash_under<T: ?Sized>(
        &mut self,
        renaming: &Renaming,
        what: impl FnOnce() -> String,
        value: &T,
        f: &dyn Fn(&T, &mut StateHasher),
    ) -> Result<(u128, bool), ViolationRecord> {
        let before = rename::ids_written();
        let h = crate::identity::chunks::with_memory(self.mem, || {
            hashing_renamed(renaming, || Self::user(what, value, f))
        })?;
        Ok((h, rename::ids_written() != before))
    }

    /// [`Parts::hash_under`] the identity and the masked renaming.
    fn part<T: ?Sized>(
        &mut self,
        sym: &Symmetry,
        what: impl Fn() -> String,
        value: &T,
        f: &dyn Fn(&T, &mut StateHasher),
    ) -> Result<Part, ViolationRecord> {
        let (hash, named) = self.hash_under(&sym.identity, &what, value, f)?;
        let masked = if named {
            self.hash_under(&sym.masked, &what, value, f)?.0
        } else {
            hash
        };
        Ok(Part {
            hash,
            named,
            masked,
        })
    }

    /// The loaded state's smallest image under the permutations of its
    /// interchangeable processes.
    pub(crate) fn canonical(
        &mut self,
        fp: &mut Fingerprinter<P>,
    ) -> Result<Canonical, ViolationRecord> {
        use crate::sys::hash::term;
        let sym = fp.symmetry.as_ref().expect("a symmetric fingerprinter");
        let Chosen::Value(_, process_fn) = fp.process else {
            unreachable!("symmetry reduction is set up only for processes hashed by value")
        };
        let n = self.roots.len();
        isolate::phase(isolate::IN_IDENTITY, 0, 0, 0, 0);
        let mut procs = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: a live root of the loaded state.
            let proc = unsafe { &*self.roots[i] };
            let what = move || format!("the StateHash implementation of process {i}");
            procs.push(self.part(sym, what, proc, &process_fn)?);
        }
        // SAFETY: the environment root is live in every state.
        let env = unsafe { &*self.env };
        let key_fn = env.key_fn();
        let inflight = kind_of(self.model).msgs(env);
        let mut msgs = Vec::with_capacity(inflight.len());
        for (_, msg) in inflight.iter() {
            let what = || "the StateHash implementation of a message".to_string();
            msgs.push(self.part(sym, what, msg, &key_fn)?);
        }
        let shared_fn = match fp.shared {
            Chosen::Value(_, f) => Some(f),
            _ => None,
        };
        let shared = match shared_fn {
            Some(f) => {
                let what = || "the StateHash implementation of the shared variables".to_string();
                self.part(sym, what, &*env.shared, &f)?
            }
            None => Part {
                hash: 0,
                named: false,
                masked: 0,
            },
        };
        // Colours: what no renaming changes about a process — its masked
        // hash, and the masked messages and the timers it has.
        let end = |p: u32| {
            if sym.grouped(p as usize) {
                u64::MAX
            } else {
                u64::from(p)
            }
        };
        let mut colours: Vec<u128> = procs.iter().map(|p| p.masked).collect();
        for ((m, _), part) in inflight.iter().zip(&msgs) {
            let (to, from) = (m.to as usize, m.from as usize);
            colours[to] = colours[to].wrapping_add(term(1, end(m.from) as usize, part.masked));
            colours[from] = colours[from].wrapping_add(term(2, end(m.to) as usize, part.masked));
        }
        for &(p, name) in &env.timers {
            colours[p as usize] = colours[p as usize].wrapping_add(term(3, 0, u128::from(name)));
        }
        let named = procs.iter().chain(&msgs).any(|p| p.named) || shared.named;
        let tied = |colours: &[u128]| sym.classes(colours).iter().any(|c| c.len() > 1);
        if named && tied(&colours) {
            // Refine the colours by where each identifier appears (where
            // they tie: whether they do is the same for every image).
            for (p, singled) in sym.singled() {
                let mut seen = 0u128;
                for (i, part) in procs.iter().enumerate() {
                    if part.named {
                        // SAFETY: a live root of the loaded state.
                        let proc = unsafe { &*self.roots[i] };
                        let what = || format!("the StateHash implementation of process {i}");
                        let h = self.hash_under(&singled, what, proc, &process_fn)?.0;
                        seen = seen.wrapping_add(term(4, 0, h));
                    }
                }
                for ((_, msg), part) in inflight.iter().zip(&msgs) {
                    if part.named {
                        let what = || "the StateHash implementation of a message".to_string();
                        let h = self.hash_under(&singled, what, msg, &key_fn)?.0;
                        seen = seen.wrapping_add(term(5, 0, h));
                    }
                }
                if let (true, Some(f)) = (shared.named, shared_fn) {
                    let what = || "the StateHash implementation of the shared variables".into();
                    let h = self.hash_under(&singled, what, &*env.shared, &f)?.0;
                    seen = seen.wrapping_add(term(6, 0, h));
                }
                colours[p] = colours[p].wrapping_add(term(7, 0, seen));
            }
        }
        let hashed = Hashed {
            procs,
            msgs,
            shared,
            named,
            process_fn,
            shared_fn,
            key_fn,
        };
        let classes = sym.classes(&colours);
        // A class each of whose swaps of neighbours leaves the state as it
        // is (its image is the state's own) permutes nothing: the swaps
        // generate every order of the class, so all give the same image.
        let identity: Vec<usize> = (0..n).collect();
        let own = self.image(sym, &hashed, &identity)?;
        let mut fixed = Vec::with_capacity(classes.len());
        for class in &classes {
            let mut same = true;
            for w in class.windows(2) {
                let mut swap = identity.clone();
                swap.swap(w[0], w[1]);
                if self.image(sym, &hashed, &swap)? != own {
                    same = false;
                    break;
                }
            }
            fixed.push(same);
        }
        let (candidates, exact) = sym.candidates(&classes, &fixed);
        let mut best: Option<(u128, usize)> = None;
        for (c, perm) in candidates.iter().enumerate() {
            let sum = self.image(sym, &hashed, perm)?;
            if best.is_none_or(|(b, _)| sum < b) {
                best = Some((sum, c));
            }
        }
        let (sum, at) = best.expect("at least one permutation is tried");
        Ok(Canonical {
            sum,
            perm: candidates[at].clone(),
            exact,
            own,
            colours,
        })
    }
}

/// A state's components hashed for its images (see [`Parts::canonical`]).
struct Hashed<P: crate::model::Process> {
    procs: Vec<Part>,
    msgs: Vec<Part>,
    shared: Part,
    /// Whether any component wrote an identifier.
    named: bool,
    process_fn: HashFn<P>,
    shared_fn: Option<HashFn<ErasedShared>>,
    key_fn: HashFn<ErasedMsg>,
}

impl Parts<'_, P> {
    /// The sum of the components of the loaded state's image under `perm`
    /// (process `i` to slot `perm[i]`, identifiers renamed alike).
    fn image(
        &mut self,
        sym: &Symmetry,
        hashed: &Hashed<P>,
        perm: &[usize],
    ) -> Result<u128, ViolationRecord> {
        use crate::sys::hash::{finish, term};
        let n = self.roots.len();
        // SAFETY: the environment root is live in every state.
        let env = unsafe { &*self.env };
        // Under the identity the components are those already hashed.
        let moved = perm.iter().enumerate().any(|(i, &p)| i != p);
        let renaming = (hashed.named && moved).then(|| sym.renaming(perm));
        let renamed = |part: &Part| renaming.as_ref().filter(|_| part.named);
        let mut sum = 0u128;
        for (i, part) in hashed.procs.iter().enumerate() {
            let c = match renamed(part) {
                Some(r) => {
                    // SAFETY: a live root of the loaded state.
                    let proc = unsafe { &*self.roots[i] };
                    let what = || format!("the StateHash implementation of process {i}");
                    self.hash_under(r, what, proc, &hashed.process_fn)?.0
                }
                None => part.hash,
            };
            sum = sum.wrapping_add(term(perm[i], usize::MAX, c));
        }
        // The network: order-free over messages (or over FIFO links, each
        // in its order), with renamed ends.
        let mut net = 0u128;
        let mut link: Option<(u32, u32, StateHasher)> = None;
        for ((m, msg), part) in kind_of(self.model).msgs(env).iter().zip(&hashed.msgs) {
            let key = match renamed(part) {
                Some(r) => {
                    let what = || "the StateHash implementation of a message".to_string();
                    self.hash_under(r, what, msg, &hashed.key_fn)?.0
                }
                None => part.hash,
            };
            let (to, from) = (perm[m.to as usize], perm[m.from as usize]);
            if !env.fifo {
                net = net.wrapping_add(term(to, from, key));
                continue;
            }
            if !matches!(&link, Some((t, f, _)) if (*t, *f) == (m.to, m.from)) {
                if let Some((_, _, h)) = link.take() {
                    net = net.wrapping_add(term(usize::MAX - 2, 0, h.finish128()));
                }
                let mut h = StateHasher::default();
                std::hash::Hasher::write_u64(&mut h, to as u64);
                std::hash::Hasher::write_u64(&mut h, from as u64);
                link = Some((m.to, m.from, h));
            }
            let (_, _, h) = link.as_mut().expect("a link was started");
            std::hash::Hasher::write_u128(h, key);
        }
        if let Some((_, _, h)) = link.take() {
            net = net.wrapping_add(term(usize::MAX - 2, 0, h.finish128()));
        }
        for &(p, name) in &env.timers {
            net = net.wrapping_add(term(perm[p as usize], usize::MAX - 1, u128::from(name)));
        }
        let sh = match (renamed(&hashed.shared), hashed.shared_fn) {
            (Some(r), Some(f)) => {
                let what = || "the StateHash implementation of the shared variables".into();
                self.hash_under(r, what, &*env.shared, &f)?.0
            }
            _ => hashed.shared.hash,
        };
        let env_c = finish(net).wrapping_add(term(0, 1, sh));
        Ok(sum.wrapping_add(term(n, usize::MAX, env_c)))
    }
}

/// The symmetry of `model` for the sources `fp` chose.
pub(crate) fn symmetry_of(model: &Model<P>, fp: &Fingerprinter<P>) -> Result<Symmetry, CheckError> {
    let msg = message_source(model).0;
    symmetry_for(model, &fp.process, &fp.shared, msg)
}

/// The symmetry the model declares, if its types can be renamed: every
/// identifier must be hashed by a `StateHash` (a `Hash` or `Debug` writes
/// it as a plain number).
fn symmetry_for(
    model: &Model<P>,
    process: &Chosen<P>,
    shared: &Chosen<ErasedShared>,
    msg: FingerprintMode,
) -> Result<Symmetry, CheckError> {
    let refuse = |what: &str, ty: &str, how: Option<FingerprintMode>| {
        let how = how.map_or("no source".to_string(), |m| {
            format!("its {}", source_name(m))
        });
        CheckError::Model(format!(
            "the model declares interchangeable processes, but the {what} ({ty}) is \
             fingerprinted by {how}, which cannot rename process identifiers: derive \
             cmc::StateHash for it (and cmc::ProcessId for the identifier type), or, \
             for a type that cannot derive, name the fields that hold identifiers \
             (Model::ids_in)"
        ))
    };
    // The typed walk renames what `ids_in` names.
    let typed = !model.typed_ids.is_empty();
    if model.symmetry.iter().any(|g| g.plain) && !typed {
        return Err(CheckError::Model(
            "the model declares interchangeable processes named by plain integers, but not \
             where the states hold them: name the fields with Model::ids_in (or derive \
             cmc::ProcessId on an identifier newtype)"
                .into(),
        ));
    }
    match process {
        Chosen::Value(FingerprintMode::State, _) => {}
        Chosen::Value(FingerprintMode::Typed, _) if typed => {}
        other => {
            return Err(refuse(
                "process type",
                kind_of(model).process.name,
                other.mode(),
            ))
        }
    }
    match shared {
        Chosen::Value(FingerprintMode::State, _) | Chosen::Nothing => {}
        Chosen::Value(FingerprintMode::Typed, _) if typed => {}
        other => {
            return Err(refuse(
                "shared variables",
                kind_of(model).shared.name,
                other.mode(),
            ))
        }
    }
    let msg_ok = msg == FingerprintMode::State || (typed && msg == FingerprintMode::Typed);
    if !msg_ok && kind_of(model).msg.size != 0 {
        return Err(refuse("message type", kind_of(model).msg.name, Some(msg)));
    }
    if model.por {
        return Err(CheckError::Model(
            "symmetry reduction and partial-order reduction (--por) cannot be combined yet: \
             drop --por, or pass --no-symmetry"
                .into(),
        ));
    }
    Symmetry::new(&model.symmetry, model.count).map_err(CheckError::Model)
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
/// Whether the model reduces by a symmetry whose identifiers are named by
/// type and field ([`Model::ids_in`]).
fn typed_ids(model: &Model<P>) -> bool {
    !model.symmetry.is_empty() && model.reduce && !model.typed_ids.is_empty()
}

/// Whether the typed walk fingerprints what has no `StateHash`: the model
/// names identifiers by type and field, or hides fields
/// ([`Model::hidden_in`]).
fn typed_walk(model: &Model<P>) -> bool {
    typed_ids(model) || !model.hidden.is_empty() || !model.unordered.is_empty()
}

pub(crate) fn message_key(model: &Model<P>) -> HashFn<ErasedMsg> {
    message_source(model).1
}

/// The source messages are fingerprinted (and keyed) by: their best, or,
/// when the model renames identifiers the typed walk finds
/// ([`Model::ids_in`]) and the message type has no `StateHash`, the
/// typed walk.
pub(crate) fn message_source(model: &Model<P>) -> (FingerprintMode, HashFn<ErasedMsg>) {
    let kind = kind_of(model);
    let fns = (kind.hash_fns)();
    if typed_walk(model) && fns.msg.state.is_none() && (kind.msg.available)().is_ok() {
        return (FingerprintMode::Typed, kind.msg.typed_hash);
    }
    fns.msg
        .best()
        .unwrap_or((FingerprintMode::Debug, kind.msg_debug_hash))
}

pub(crate) fn hex(fp: Fingerprint) -> String {
    fp.to_string()
}
