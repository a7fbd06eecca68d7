//! The engine compiled once. A model over any process type `P` enters the
//! engine as a model over [`Erased`]: the engine and the search are
//! instantiated for that one type, inside this crate, instead of once per
//! process type in every crate that checks a model (each test binary, each
//! harness built `cargo cmc` builds: most of their build time).
//!
//! What depends on `P` is gathered here, in [`Kind::of`], the only code
//! compiled per process type: the handler table and every function pointer
//! of the model reinterpreted for `Erased` (a reference to a sized type is
//! passed as a pointer, whatever the type), the facts about the three types
//! (names, sizes, identity sources, type-information roots), the
//! constructors, and the operations on messages in flight, whose layout
//! depends on the message type. Everything else reads a process, a message
//! or the shared variables only through those.
//!
//! The view types handlers, guards and predicates get ([`Ctx`], [`View`],
//! [`World`], the environment) are `repr(C)`, so that one built for
//! `Erased` is the one the user's function reads for `P`.
//!
//! [`Ctx`]: crate::model::Ctx
//! [`View`]: crate::model::View
//! [`World`]: crate::model::world::World

use std::any::{Any, TypeId};
use std::fmt;
use std::mem::transmute;

use crate::identity::{HashFn, Sources, TypeSource};
use crate::model::env::{Env, InFlight};
use crate::model::registered::ErasedCheck;
use crate::model::world::World;
use crate::model::{
    GlobalInvariant, Handler, HashFns, Invariant, Model, Process, Property, PropertyKind,
    StateHasher, Trigger,
};

/// A process of a type the engine does not know: it is only ever behind a
/// pointer to the real process, never read as itself.
pub struct Erased {
    _opaque: [u8; 0],
}

/// A message of a type the engine does not know (see [`Erased`]).
pub struct ErasedMsg {
    _opaque: [u8; 0],
}

/// Shared variables of a type the engine does not know (see [`Erased`]).
pub struct ErasedShared {
    _opaque: [u8; 0],
}

impl Clone for ErasedMsg {
    fn clone(&self) -> Self {
        unreachable!("an erased message is copied by its kind (Kind::duplicate), never by itself")
    }
}

impl fmt::Debug for ErasedMsg {
    fn fmt(&self, _: &mut fmt::Formatter<'_>) -> fmt::Result {
        unreachable!("an erased message is shown by its kind (Kind::msg), never by itself")
    }
}

impl Default for ErasedShared {
    fn default() -> Self {
        unreachable!("erased shared variables are built by their kind (Kind::new_env)")
    }
}

// Not among the process types an error message suggests to a user.
#[diagnostic::do_not_recommend]
impl Process for Erased {
    type Msg = ErasedMsg;
    type Shared = ErasedShared;

    fn handlers() -> Vec<Handler<Self>> {
        unreachable!("an erased model's handlers come from its kind (Kind::handlers)")
    }

    fn invariants() -> Vec<Invariant<Self>> {
        unreachable!("an erased model's invariants come from its kind (Kind::invariants)")
    }

    fn hash_fns() -> HashFns<Self> {
        unreachable!("an erased model's sources come from its kind (Kind::hash_fns)")
    }
}

/// The environment as the engine holds it.
pub(crate) type ErasedEnv = Env<ErasedMsg, ErasedShared>;

/// What the engine knows of one of the model's types.
pub(crate) struct TypeFacts<T> {
    /// Its name (`std::any::type_name`).
    pub(crate) name: &'static str,
    pub(crate) size: usize,
    /// Whether the typed walk can describe it (`identity::typed::available`).
    pub(crate) available: fn() -> Result<(), String>,
    /// Its typed walk (`identity::typed::typed_hash`).
    pub(crate) typed_hash: HashFn<T>,
    /// Its root for the typed walk (`identity::typed::Root::of`).
    pub(crate) root: fn() -> crate::identity::typed::Root,
    /// Its source in reports (`TypeSource::of`).
    pub(crate) source: fn(&str, crate::model::FingerprintMode) -> TypeSource,
    /// Its value by its type information (`identity::typed::dump`).
    pub(crate) dump: fn(&T) -> Result<String, String>,
}

