//! Several kinds of process in one model: what `#[cmc::roles]` generates
//! code against.
//!
//! A roles enum has one variant per role, each wrapping a process type of
//! its own (`Client(Client)`, `Server(Server)`). Its handler table is the
//! concatenation of the roles' tables: entry `k` of role `I` becomes a
//! handler of the enum whose body, guard and applicability are the
//! functions `body::<O, R, I, k>`, `guard::<O, R, I, k>` and
//! `applies::<O, R, I, k>` below (`R` the role's type). Those look the role's own entry up in a table
//! built once (`Role::tables`) and call it on the variant's value, with the
//! `Ctx` or `View` narrowed to the role's type. A table entry must be a
//! plain function pointer (`Body`, `Guard`, `fn(&P) -> Check`), which
//! cannot capture which entry it stands for: the index is a const generic
//! parameter instead, so a role may have at most [`MAX_ENTRIES`] handlers
//! and as many invariants.
//!
//! Every lifted handler carries `applies`: it is enabled only in processes
//! of its role (the engine checks it before the trigger), so two roles that
//! use the same timer name each fire only their own handler. A process's
//! role never changes: the handlers of a role only ever get a `&mut` of the
//! variant's value, never of the enum.

use std::hash::Hasher;
use std::sync::OnceLock;

use crate::model::process::{Ctx, View};
use crate::model::{
    Body, Check, FingerprintMode, Guard, Handler, Invariant, Process, StateHasher, Trigger,
};
use crate::sys::scope::system_scope;

/// The most handlers, and the most invariants, one role may have.
pub const MAX_ENTRIES: usize = 64;

/// Variant `I` of a `#[cmc::roles]` enum `Self`: it holds a process of type
/// `R`, which exchanges the same messages and shares the same variables as
/// every other role. Implemented by the macro. (The role's type is a
/// parameter, not an associated type: an associated type of a public impl
/// may not be private, and a public enum may wrap private role types.)
pub trait Role<const I: usize, R: Process>: Process {
    /// The variant's name: handlers and invariants of the role are shown
    /// as `Name::handler` in traces and reports.
    const NAME: &'static str;

    /// The role's value, when the process has this role.
    fn get(&self) -> Option<&R>;

    /// The role's value, when the process has this role.
    fn get_mut(&mut self) -> Option<&mut R>;

    /// How the enum's `Ctx` and `View` become the role's: this is where
    /// the role's message and shared-variables types must be the enum's
    /// (`Narrowing::new` requires it), so a role with others is one error,
    /// at the variant.
    fn narrowing() -> Narrowing<Self, R>;

    /// The role's tables, built once (the macro keeps them in a static of
    /// the generated impl: [`OnceLock::get_or_init`] with [`RoleTables::new`]).
    fn tables() -> &'static RoleTables<R>;
}

/// A role's handler table and invariants, with the names the enum's
/// tables show.
#[derive(Debug)]
pub struct RoleTables<R: Process> {
    handlers: Vec<Handler<R>>,
    invariants: Vec<Invariant<R>>,
    /// `Role::handler`, for each handler.
    handler_names: Vec<&'static str>,
    /// `Role::invariant`, for each invariant.
    invariant_names: Vec<&'static str>,
}

impl<R: Process> RoleTables<R> {
    /// The tables of the role named `role`: `R`'s handlers and invariants.
    /// Built in checker memory, whatever arena is current.
    pub fn new(role: &'static str) -> Self {
        let _sys = system_scope();
        let handlers = R::handlers();
        let invariants = R::invariants();
        // Leaked once per role and process of the checker: the names are
        // `&'static str` in every table, and the tables are built once.
        let qualify = |name: &str| -> &'static str { format!("{role}::{name}").leak() };
        RoleTables {
            handler_names: handlers.iter().map(|h| qualify(h.name)).collect(),
            invariant_names: invariants.iter().map(|i| qualify(i.name)).collect(),
            handlers,
            invariants,
        }
    }

    /// The cell a generated impl keeps the tables in.
    pub fn cell() -> OnceLock<Self> {
        OnceLock::new()
    }
}

