//! Macros of cmc: the attributes `#[cmc::process]` (with its helper
//! attributes `#[handler]` and `#[invariant]`), `#[cmc::invariant]` and
//! `#[cmc::model]`, `#[cmc::roles]`, and `#[derive(cmc::StateHash)]`.
//!
//! Use them through the runtime crate (`cmc::process`, ...), never from this
//! crate directly: the generated code names the runtime as `::cmc`.
//!
//! Every attribute checks what it can see (signatures, attribute keys) and
//! reports all mistakes at once, each at the code it is about; what it
//! cannot see (which function a guard path names, what type an invariant
//! returns) is checked by the compiler, with messages that say which
//! signatures are accepted. On error the item is emitted as written, so one
//! mistake does not cascade.

mod ast;
mod errors;
mod expand;
mod run;
mod state_hash;
mod validate;

#[cfg(test)]
mod tests;

use proc_macro::TokenStream;
use syn::parse_macro_input;

/// Implements [`cmc::Process`] for a type from an inherent impl block of
/// it: the methods marked `#[handler]` make the handler table, the methods
/// marked `#[invariant]` the per-process invariants.
///
/// ```text
/// #[cmc::process]                                   // Msg = (), Shared = ()
/// #[cmc::process(msg = MyMessage, shared = MyShared)]
/// ```
///
/// `msg` and `shared` set the associated types `Process::Msg` and
/// `Process::Shared`; each defaults to `()`.
///
/// # Handlers
///
/// Every method marked with one of
///
/// * `#[handler]`: enabled in every state;
/// * `#[handler(guard = path)]`: enabled where the guard returns true;
/// * `#[handler(timer = "name")]`: enabled while the process's timer `name`
///   is pending; running it is the timer's expiry;
///
/// is an entry of the handler table, named after the method (traces show
/// that name), in source order (the order the search tries them). A
/// handler's signature is one of
///
/// ```text
/// fn name(&mut self, ctx: &mut Ctx<Self>)   // any lifetime: Ctx<'_, Self>, cmc::Ctx<'a, Self>
/// fn name(&mut self)                        // for handlers that need no context
/// ```
///
/// # Guards
///
/// A guard is either
///
/// * a function of the same impl block, written `guard = name` or
///   `guard = Self::name`, with one of the signatures
///   `fn(&self) -> bool` or `fn(&self, view: &View<Self>) -> bool`; the
///   macro reads its signature and reports a wrong one at the function; or
/// * any other path: a free function `fn(&T) -> bool` or
///   `fn(&T, &View<T>) -> bool` where `T` is the process type, or
///   `Self::name` for a method of another impl block of the type. Which of
///   the two forms it has is left to type checking, which reports a path that
///   names nothing, or a function of neither form, at the path.
///
/// A guard may be the guard of several handlers. Guards are not marked; the
/// macro leaves them as they are.
///
/// # Invariants
///
/// Every method marked `#[invariant]` is checked on every process of the
/// type in every new state, under its method's name. Its signature is one of
///
/// ```text
/// fn name(&self) -> bool               // false is a violation: "returned false"
/// fn name(&self) -> Result<(), E>      // E: Display; Err(e) is a violation with e's message
/// ```
///
/// (any type that is one of these, such as `cmc::Check`, will do).
///
/// # Rules
///
/// * The attribute goes on an inherent impl block (not a trait impl, not a
///   type definition), and on only one impl block per type (each implements
///   `Process`). Other impl blocks of the type may hold guards.
/// * Generic process types are not supported: the table is built for one
///   concrete type. Put the attribute on an impl block of a concrete type,
///   for instance through an alias (`type Node = Generic<u8>; impl Node`).
/// * A method is at most one handler or one invariant: marking it
///   `#[handler]` twice, or both `#[handler]` and `#[invariant]`, is an
///   error, since handler names identify table entries in traces.
/// * A process needs at least one handler.
/// * `#[cfg(..)]` on a marked method applies to its table entry too.
///
/// # Example
///
/// Two counters that count to 2 and stop: 9 states.
///
/// ```
/// use cmc::{Model, Verdict};
///
/// #[global_allocator]
/// static A: cmc::Allocator = cmc::Allocator;
///
/// struct Counter {
///     value: u8,
/// }
///
/// #[cmc::process]
/// impl Counter {
///     #[handler(guard = below_two)]
///     fn inc(&mut self) {
///         self.value += 1;
///     }
///
///     fn below_two(&self) -> bool {
///         self.value < 2
///     }
///
///     #[invariant]
///     fn at_most_two(&self) -> bool {
///         self.value <= 2
///     }
/// }
///
/// fn main() {
///     let result = Model::new("counters", 2, |_| Counter { value: 0 })
///         .quiescence_ok(true)
///         .check()
///         .unwrap();
///     assert_eq!(result.verdict, Verdict::Pass);
///     assert_eq!(result.stats.unique, 9);
/// }
/// ```
///
/// Every form at once: messages, shared variables, a timer, guards of both
/// forms in the impl block and outside it, invariants of both forms.
///
/// ```no_run
/// use cmc::{Ctx, Model, NetworkConfig, View};
///
/// #[global_allocator]
/// static A: cmc::Allocator = cmc::Allocator;
///
/// #[derive(Clone, Debug, PartialEq, Eq, Hash)]
/// enum Ball {
///     Ping(u8),
///     Pong(u8),
/// }
///
/// #[derive(Default)]
/// struct Score {
///     rallies: u8,
/// }
///
/// struct Player {
///     count: u8,
///     waiting: bool,
/// }
///
/// #[cmc::process(msg = Ball, shared = Score)]
/// impl Player {
///     #[handler(guard = can_serve)]
///     fn serve(&mut self, ctx: &mut Ctx<'_, Self>) {
///         let _ = ctx.send(1, Ball::Ping(self.count));
///         self.waiting = true;
///         ctx.set_timer("resend");
///     }
///
///     fn can_serve(&self, view: &View<'_, Self>) -> bool {
///         view.me() == 0 && !self.waiting && self.count < 2
///     }
///
///     #[handler(guard = has_mail)]
///     fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
///         match ctx.recv() {
///             Some((from, Ball::Ping(n))) => {
///                 let _ = ctx.send(from, Ball::Pong(n));
///             }
///             Some((_, Ball::Pong(n))) if self.waiting && n == self.count => {
///                 self.count += 1;
///                 self.waiting = false;
///                 ctx.cancel_timer("resend");
///                 ctx.with_shared(|s| s.rallies += 1);
///             }
///             _ => {}
///         }
///     }
///
///     #[handler(timer = "resend")]
///     fn resend(&mut self, ctx: &mut Ctx<'_, Self>) {
///         let _ = ctx.send(1, Ball::Ping(self.count));
///         ctx.set_timer("resend");
///     }
///
///     #[invariant]
///     fn count_bounded(&self) -> Result<(), String> {
///         if self.count <= 2 {
///             Ok(())
///         } else {
///             Err(format!("count is {}", self.count))
///         }
///     }
/// }
///
/// fn has_mail(_: &Player, view: &View<'_, Player>) -> bool {
///     view.has_mail()
/// }
///
/// fn main() {
///     let model = Model::new("ping_pong", 2, |_| Player { count: 0, waiting: false })
///         .network(NetworkConfig::new().capacity(2).lossy(true))
///         .quiescence_ok(true);
///     println!("{}", model.check().unwrap().summary());
/// }
/// ```
///
/// [`cmc::Process`]: https://docs.rs/cmc-runtime/latest/cmc/trait.Process.html
#[proc_macro_attribute]
pub fn process(args: TokenStream, input: TokenStream) -> TokenStream {
    let item = parse_macro_input!(input as syn::Item);
    run::process(args.into(), &item).into()
}