impl<T> TypeFacts<T> {
    /// The facts of `R`, for the erased type `T` (both sized, so that a
    /// reference to one is passed as a reference to the other).
    fn of<R: 'static>() -> Self {
        const { assert!(size_of::<&R>() == size_of::<&T>()) };
        TypeFacts {
            name: std::any::type_name::<R>(),
            size: size_of::<R>(),
            available: crate::identity::typed::available::<R>,
            // SAFETY: a function pointer that differs only in the type behind
            // a reference argument, passed as a thin pointer either way; the
            // engine calls it only on values of the real type (see `Kind::of`).
            typed_hash: unsafe {
                transmute::<HashFn<R>, HashFn<T>>(crate::identity::typed::typed_hash::<R>)
            },
            root: crate::identity::typed::Root::of::<R>,
            source: TypeSource::of::<R>,
            // SAFETY: a function pointer that differs only in the type behind
            // a reference argument, passed as a thin pointer either way; the
            // engine calls it only on values of the real type (see `Kind::of`).
            dump: unsafe {
                transmute::<fn(&R) -> Result<String, String>, fn(&T) -> Result<String, String>>(
                    crate::identity::typed::dump::<R>,
                )
            },
        }
    }
}

/// Where a message sits in an entry of the network (an `InFlight<M>`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct MsgLayout {
    /// The size of an entry.
    pub(crate) stride: usize,
    /// The offset of the message in an entry.
    pub(crate) offset: usize,
}

/// A model's process type, erased: everything the engine does that depends
/// on it. Built by [`Kind::of`] for the model the search was given, which
/// outlives it (see [`erase`]).
pub(crate) struct Kind {
    /// The model over the real type (a `&Model<P>`).
    original: *const (),
    pub(crate) type_id: TypeId,
    pub(crate) process: TypeFacts<Erased>,
    pub(crate) shared: TypeFacts<ErasedShared>,
    pub(crate) msg: TypeFacts<ErasedMsg>,
    pub(crate) msgs: MsgLayout,
    /// `P::handlers`, erased (user code: the caller catches its panics).
    pub(crate) handlers: fn() -> Vec<Handler<Erased>>,
    /// `P::invariants`, erased (user code).
    pub(crate) invariants: fn() -> Vec<Invariant<Erased>>,
    /// `P::hash_fns`, erased.
    pub(crate) hash_fns: fn() -> HashFns<Erased>,
    /// A message's `Debug`, for the message's canonical key when it has no
    /// better source (`identity::debug_hash`).
    pub(crate) msg_debug_hash: HashFn<ErasedMsg>,
    /// A message's `Debug`, as traces show it.
    pub(crate) msg_debug: fn(&ErasedMsg) -> String,
    init: unsafe fn(*const (), usize) -> *mut Erased,
    drop_init: unsafe fn(*const (), usize),
    drop_shared: fn(),
    new_env: unsafe fn(*const (), HashFn<ErasedMsg>) -> *mut ErasedEnv,
    lose: unsafe fn(*mut ErasedEnv, usize),
    duplicate: unsafe fn(*mut ErasedEnv, usize),
    distinct: unsafe fn(*const ErasedEnv) -> Vec<usize>,
    raw_msgs: unsafe fn(*const ErasedEnv) -> (*const u8, usize),
}

