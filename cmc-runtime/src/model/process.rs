//! A process type and its handler table: the [`Process`] trait that
//! `#[cmc::process]` implements, handlers with their guards, per-process
//! invariants, the sources of identity the macros detect, and the two
//! things a handler and a guard are given, [`Ctx`] and [`View`] (their
//! methods are in `model::ctx`).

use std::fmt;

use crate::identity::Sources;
use crate::memory::{ArenaId, Memory};
use crate::model::env::{Env, Message, NetworkConfig};

pub use crate::identity::HashFn;

/// A process type: its handlers and invariants. Its state is captured from
/// memory, so it needs no `Clone`, `Hash`, `Eq` or `Serialize`.
///
/// `#[cmc::process]` implements this trait; it can also be written by hand.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a cmc process type",
    label = "not a process type",
    note = "put #[cmc::process] on an impl block of `{Self}` whose methods marked #[handler] are its steps"
)]
pub trait Process: Sized + 'static {
    /// The messages processes of this type exchange (`()` when none).
    type Msg: Message;

    /// Variables shared by all processes (`()` when none). They live in the
    /// environment's arena; handlers read them with [`Ctx::shared`] and
    /// change them with [`Ctx::with_shared`].
    type Shared: Default + 'static;

    /// The handler table, in the order the search tries handlers.
    fn handlers() -> Vec<Handler<Self>>;

    /// Invariants checked on every process of this type in every new state.
    fn invariants() -> Vec<Invariant<Self>> {
        Vec::new()
    }

    /// The sources of identity the process type, its shared variables and
    /// its messages offer (`StateHash`, `Hash`, `Debug`):
    /// `#[cmc::process]` detects them. The default knows only that messages
    /// have a `Debug`; hand-written implementations may say more.
    fn hash_fns() -> HashFns<Self> {
        HashFns::none()
    }
}

/// The body of a handler.
pub type Body<P> = fn(&mut P, &mut Ctx<'_, P>);
/// A guard: the handler may run in a state only when it returns true.
pub type Guard<P> = fn(&P, &View<'_, P>) -> bool;

/// When a handler is enabled.
pub enum Trigger<P: Process> {
    /// In every state.
    Always,
    /// When the guard holds.
    Guard(Guard<P>),
    /// When the process's timer of this name is pending: running the
    /// handler is the timer's expiry (the timer is cancelled first).
    Timer(&'static str),
    /// Once, when the model starts: after every process and the
    /// environment are built, before the initial state is taken, in
    /// process order. Such a handler sets the first timers and sends the
    /// first messages; it cannot make choices (see [`Handler::on_start`]).
    Start,
}

impl<P: Process> Clone for Trigger<P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P: Process> Copy for Trigger<P> {}

impl<P: Process> fmt::Debug for Trigger<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trigger::Always => f.write_str("Always"),
            Trigger::Guard(_) => f.write_str("Guard"),
            Trigger::Timer(t) => write!(f, "Timer({t:?})"),
            Trigger::Start => f.write_str("Start"),
        }
    }
}

/// One entry of a handler table.
pub struct Handler<P: Process> {
    /// The name traces show (the method name, for generated tables).
    pub name: &'static str,
    /// When it is enabled.
    pub trigger: Trigger<P>,
    /// What it does.
    pub body: Body<P>,
    /// Whether it runs under weak fairness (see [`Handler::fair`]).
    pub fair: bool,
    /// Which processes have the handler: all (`None`), or those where the
    /// function holds (see [`Handler::applies`]).
    pub applies: Option<fn(&P) -> bool>,
}

impl<P: Process> Handler<P> {
    /// A handler enabled in every state.
    pub fn new(name: &'static str, body: Body<P>) -> Self {
        Handler {
            name,
            trigger: Trigger::Always,
            body,
            fair: false,
            applies: None,
        }
    }

    /// Gives the handler only to the processes where `applies` holds: in
    /// the others it is never enabled, whatever its trigger (a timer of
    /// the same name there is another handler's), and a start handler does
    /// not run. It says what kind of process this is, not what state it
    /// is in, so it must give the same answer in every state. A
    /// `#[cmc::roles]` enum gives each role's handlers to the processes of
    /// that role this way.
    pub fn applies(mut self, applies: fn(&P) -> bool) -> Self {
        self.applies = Some(applies);
        self
    }