/// Registers a global invariant: a free function that sees every process
/// and the environment of a state.
///
/// ```text
/// fn name(world: &World<T>) -> bool            // false is a violation: "returned false"
/// fn name(world: &World<T>) -> Result<(), E>   // E: Display, such as cmc::Check
/// ```
///
/// (`World<'_, T>` and `cmc::World<T>` are the same.) The function stays as
/// written; the registration makes it apply to **every model whose process
/// type is `T`**, checked and registered ones alike, under the function's
/// name. To check a property in only some models, add it to those with
/// [`Model::invariant`] instead.
///
/// # Example
///
/// ```
/// use cmc::{Model, Verdict, ViolationKind, World};
///
/// #[global_allocator]
/// static A: cmc::Allocator = cmc::Allocator;
///
/// struct Tally {
///     n: u8,
/// }
///
/// #[cmc::process]
/// impl Tally {
///     #[handler(guard = below_three)]
///     fn bump(&mut self) {
///         self.n += 1;
///     }
///
///     fn below_three(&self) -> bool {
///         self.n < 3
///     }
/// }
///
/// #[cmc::invariant]
/// fn sum_below_five(world: &World<'_, Tally>) -> Result<(), String> {
///     let sum: u8 = world.processes().map(|t| t.n).sum();
///     if sum < 5 {
///         Ok(())
///     } else {
///         Err(format!("the tallies sum to {sum}"))
///     }
/// }
///
/// fn main() {
///     let result = Model::new("tallies", 2, |_| Tally { n: 0 })
///         .quiescence_ok(true)
///         .check()
///         .unwrap();
///     assert_eq!(result.verdict, Verdict::Violation);
///     let record = &result.violations[0].record;
///     assert_eq!(record.kind, ViolationKind::Invariant);
///     assert_eq!(record.property, "sum_below_five");
///     assert_eq!(record.message, "the tallies sum to 5");
/// }
/// ```
///
/// [`Model::invariant`]: https://docs.rs/cmc-runtime/latest/cmc/struct.Model.html#method.invariant
#[proc_macro_attribute]
pub fn invariant(args: TokenStream, input: TokenStream) -> TokenStream {
    let item = parse_macro_input!(input as syn::Item);
    run::invariant(args.into(), &item).into()
}