impl Kind {
    fn of<P: Process>(model: &Model<P>) -> Kind {
        // SAFETY (the transmutes below): function pointers that differ only
        // in the types behind reference arguments (`&P` for `&Erased`,
        // `&View<P>` for `&View<Erased>`), passed as thin pointers; the
        // engine calls them only with pointers to values of the real types.
        fn handlers<P: Process>() -> Vec<Handler<Erased>> {
            P::handlers().into_iter().map(erase_handler).collect()
        }
        fn invariants<P: Process>() -> Vec<Invariant<Erased>> {
            P::invariants()
                .into_iter()
                .map(|i| Invariant {
                    name: i.name,
                    // SAFETY: see `Kind::of`.
                    check: unsafe { transmute::<fn(&P) -> _, fn(&Erased) -> _>(i.check) },
                })
                .collect()
        }
        fn hash_fns<P: Process>() -> HashFns<Erased> {
            let fns = P::hash_fns();
            HashFns {
                process: erase_sources(fns.process),
                shared: erase_sources(fns.shared),
                msg: erase_sources(fns.msg),
            }
        }
        fn msg_debug<P: Process>(m: &ErasedMsg) -> String {
            // SAFETY: the engine passes only messages of type `P::Msg`.
            let m = unsafe { &*(m as *const ErasedMsg).cast::<P::Msg>() };
            format!("{m:?}")
        }
        unsafe fn init<P: Process>(model: *const (), i: usize) -> *mut Erased {
            // SAFETY: `model` is the `Model<P>` the kind was built for.
            let model = unsafe { &*model.cast::<Model<P>>() };
            Box::into_raw(Box::new((model.init)(i))).cast()
        }
        unsafe fn drop_init<P: Process>(model: *const (), i: usize) {
            // SAFETY: as in `init`.
            let model = unsafe { &*model.cast::<Model<P>>() };
            drop((model.init)(i));
        }
        fn drop_shared<P: Process>() {
            drop(P::Shared::default());
        }
        unsafe fn new_env<P: Process>(model: *const (), key: HashFn<ErasedMsg>) -> *mut ErasedEnv {
            // SAFETY: as in `init`; the key function is the message type's
            // (Kind::message_source).
            let model = unsafe { &*model.cast::<Model<P>>() };
            // SAFETY: a function pointer that differs only in the type behind
            // a reference argument, passed as a thin pointer either way; the
            // engine calls it only on values of the real type (see `Kind::of`).
            let key = unsafe { transmute::<HashFn<ErasedMsg>, HashFn<P::Msg>>(key) };
            Box::into_raw(Box::new(Env::<P::Msg, P::Shared>::new(
                &model.network,
                P::Shared::default(),
                key,
            )))
            .cast()
        }
        unsafe fn lose<P: Process>(env: *mut ErasedEnv, i: usize) {
            // SAFETY: the environment the kind's `new_env` built.
            let env = unsafe { &mut *env.cast::<Env<P::Msg, P::Shared>>() };
            drop(env.remove(i));
        }
        unsafe fn duplicate<P: Process>(env: *mut ErasedEnv, i: usize) {
            // SAFETY: as in `lose`.
            unsafe { &mut *env.cast::<Env<P::Msg, P::Shared>>() }.duplicate(i);
        }
        unsafe fn distinct<P: Process>(env: *const ErasedEnv) -> Vec<usize> {
            // SAFETY: as in `lose`.
            unsafe { &*env.cast::<Env<P::Msg, P::Shared>>() }.distinct()
        }
        unsafe fn raw_msgs<P: Process>(env: *const ErasedEnv) -> (*const u8, usize) {
            // SAFETY: as in `lose`.
            let env = unsafe { &*env.cast::<Env<P::Msg, P::Shared>>() };
            (env.msgs.as_ptr().cast(), env.msgs.len())
        }
        Kind {
            original: (model as *const Model<P>).cast(),
            type_id: TypeId::of::<P>(),
            process: TypeFacts::of::<P>(),
            shared: TypeFacts::of::<P::Shared>(),
            msg: TypeFacts::of::<P::Msg>(),
            msgs: MsgLayout {
                stride: size_of::<InFlight<P::Msg>>(),
                offset: std::mem::offset_of!(InFlight<P::Msg>, msg),
            },
            handlers: handlers::<P>,
            invariants: invariants::<P>,
            hash_fns: hash_fns::<P>,
            // SAFETY: see above.
            msg_debug_hash: unsafe {
                transmute::<HashFn<P::Msg>, HashFn<ErasedMsg>>(
                    crate::identity::debug_hash::<P::Msg>,
                )
            },
            msg_debug: msg_debug::<P>,
            init: init::<P>,
            drop_init: drop_init::<P>,
            drop_shared: drop_shared::<P>,
            new_env: new_env::<P>,
            lose: lose::<P>,
            duplicate: duplicate::<P>,
            distinct: distinct::<P>,
            raw_msgs: raw_msgs::<P>,
        }
    }