/// The functions that stand for entry `k` of role `I` in the enum `O`'s
/// tables, one array per kind, indexed by `k`.
struct Lifted<O, R, const I: usize>(std::marker::PhantomData<(O, R)>);

macro_rules! lifted {
    ($($k:literal)*) => {
        impl<O, R, const I: usize> Lifted<O, R, I>
        where
            O: Role<I, R>,
            R: Process,
        {
            const BODIES: [Body<O>; MAX_ENTRIES] = [$(body::<O, R, I, $k>),*];
            const GUARDS: [Guard<O>; MAX_ENTRIES] = [$(guard::<O, R, I, $k>),*];
            const APPLIES: [fn(&O) -> bool; MAX_ENTRIES] = [$(applies::<O, R, I, $k>),*];
            const INVARIANTS: [fn(&O) -> Check; MAX_ENTRIES] = [$(invariant::<O, R, I, $k>),*];
        }
    };
}

lifted!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
    32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
);

/// Whether the process has role `I`.
fn is_role<O, R, const I: usize>(this: &O) -> bool
where
    O: Role<I, R>,
    R: Process,
{
    this.get().is_some()
}

/// Handler `K` of role `I`, on a process of that role.
fn body<O, R, const I: usize, const K: usize>(this: &mut O, ctx: &mut Ctx<'_, O>)
where
    O: Role<I, R>,
    R: Process,
{
    let body = <O as Role<I, R>>::tables().handlers[K].body;
    let Some(inner) = this.get_mut() else {
        // The engine runs a handler only where `applies` holds.
        panic!(
            "cmc: handler {} ran on a process that is not a {}",
            <O as Role<I, R>>::tables().handler_names[K],
            <O as Role<I, R>>::NAME
        );
    };
    let narrow = <O as Role<I, R>>::narrowing().ctx;
    body(inner, &mut narrow(ctx))
}

/// The guard of handler `K` of role `I`: false on other roles.
fn guard<O, R, const I: usize, const K: usize>(this: &O, view: &View<'_, O>) -> bool
where
    O: Role<I, R>,
    R: Process,
{
    match (this.get(), <O as Role<I, R>>::tables().handlers[K].trigger) {
        (Some(inner), Trigger::Guard(guard)) => {
            let narrow = <O as Role<I, R>>::narrowing().view;
            guard(inner, &narrow(view))
        }
        _ => false,
    }
}

/// Whether handler `K` of role `I` applies to the process: it has the role,
/// and the role's own entry applies to it (a role may itself be a roles
/// enum).
fn applies<O, R, const I: usize, const K: usize>(this: &O) -> bool
where
    O: Role<I, R>,
    R: Process,
{
    match (this.get(), <O as Role<I, R>>::tables().handlers[K].applies) {
        (Some(inner), Some(applies)) => applies(inner),
        (inner, None) => inner.is_some(),
        (None, Some(_)) => false,
    }
}

/// Invariant `K` of role `I`: holds trivially on other roles.
fn invariant<O, R, const I: usize, const K: usize>(this: &O) -> Check
where
    O: Role<I, R>,
    R: Process,
{
    match this.get() {
        Some(inner) => (<O as Role<I, R>>::tables().invariants[K].check)(inner),
        None => Ok(()),
    }
}

/// Appends role `I`'s handlers to the enum's table, each applying only to
/// processes of that role and named `Role::handler`.
///
/// # Panics
/// When the role has more than [`MAX_ENTRIES`] handlers (the engine turns
/// the panic into a model error).
pub fn lift_handlers<O, R, const I: usize>(table: &mut Vec<Handler<O>>)
where
    O: Role<I, R>,
    R: Process,
{
    let tables = <O as Role<I, R>>::tables();
    assert!(
        tables.handlers.len() <= MAX_ENTRIES,
        "role `{}` has {} handlers; a role of a #[cmc::roles] enum may have at most {MAX_ENTRIES}",
        <O as Role<I, R>>::NAME,
        tables.handlers.len()
    );
    for (k, h) in tables.handlers.iter().enumerate() {
        let trigger = match h.trigger {
            Trigger::Always => Trigger::Always,
            Trigger::Guard(_) => Trigger::Guard(Lifted::<O, R, I>::GUARDS[k]),
            Trigger::Timer(name) => Trigger::Timer(name),
            Trigger::Start => Trigger::Start,
        };
        let applies = match h.applies {
            None => is_role::<O, R, I>,
            Some(_) => Lifted::<O, R, I>::APPLIES[k],
        };
        table.push(Handler {
            name: tables.handler_names[k],
            trigger,
            body: Lifted::<O, R, I>::BODIES[k],
            fair: h.fair,
            applies: Some(applies),
        });
    }
}

/// Appends role `I`'s invariants to the enum's, each holding trivially on
/// processes of other roles and named `Role::invariant`.
///
/// # Panics
/// When the role has more than [`MAX_ENTRIES`] invariants.
pub fn lift_invariants<O, R, const I: usize>(table: &mut Vec<Invariant<O>>)
where
    O: Role<I, R>,
    R: Process,
{
    let tables = <O as Role<I, R>>::tables();
    assert!(
        tables.invariants.len() <= MAX_ENTRIES,
        "role `{}` has {} invariants; a role of a #[cmc::roles] enum may have at most \
         {MAX_ENTRIES}",
        <O as Role<I, R>>::NAME,
        tables.invariants.len()
    );
    for k in 0..tables.invariants.len() {
        table.push(Invariant::new(
            tables.invariant_names[k],
            Lifted::<O, R, I>::INVARIANTS[k],
        ));
    }
}

/// Whether role `I`'s process type offers the source `mode`.
pub fn role_has_source<O, R, const I: usize>(mode: FingerprintMode) -> bool
where
    O: Role<I, R>,
    R: Process,
{
    R::hash_fns().process.get(mode).is_some()
}

/// Hashes a process of role `I` by its role's source `mode`: the role's
/// index, then the value. The enum offers `mode` only when every role does
/// (see the generated `hash_fns`), so the source is there.
pub fn role_hash<O, R, const I: usize>(this: &O, hasher: &mut StateHasher, mode: FingerprintMode)
where
    O: Role<I, R>,
    R: Process,
{
    hasher.write_u32(I as u32);
    let Some(inner) = this.get() else {
        return;
    };
    if let Some(hash) = R::hash_fns().process.get(mode) {
        hash(inner, hasher);
    }
}

/// Turns the enum's `Ctx` and `View` into role `R`'s, which differ only in
/// their type (see `Ctx::narrow`, internal).
pub struct Narrowing<O: Process, R: Process> {
    ctx: for<'a, 'b> fn(&'a mut Ctx<'b, O>) -> Ctx<'a, R>,
    view: for<'a, 'b> fn(&'b View<'a, O>) -> View<'a, R>,
}

impl<O: Process, R: Process> Narrowing<O, R> {
    /// The narrowing, for a role that exchanges the enum's messages and
    /// shares its variables.
    #[allow(
        clippy::new_without_default,
        reason = "generated code calls it by this name, at the role's type, to check the types agree"
    )]
    pub fn new() -> Self
    where
        R: Process<Msg = O::Msg, Shared = O::Shared>,
    {
        Narrowing {
            ctx: narrow_ctx::<O, R>,
            view: narrow_view::<O, R>,
        }
    }
}

impl<O: Process, R: Process> std::fmt::Debug for Narrowing<O, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Narrowing")
    }
}

fn narrow_ctx<'a, O, R>(ctx: &'a mut Ctx<'_, O>) -> Ctx<'a, R>
where
    O: Process,
    R: Process<Msg = O::Msg, Shared = O::Shared>,
{
    ctx.narrow()
}

fn narrow_view<'a, O, R>(view: &View<'a, O>) -> View<'a, R>
where
    O: Process,
    R: Process<Msg = O::Msg, Shared = O::Shared>,
{
    view.narrow()
}