/// Registers a reachability property for every model whose processes are
/// of the type its `World` is over: some reachable state satisfies it
/// (`Model::sometimes` adds one to a single model). The function has the
/// shape of a global invariant, `fn(world: &World<P>) -> bool` (or a
/// `Result`, `Ok` meaning "holds"). The search reports a trace to a state
/// where it holds; a complete search that never reaches one reports a
/// `never_reached` violation.
///
/// ```
/// use cmc::{Model, Verdict, World};
///
/// #[global_allocator]
/// static A: cmc::Allocator = cmc::Allocator;
///
/// struct Tally {
///     n: u8,
/// }
///
/// #[cmc::process]
/// impl Tally {
///     #[handler(guard = below_three)]
///     fn bump(&mut self) {
///         self.n += 1;
///     }
///
///     fn below_three(&self) -> bool {
///         self.n < 3
///     }
/// }
///
/// #[cmc::sometimes]
/// fn both_at_three(world: &World<'_, Tally>) -> bool {
///     world.processes().all(|t| t.n == 3)
/// }
///
/// fn main() {
///     let result = Model::new("tallies", 2, |_| Tally { n: 0 })
///         .quiescence_ok(true)
///         .check()
///         .unwrap();
///     assert_eq!(result.verdict, Verdict::Pass, "{:?}", result.violations);
///     assert_eq!(result.reached[0].property, "both_at_three");
///     assert_eq!(result.reached[0].trace.steps.len(), 6);
/// }
/// ```
#[proc_macro_attribute]
pub fn sometimes(args: TokenStream, input: TokenStream) -> TokenStream {
    let item = parse_macro_input!(input as syn::Item);
    run::property(args.into(), &item, "sometimes").into()
}

/// Registers a liveness property for every model whose processes are of
/// the type its `World` is over: every execution reaches a state that
/// satisfies it (`Model::eventually` adds one to a single model). The
/// function has the shape of a global invariant. A counterexample is a
/// path to a cycle along which the property never holds (a *lasso*), or to
/// a state without successor; handlers marked `#[handler(fair)]` cannot be
/// starved by the cycle.
///
/// ```
/// use cmc::{Model, Verdict, ViolationKind, World};
///
/// #[global_allocator]
/// static A: cmc::Allocator = cmc::Allocator;
///
/// struct Worker {
///     done: bool,
/// }
///
/// #[cmc::process]
/// impl Worker {
///     // Busy work that could go on forever.
///     #[handler(guard = working)]
///     fn poll(&mut self) {}
///
///     #[handler(guard = working)]
///     fn finish(&mut self) {
///         self.done = true;
///     }
///
///     fn working(&self) -> bool {
///         !self.done
///     }
/// }
///
/// #[cmc::eventually]
/// fn all_done(world: &World<'_, Worker>) -> bool {
///     world.processes().all(|w| w.done)
/// }
///
/// fn main() {
///     let result = Model::new("workers", 2, |_| Worker { done: false })
///         .quiescence_ok(true)
///         .check()
///         .unwrap();
///     // `poll` forever is an execution where not all are done: a lasso.
///     assert_eq!(result.verdict, Verdict::Violation);
///     let v = &result.violations[0];
///     assert_eq!(v.record.kind, ViolationKind::Liveness);
///     assert!(v.trace.loop_start.is_some());
///
///     // With `finish` fair, that lasso starves it (it stays enabled and
///     // never runs): not a counterexample, and the model passes.
///     let result = Model::new("fair_workers", 2, |_| FairWorker { done: false })
///         .quiescence_ok(true)
///         .check()
///         .unwrap();
///     assert_eq!(result.verdict, Verdict::Pass);
/// }
///
/// struct FairWorker {
///     done: bool,
/// }
///
/// #[cmc::process]
/// impl FairWorker {
///     #[handler(guard = working)]
///     fn poll(&mut self) {}
///
///     #[handler(fair, guard = working)]
///     fn finish(&mut self) {
///         self.done = true;
///     }
///
///     fn working(&self) -> bool {
///         !self.done
///     }
/// }
///
/// #[cmc::eventually]
/// fn all_fair_done(world: &World<'_, FairWorker>) -> bool {
///     world.processes().all(|w| w.done)
/// }
/// ```
#[proc_macro_attribute]
pub fn eventually(args: TokenStream, input: TokenStream) -> TokenStream {
    let item = parse_macro_input!(input as syn::Item);
    run::property(args.into(), &item, "eventually").into()
}