    /// Process `i` as the model builds it, boxed in the current arena.
    pub(crate) fn init(&self, i: usize) -> *mut Erased {
        // SAFETY: `original` is the model this kind was built for, which
        // outlives it (see `erase`).
        unsafe { (self.init)(self.original, i) }
    }

    /// Builds process `i` and drops it (the constructors' warm-up).
    pub(crate) fn drop_init(&self, i: usize) {
        // SAFETY: as in `init`.
        unsafe { (self.drop_init)(self.original, i) }
    }

    /// Builds the shared variables' default and drops it.
    pub(crate) fn drop_shared(&self) {
        (self.drop_shared)()
    }

    /// The environment, boxed in the current arena, its messages keyed by
    /// `key` (the message type's key function).
    pub(crate) fn new_env(&self, key: HashFn<ErasedMsg>) -> *mut ErasedEnv {
        // SAFETY: as in `init`.
        unsafe { (self.new_env)(self.original, key) }
    }

    /// Removes message `i` of the network.
    ///
    /// # Safety
    /// `env` is the live environment of this kind's model, with the
    /// environment's arena entered.
    pub(crate) unsafe fn lose(&self, env: *mut ErasedEnv, i: usize) {
        // SAFETY: the caller's.
        unsafe { (self.lose)(env, i) }
    }

    /// Duplicates message `i` of the network.
    ///
    /// # Safety
    /// As for [`Kind::lose`].
    pub(crate) unsafe fn duplicate(&self, env: *mut ErasedEnv, i: usize) {
        // SAFETY: the caller's.
        unsafe { (self.duplicate)(env, i) }
    }

    /// The messages in flight of `env`, the live environment of this
    /// kind's model.
    pub(crate) fn msgs<'a>(&self, env: &'a ErasedEnv) -> Msgs<'a> {
        // SAFETY: the caller's reference is to a live environment of this
        // kind's model.
        let (base, len) = unsafe { (self.raw_msgs)(env) };
        Msgs {
            base,
            len,
            layout: self.msgs,
            _env: std::marker::PhantomData,
        }
    }

    /// The indices of the messages the environment can lose or duplicate
    /// (`Env::distinct`) in `env`, the live environment of this kind's
    /// model.
    pub(crate) fn distinct(&self, env: &ErasedEnv) -> Vec<usize> {
        // SAFETY: as in `msgs`.
        unsafe { (self.distinct)(env) }
    }

    /// The process type's best source of identity, the typed walk
    /// included ([`Sources::best_or_typed`]).
    pub(crate) fn process_best(&self) -> Option<(crate::model::FingerprintMode, HashFn<Erased>)> {
        (self.hash_fns)()
            .process
            .best_or_walk(self.process.available, self.process.typed_hash)
    }

    /// The registered global invariants of the process type.
    pub(crate) fn registered_invariants(&self) -> Vec<(&'static str, ErasedCheck)> {
        crate::model::registered::invariants_of(self.type_id)
    }

    /// The registered properties of the process type.
    pub(crate) fn registered_properties(&self) -> Vec<(&'static str, PropertyKind, ErasedCheck)> {
        crate::model::registered::properties_of(self.type_id)
    }
}

/// The kind of an erased model.
pub(crate) fn kind_of<P: Process>(model: &Model<P>) -> &Kind {
    model
        .erased
        .as_ref()
        .and_then(|k| k.downcast_ref::<Kind>())
        .expect("the engine runs only erased models (engine::erase)")
}

fn erase_sources<T, E>(s: Sources<T>) -> Sources<E> {
    // SAFETY: see `Kind::of`.
    let f = |f: Option<HashFn<T>>| f.map(|f| unsafe { transmute::<HashFn<T>, HashFn<E>>(f) });
    Sources {
        state: f(s.state),
        hash: f(s.hash),
        debug: f(s.debug),
    }
}