    /// Whether the handler is one of `process`'s (see [`Handler::applies`]).
    pub(crate) fn applies_to(&self, process: &P) -> bool {
        self.applies.is_none_or(|applies| applies(process))
    }

    /// Puts the handler under weak fairness for liveness properties
    /// ([`Model::eventually`](crate::Model::eventually)): an execution in which it stays enabled in
    /// one process forever without ever running there is not a
    /// counterexample (`#[handler(fair)]` in a `#[cmc::process]` block).
    pub fn fair(mut self) -> Self {
        self.fair = true;
        self
    }

    /// Enables the handler only where `guard` holds.
    pub fn guard(mut self, guard: Guard<P>) -> Self {
        self.trigger = Trigger::Guard(guard);
        self
    }

    /// Makes the handler the expiry of the timer `name`.
    pub fn on_timer(mut self, name: &'static str) -> Self {
        self.trigger = Trigger::Timer(name);
        self
    }

    /// Runs the handler once per process when the model starts, before the
    /// initial state (`#[handler(start)]`): where a process arms its first
    /// timers and sends its first messages, which a constructor cannot (it
    /// has no `Ctx`). It is part of building the initial state, not an
    /// event of the search; `cmc::choose` and `recv` are refused there
    /// (the initial state is one state).
    pub fn on_start(mut self) -> Self {
        self.trigger = Trigger::Start;
        self
    }
}

impl<P: Process> Clone for Handler<P> {
    fn clone(&self) -> Self {
        Handler {
            fair: self.fair,
            name: self.name,
            trigger: self.trigger,
            body: self.body,
            applies: self.applies,
        }
    }
}

impl<P: Process> fmt::Debug for Handler<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handler")
            .field("name", &self.name)
            .field("trigger", &self.trigger)
            .field("applies", &self.applies.is_some())
            .finish()
    }
}

/// What an invariant returns: `Err(message)` when it is violated.
pub type Check = Result<(), String>;

/// A per-process invariant.
pub struct Invariant<P> {
    /// Its name in reports.
    pub name: &'static str,
    /// The check.
    pub check: fn(&P) -> Check,
}

impl<P> Invariant<P> {
    /// An invariant named `name`.
    pub fn new(name: &'static str, check: fn(&P) -> Check) -> Self {
        Invariant { name, check }
    }
}

impl<P> Clone for Invariant<P> {
    fn clone(&self) -> Self {
        Invariant {
            name: self.name,
            check: self.check,
        }
    }
}

impl<P> fmt::Debug for Invariant<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Invariant")
            .field("name", &self.name)
            .finish()
    }
}

/// The sources of identity a process type, its shared variables and its
/// messages offer (filled in by `#[cmc::process]`, which detects them).
pub struct HashFns<P: Process> {
    /// The process type's.
    pub process: Sources<P>,
    /// The shared variables'.
    pub shared: Sources<P::Shared>,
    /// The message type's.
    pub msg: Sources<P::Msg>,
}

impl<P: Process> HashFns<P> {
    /// Nothing known but what every message has: a `Debug`.
    pub fn none() -> Self {
        HashFns {
            process: Sources::none(),
            shared: Sources::none(),
            msg: Sources::debug_only(),
        }
    }
}

impl<P: Process> fmt::Debug for HashFns<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HashFns")
            .field("process", &self.process)
            .field("shared", &self.shared)
            .field("msg", &self.msg)
            .finish()
    }
}

/// The context of a running handler: who it is, the network, the timers.
#[repr(C)] // the same layout for every `P` (see `engine::erased`)
pub struct Ctx<'a, P: Process> {
    pub(crate) me: usize,
    pub(crate) count: usize,
    pub(crate) env: *mut Env<P::Msg, P::Shared>,
    pub(crate) mem: &'a Memory,
    pub(crate) env_arena: ArenaId,
    pub(crate) net: &'a NetworkConfig,
}

impl<P: Process> fmt::Debug for Ctx<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ctx")
            .field("me", &self.me)
            .field("processes", &self.count)
            .finish_non_exhaustive()
    }
}

/// What a guard sees besides its process: read-only facts about the
/// environment.
#[repr(C)] // the same layout for every `P` (see `engine::erased`)
pub struct View<'a, P: Process> {
    pub(crate) me: usize,
    pub(crate) count: usize,
    pub(crate) env: &'a Env<P::Msg, P::Shared>,
}

impl<P: Process> fmt::Debug for View<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("View")
            .field("me", &self.me)
            .finish_non_exhaustive()
    }
}