/// Makes an enum whose variants each wrap a process type into one process
/// type with several *roles*: a client and a server, a sender and a
/// receiver, in one model.
///
/// ```text
/// #[cmc::roles]
/// enum Node {
///     Client(Client),   // Client: #[cmc::process(msg = Msg)]
///     Server(Server),   // Server: #[cmc::process(msg = Msg)]
/// }
/// ```
///
/// The enum stays as written; the attribute implements `cmc::Process` for
/// it:
///
/// * its handler table is each role's table in turn, variant order, and a
///   role's handlers are given only to the processes of that role
///   (`Handler::applies`): a guard, a timer or a start handler of `Client`
///   never concerns a server, and two roles may use the same timer name or
///   handler name. Traces name them `Client::request`, the variant's name
///   and the role's handler name;
/// * a handler, guard or invariant of a role runs on the variant's value
///   with the role's own `Ctx` and `View`: the role's code is written as
///   if it were the only process type;
/// * each role's invariants are checked on the processes of that role
///   (`Client::ids_unique` in reports);
/// * a process's identity comes from its role's own sources (`StateHash`,
///   `Hash`, `Debug`): the enum offers a source when every role does, and
///   hashes the role's index, then the value by the role's source.
///
/// Processes are numbered as the model builds them (`Model::new(name, n,
/// |i| ...)` returns one variant or another for each `i`) and address each
/// other by that number, as without roles; `World::process(i)` is the
/// enum, to match on in global invariants.
///
/// # Rules
///
/// * Every variant is a tuple variant with one field, the role's process
///   type (`#[cmc::process]` or a hand-written `impl Process`); the enum is
///   not generic.
/// * Every role has the message type and the shared-variables type of the
///   first: a role with others is an error at its type.
/// * A role has at most 64 handlers and 64 invariants.
///
/// # Example
///
/// A client asks a server for a number; the server answers each request.
///
/// ```
/// use cmc::{Ctx, Model, Verdict, View};
///
/// #[global_allocator]
/// static A: cmc::Allocator = cmc::Allocator;
///
/// #[derive(Clone, Debug, Hash)]
/// enum Msg {
///     Request,
///     Reply(u8),
/// }
///
/// #[derive(Debug, Hash)]
/// struct Client {
///     server: usize,
///     answer: Option<u8>,
/// }
///
/// #[cmc::process(msg = Msg)]
/// impl Client {
///     #[handler(start)]
///     fn ask(&mut self, ctx: &mut Ctx<'_, Self>) {
///         let _ = ctx.send(self.server, Msg::Request);
///     }
///
///     #[handler(guard = has_mail)]
///     fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
///         if let Some((_, Msg::Reply(n))) = ctx.recv() {
///             self.answer = Some(n);
///         }
///     }
///
///     fn has_mail(&self, view: &View<'_, Self>) -> bool {
///         view.has_mail()
///     }
/// }
///
/// #[derive(Debug, Hash)]
/// struct Server {
///     served: u8,
/// }
///
/// #[cmc::process(msg = Msg)]
/// impl Server {
///     #[handler(guard = has_mail)]
///     fn receive(&mut self, ctx: &mut Ctx<'_, Self>) {
///         if let Some((client, Msg::Request)) = ctx.recv() {
///             self.served += 1;
///             let _ = ctx.send(client, Msg::Reply(self.served));
///         }
///     }
///
///     fn has_mail(&self, view: &View<'_, Self>) -> bool {
///         view.has_mail()
///     }
/// }
///
/// #[cmc::roles]
/// #[derive(Debug)]
/// enum Node {
///     Client(Client),
///     Server(Server),
/// }
///
/// fn main() {
///     let model = Model::new("ask", 3, |i| match i {
///         0 => Node::Server(Server { served: 0 }),
///         _ => Node::Client(Client { server: 0, answer: None }),
///     });
///     let result = model.quiescence_ok(true).check().unwrap();
///     assert_eq!(result.verdict, Verdict::Pass);
/// }
/// ```
#[proc_macro_attribute]
pub fn roles(args: TokenStream, input: TokenStream) -> TokenStream {
    let item = parse_macro_input!(input as syn::Item);
    run::roles(args.into(), &item).into()
}