fn erase_handler<P: Process>(h: Handler<P>) -> Handler<Erased> {
    // SAFETY: a function pointer that differs only in the type behind
    // a reference argument, passed as a thin pointer either way; the
    // engine calls it only on values of the real type (see `Kind::of`).
    unsafe {
        Handler {
            name: h.name,
            trigger: match h.trigger {
                Trigger::Always => Trigger::Always,
                Trigger::Start => Trigger::Start,
                Trigger::Timer(t) => Trigger::Timer(t),
                Trigger::Guard(g) => Trigger::Guard(transmute::<
                    crate::model::Guard<P>,
                    crate::model::Guard<Erased>,
                >(g)),
            },
            body: transmute::<crate::model::Body<P>, crate::model::Body<Erased>>(h.body),
            fair: h.fair,
            applies: h
                .applies
                .map(|a| transmute::<fn(&P) -> bool, fn(&Erased) -> bool>(a)),
        }
    }
}

/// `world`, read as a world of `P`.
///
/// # Safety
/// The world's processes and environment are those of a model of `P`.
unsafe fn world_of<'w, 'a, P: Process>(world: &'w World<'a, Erased>) -> &'w World<'a, P> {
    // SAFETY: `World` is `repr(C)` of a slice of pointers and a reference,
    // the same for every process type; the caller's.
    unsafe { &*(world as *const World<'a, Erased>).cast::<World<'a, P>>() }
}

/// `model` over [`Erased`], with its [`Kind`]. The result refers to
/// `model` (its closures, its constructor): it must not outlive it, which
/// the entry points (`Model::check` and the like) guarantee by dropping it
/// before they return.
pub(crate) fn erase<P: Process>(model: &Model<P>) -> Model<Erased> {
    let Model {
        name,
        count,
        init: _,
        network,
        invariants,
        properties,
        bounds,
        prune,
        prune_process,
        priority,
        quiescence_ok,
        width,
        fingerprint,
        abstraction,
        strategy,
        seed,
        keep_going,
        check_determinism,
        determinism_runs,
        random_seeds,
        detect_leaks,
        arena,
        env_arena,
        debug,
        transition_timeout,
        jobs,
        cluster,
        seed_given,
        visited_flags,
        without,
        por,
        transition_cache,
        guided_walks,
        frontier_in_memory,
        symmetry,
        reduce,
        check_symmetry,
        typed_ids,
        hidden,
        unordered,
        erased,
    } = model;
    assert!(erased.is_none(), "a model is erased once");
    type Pred<P> = dyn Fn(&World<'_, P>) -> bool;
    let prune = prune.as_ref().map(|f| {
        let f: *const Pred<P> = &**f;
        // SAFETY: the model's own closure, which outlives the erased model
        // (see `erase`), called on a world or process of `P`, the only
        // ones the engine passes.
        Box::new(move |w: &World<'_, Erased>| unsafe { (*f)(world_of::<P>(w)) })
            as Box<Pred<Erased>>
    });
    let prune_process = prune_process.as_ref().map(|f| {
        let f: *const dyn Fn(&P) -> bool = &**f;
        // SAFETY: the model's own closure, which outlives the erased model
        // (see `erase`), called on a world or process of `P`, the only
        // ones the engine passes.
        Box::new(move |p: &Erased| unsafe { (*f)(&*(p as *const Erased).cast::<P>()) })
            as Box<dyn Fn(&Erased) -> bool>
    });
    let priority = priority.as_ref().map(|f| {
        let f: *const dyn Fn(&World<'_, P>) -> i64 = &**f;
        // SAFETY: the model's own closure, which outlives the erased model
        // (see `erase`), called on a world or process of `P`, the only
        // ones the engine passes.
        Box::new(move |w: &World<'_, Erased>| unsafe { (*f)(world_of::<P>(w)) })
            as Box<dyn Fn(&World<'_, Erased>) -> i64>
    });
    let abstraction = abstraction.as_ref().map(|f| {
        let f: *const dyn Fn(&P, &mut StateHasher) = &**f;
        // SAFETY: the model's own closure, which outlives the erased model
        // (see `erase`), called on a world or process of `P`, the only
        // ones the engine passes.
        Box::new(move |p: &Erased, h: &mut StateHasher| unsafe {
            (*f)(&*(p as *const Erased).cast::<P>(), h)
        }) as Box<dyn Fn(&Erased, &mut StateHasher)>
    });
    let invariants = invariants
        .iter()
        .map(|i| GlobalInvariant {
            name: i.name,
            // SAFETY: a function pointer that differs only in the type behind
            // a reference argument, passed as a thin pointer either way; the
            // engine calls it only on values of the real type (see `Kind::of`).
            check: unsafe {
                transmute::<
                    fn(&World<'_, P>) -> crate::model::Check,
                    fn(&World<'_, Erased>) -> crate::model::Check,
                >(i.check)
            },
        })
        .collect();
    let properties = properties
        .iter()
        .map(|p| Property {
            name: p.name,
            kind: p.kind,
            // SAFETY: a function pointer that differs only in the type behind
            // a reference argument, passed as a thin pointer either way; the
            // engine calls it only on values of the real type (see `Kind::of`).
            check: unsafe {
                transmute::<fn(&World<'_, P>) -> bool, fn(&World<'_, Erased>) -> bool>(p.check)
            },
        })
        .collect();
    // SAFETY: a function pointer that differs only in the type behind
    // a reference argument, passed as a thin pointer either way; the
    // engine calls it only on values of the real type (see `Kind::of`).
    let debug = debug.map(|d| unsafe { transmute::<fn(&P) -> String, fn(&Erased) -> String>(d) });
    Model {
        name: name.clone(),
        count: *count,
        init: Box::new(|_| {
            unreachable!("an erased model's processes are built by its kind (Kind::init)")
        }),
        network: network.clone(),
        invariants,
        properties,
        bounds: bounds.clone(),
        prune,
        prune_process,
        priority,
        quiescence_ok: *quiescence_ok,
        width: *width,
        fingerprint: *fingerprint,
        abstraction,
        strategy: *strategy,
        seed: *seed,
        keep_going: *keep_going,
        check_determinism: *check_determinism,
        determinism_runs: *determinism_runs,
        random_seeds: *random_seeds,
        detect_leaks: *detect_leaks,
        arena: arena.clone(),
        env_arena: env_arena.clone(),
        debug,
        transition_timeout: *transition_timeout,
        jobs: *jobs,
        cluster: *cluster,
        seed_given: *seed_given,
        visited_flags: visited_flags.clone(),
        without: without.clone(),
        por: *por,
        transition_cache: *transition_cache,
        guided_walks: *guided_walks,
        frontier_in_memory: *frontier_in_memory,
        symmetry: symmetry.clone(),
        reduce: *reduce,
        check_symmetry: *check_symmetry,
        typed_ids: typed_ids.clone(),
        hidden: hidden.clone(),
        unordered: unordered.clone(),
        erased: Some(Box::new(Kind::of(model)) as Box<dyn Any>),
    }
}

/// The link and key at the start of an entry of the network (the first
/// fields of the `repr(C)` `InFlight`, whatever its message type).
#[repr(C)]
pub(crate) struct Head {
    pub(crate) to: u32,
    pub(crate) from: u32,
    pub(crate) key: [u64; 2],
}

/// The messages in flight of an environment, read through its kind's
/// layout (see [`Kind::msgs`]).
pub(crate) struct Msgs<'a> {
    base: *const u8,
    len: usize,
    layout: MsgLayout,
    _env: std::marker::PhantomData<&'a ErasedEnv>,
}

impl<'a> Msgs<'a> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Entry `i`: its link and key, and its message.
    pub(crate) fn get(&self, i: usize) -> (&'a Head, &'a ErasedMsg) {
        assert!(i < self.len, "message {i} of {} in flight", self.len);
        // SAFETY: entry `i` of the live vector `base` points into (in
        // bounds: checked above), an `InFlight` of the kind's message type,
        // which starts with a `Head` (`repr(C)`) and holds its message at
        // `offset`; the environment outlives `'a`.
        unsafe {
            let entry = self.base.add(i * self.layout.stride);
            (
                &*entry.cast::<Head>(),
                &*entry.add(self.layout.offset).cast::<ErasedMsg>(),
            )
        }
    }

    /// Every entry, in the network's order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&'a Head, &'a ErasedMsg)> + '_ {
        (0..self.len).map(|i| self.get(i))
    }
}