/// Registers a model: a function with no arguments that returns a
/// `cmc::Model<P>`.
///
/// ```text
/// fn name() -> Model<P>
/// ```
///
/// The function stays as written. The model is registered under its full
/// path, `crate::module::name` (what `module_path!()` gives, then the
/// function's name), which replaces the name given to `Model::new`; a
/// harness such as `cargo cmc` lists the registered models with
/// `cmc::registry::models()`, builds one by calling the function and checks
/// it with its own options.
///
/// # Example
///
/// ```
/// use cmc::registry::{models, RunOptions};
/// use cmc::{Model, Verdict};
///
/// #[global_allocator]
/// static A: cmc::Allocator = cmc::Allocator;
///
/// struct Counter {
///     value: u8,
/// }
///
/// #[cmc::process]
/// impl Counter {
///     #[handler]
///     fn inc(&mut self) {
///         self.value = (self.value + 1) % 3;
///     }
/// }
///
/// #[cmc::model]
/// fn counters() -> Model<Counter> {
///     Model::new("counters", 2, |_| Counter { value: 0 })
/// }
///
/// fn main() {
///     let all = models();
///     let entry = all.iter().find(|m| m.path.ends_with("::counters")).unwrap();
///     let result = entry.check(&RunOptions::default()).unwrap();
///     assert_eq!(result.model, entry.path);
///     assert_eq!(result.verdict, Verdict::Pass);
///     assert_eq!(result.stats.unique, 9);
/// }
/// ```
#[proc_macro_attribute]
pub fn model(args: TokenStream, input: TokenStream) -> TokenStream {
    let item = parse_macro_input!(input as syn::Item);
    run::model(args.into(), &item).into()
}

/// Derives `cmc::StateHash`: the value's contribution to a state
/// fingerprint, field by field in declaration order (for an enum, the
/// variant's index, then its fields).
///
/// Each field is hashed by the best source its type offers: its own
/// `cmc::StateHash` (cmc implements it for the standard collections, which
/// then count by their contents), else its `Hash`, else its `Debug`,
/// canonicalized (maps and sets printed in any order count as the same). A
/// field whose type has none of the three is a compile error at the field.
///
/// Mark a field `#[cmc(skip)]` to leave it out of the state: a cache, a
/// statistic, anything that never changes what the process does next. Two
/// states that differ only there are explored once.
///
/// Type parameters get a `StateHash` bound.
///
/// ```
/// use std::collections::{HashMap, VecDeque};
///
/// #[derive(Debug, cmc::StateHash)]
/// struct Router {
///     routes: HashMap<u32, u32>,
///     queue: VecDeque<Vec<u8>>,
///     #[cmc(skip)]
///     forwarded: u64,
/// }
///
/// #[derive(Debug, cmc::StateHash)]
/// enum Role {
///     Follower { leader: Option<u32> },
///     Candidate(u32),
///     Leader,
/// }
/// # fn main() {}
/// ```
#[proc_macro_derive(StateHash, attributes(cmc))]
pub fn derive_state_hash(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as syn::DeriveInput);
    state_hash::derive(&input).into()
}

/// Derives `cmc::ProcessId` (and `cmc::StateHash`) for a newtype of an
/// integer that names processes: under symmetry reduction
/// (`Model::interchangeable`) every value of it a state holds is renamed
/// with the processes.
///
/// ```
/// #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, cmc::ProcessId)]
/// struct NodeId(u64);
///
/// use cmc::ProcessId;
/// assert_eq!(NodeId(3).process_id(), 3);
/// ```
#[proc_macro_derive(ProcessId)]
pub fn derive_process_id(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as syn::DeriveInput);
    state_hash::derive_process_id(&input).into()
}
