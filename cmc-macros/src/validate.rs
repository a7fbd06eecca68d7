//! The rules: which signatures are handlers, guards and invariants, how a
//! guard path is resolved, what may not be combined. Produces the tables
//! `expand` turns into tokens; every mistake is recorded, none stops the
//! others from being found.

use std::collections::HashSet;

use quote::ToTokens;
use syn::ext::IdentExt;
use syn::{Attribute, Ident, LitStr, Path, Type};

use crate::ast::{self, FnShape, FreeFn, ProcessArgs, ProcessImpl, Receiver};
use crate::errors::Errors;

/// What `#[cmc::process]` implements `Process` with.
pub(crate) struct Table<'a> {
    pub(crate) self_ty: &'a Type,
    pub(crate) msg: Option<&'a Type>,
    pub(crate) shared: Option<&'a Type>,
    pub(crate) handlers: Vec<Handler<'a>>,
    pub(crate) invariants: Vec<Invariant<'a>>,
}

/// One handler table entry.
pub(crate) struct Handler<'a> {
    /// The method, whose name is the entry's name.
    pub(crate) method: &'a Ident,
    /// Whether it takes `ctx: &mut Ctx<Self>` (otherwise only `&mut self`).
    pub(crate) takes_ctx: bool,
    pub(crate) trigger: Trigger<'a>,
    /// `#[handler(fair)]`.
    pub(crate) fair: bool,
    pub(crate) cfgs: &'a [&'a Attribute],
}

/// When a handler is enabled.
pub(crate) enum Trigger<'a> {
    Always,
    Timer(&'a LitStr),
    Guard(Guard<'a>),
    /// `#[handler(start)]`: once, when the model starts.
    Start,
}

/// A guard, resolved.
pub(crate) enum Guard<'a> {
    /// A function of the same impl block, whose signature is known.
    Local {
        /// The path as written (for spans).
        path: &'a Path,
        name: &'a Ident,
        /// Whether it takes `&View<Self>` after the process.
        takes_view: bool,
    },
    /// Any other path: a free function or a function of another impl
    /// block, told apart by type checking.
    Foreign(&'a Path),
}

/// One per-process invariant.
pub(crate) struct Invariant<'a> {
    pub(crate) method: &'a Ident,
    /// Its return type: `bool` or `Result<(), E>`, checked by type checking.
    pub(crate) output: &'a Type,
    pub(crate) cfgs: &'a [&'a Attribute],
}

/// Validates an impl block under `#[cmc::process]`.
pub(crate) fn process<'a>(
    ast: &'a ProcessImpl<'a>,
    args: &'a ProcessArgs,
    errors: &mut Errors,
) -> Option<Table<'a>> {
    let item = ast.item;
    if let Some((_, trait_path, _)) = &item.trait_ {
        errors.at(
            trait_path,
            "#[cmc::process] goes on an inherent impl block (`impl MyProcess { ... }`) and \
             implements `Process` itself; remove the attribute to implement the trait by hand",
        );
        return None;
    }
    if !item.generics.params.is_empty() || item.generics.where_clause.is_some() {
        errors.at(
            &item.generics,
            "#[cmc::process] does not support generic process types: the handler table is \
             built for one concrete type. Put the attribute on an impl block of a concrete type \
             (a type alias such as `type Node = Generic<u8>;` works: `impl Node { ... }`)",
        );
        return None;
    }
    let mut table = Table {
        self_ty: &item.self_ty,
        msg: args.msg.as_ref(),
        shared: args.shared.as_ref(),
        handlers: Vec::new(),
        invariants: Vec::new(),
    };
    let mut names = HashSet::new();
    for marked in &ast.marked {
        let func = marked.func;
        let name = &func.sig.ident;
        for extra in marked.handlers.iter().skip(1) {
            errors.at(
                extra.attr,
                format!(
                    "`{name}` is marked #[handler] twice: a method is one handler, and its table \
                     entry is named after it; write another method for another entry"
                ),
            );
        }
        for extra in marked.invariants.iter().skip(1) {
            errors.at(extra, format!("`{name}` is marked #[invariant] twice"));
        }
        if let (Some(_), Some(inv)) = (marked.handlers.first(), marked.invariants.first()) {
            errors.at(
                inv,
                format!(
                    "`{name}` is marked both #[handler] and #[invariant]: a method is either a \
                     handler (it changes the state) or an invariant (it checks it)"
                ),
            );
            continue;
        }
        if marked.handlers.len() > 1 || marked.invariants.len() > 1 {
            continue;
        }
        let shape = FnShape::of(&func.sig);
        if let Some(attr) = marked.handlers.first() {
            if marked.cfgs.is_empty() && !names.insert(name.unraw().to_string()) {
                errors.at(
                    name,
                    format!("the handler table already has an entry named `{name}`"),
                );
            }
            let takes_ctx = handler_signature(&shape, errors);
            let trigger = trigger(ast, name, attr, errors);
            if let Some(trigger) = trigger {
                table.handlers.push(Handler {
                    method: name,
                    takes_ctx,
                    trigger,
                    fair: attr.fair,
                    cfgs: &marked.cfgs,
                });
            }
        } else if let Some(output) = invariant_signature(&shape, errors) {
            table.invariants.push(Invariant {
                method: name,
                output,
                cfgs: &marked.cfgs,
            });
        }
    }
    if ast.marked.iter().all(|m| m.handlers.is_empty()) {
        errors.at(
            &item.self_ty,
            "a process needs at least one handler: mark the methods that make its steps with \
             #[handler]",
        );
    }
    Some(table)
}

/// Rejects what no kind of function here can be: async, unsafe, extern,
/// generic over types or constants.
fn plain(sig: &syn::Signature, what: &str, errors: &mut Errors) {
    if let Some(t) = &sig.asyncness {
        errors.at(t, format!("{what} cannot be async"));
    }
    if let Some(t) = &sig.unsafety {
        errors.at(t, format!("{what} cannot be unsafe"));
    }
    if let Some(abi) = &sig.abi {
        errors.at(abi, format!("{what} cannot have an ABI"));
    }
    if let Some(v) = &sig.variadic {
        errors.at(v, format!("{what} cannot be variadic"));
    }
    for param in &sig.generics.params {
        if !matches!(param, syn::GenericParam::Lifetime(_)) {
            errors.at(param, format!("{what} cannot be generic"));
        }
    }
}

const HANDLER_SIGNATURE: &str =
    "a handler is `fn(&mut self, ctx: &mut Ctx<Self>)` or `fn(&mut self)`";

/// Checks a handler's signature; returns whether it takes a `Ctx`.
fn handler_signature(shape: &FnShape<'_>, errors: &mut Errors) -> bool {
    plain(shape.sig, "a handler", errors);
    match shape.receiver {
        Receiver::Mut => {}
        Receiver::None => errors.at(
            &shape.sig.ident,
            format!("{HANDLER_SIGNATURE}: it takes `&mut self`"),
        ),
        Receiver::Shared | Receiver::Other => errors.at(
            shape.receiver_arg,
            format!("{HANDLER_SIGNATURE}: it takes `&mut self`"),
        ),
    }
    let mut args = shape.args.iter();
    let takes_ctx = match args.next() {
        None => false,
        Some(ty) => {
            if !ast::is_ref_to(ty, "Ctx", true) {
                errors.at(
                    ty,
                    format!("{HANDLER_SIGNATURE}: its argument is `&mut Ctx<Self>`"),
                );
            }
            true
        }
    };
    for extra in args {
        errors.at(
            extra,
            format!("{HANDLER_SIGNATURE}: it takes no other arguments"),
        );
    }
    if let Some(out) = shape.output {
        errors.at(out, format!("{HANDLER_SIGNATURE}: it returns nothing"));
    }
    takes_ctx
}

fn trigger<'a>(
    ast: &'a ProcessImpl<'a>,
    handler: &Ident,
    attr: &'a ast::HandlerAttr<'a>,
    errors: &mut Errors,
) -> Option<Trigger<'a>> {
    if let Some(start) = &attr.start {
        if attr.guard.is_some() || attr.timer.is_some() {
            errors.at(
                start,
                "a start handler runs once when the model starts: it has no guard or timer",
            );
            return None;
        }
        return Some(Trigger::Start);
    }
    match (&attr.guard, &attr.timer) {
        (Some(_), Some(timer)) => {
            errors.at(
                timer,
                "a handler has a guard or a timer, not both: a timer handler is enabled \
                 exactly when its timer is pending",
            );
            None
        }
        (None, Some(timer)) => {
            if timer.value().is_empty() {
                errors.at(timer, "a timer's name cannot be empty");
            }
            Some(Trigger::Timer(timer))
        }
        (Some(path), None) => Some(Trigger::Guard(guard(ast, handler, path, errors))),
        (None, None) => Some(Trigger::Always),
    }
}

/// Resolves a guard path: a bare name or `Self::name` of a function of this
/// impl block is checked here; any other path is left to type checking.
fn guard<'a>(
    ast: &'a ProcessImpl<'a>,
    handler: &Ident,
    path: &'a Path,
    errors: &mut Errors,
) -> Guard<'a> {
    let local = match path.segments.len() {
        1 if path.leading_colon.is_none() => path.get_ident(),
        2 if path.leading_colon.is_none() && path.segments[0].ident == "Self" => {
            Some(&path.segments[1].ident)
        }
        _ => None,
    };
    let Some(func) = local
        .filter(|_| path.segments.iter().all(|s| s.arguments.is_none()))
        .and_then(|name| ast.find(name))
    else {
        return Guard::Foreign(path);
    };
    let shape = FnShape::of(&func.sig);
    let what = format!("`{}`, the guard of `{handler}`,", func.sig.ident);
    let signature = "a guard is `fn(&self) -> bool` or `fn(&self, view: &View<Self>) -> bool`";
    plain(&func.sig, &what, errors);
    // The process argument: `&self`, or a first argument of an associated
    // function (which type checking then checks is `&Self`).
    let mut args = shape.args.iter();
    match shape.receiver {
        Receiver::Shared => {}
        Receiver::Mut => errors.at(
            shape.receiver_arg,
            format!("{what} takes `&self`, not `&mut self`: guards only look ({signature})"),
        ),
        Receiver::Other => errors.at(
            shape.receiver_arg,
            format!("{what} takes `&self` ({signature})"),
        ),
        Receiver::None => {
            if args.next().is_none() {
                errors.at(&func.sig, format!("{what} takes `&self` ({signature})"));
            }
        }
    }
    let takes_view = match args.next() {
        None => false,
        Some(ty) => {
            if !ast::is_ref_to(ty, "View", false) {
                errors.at(
                    ty,
                    format!("{what} takes `&View<Self>` as its second argument ({signature})"),
                );
            }
            true
        }
    };
    for extra in args {
        errors.at(
            extra,
            format!("{what} takes no other arguments ({signature})"),
        );
    }
    if shape.output.is_none() {
        errors.at(&func.sig, format!("{what} returns `bool` ({signature})"));
    }
    Guard::Local {
        path,
        name: &func.sig.ident,
        takes_view,
    }
}

const INVARIANT_SIGNATURE: &str =
    "an invariant is `fn(&self) -> bool` or `fn(&self) -> Result<(), E>` with `E: Display`";

/// Checks a per-process invariant's signature; returns its return type.
fn invariant_signature<'a>(shape: &FnShape<'a>, errors: &mut Errors) -> Option<&'a Type> {
    plain(shape.sig, "an invariant", errors);
    match shape.receiver {
        Receiver::Shared => {}
        Receiver::None => errors.at(
            &shape.sig.ident,
            format!("{INVARIANT_SIGNATURE}: it takes `&self`"),
        ),
        Receiver::Mut | Receiver::Other => errors.at(
            shape.receiver_arg,
            format!("{INVARIANT_SIGNATURE}: it takes `&self`"),
        ),
    }
    for extra in &shape.args {
        errors.at(
            extra,
            format!("{INVARIANT_SIGNATURE}: it takes no other arguments"),
        );
    }
    if shape.output.is_none() {
        errors.at(
            shape.sig,
            format!("{INVARIANT_SIGNATURE}: it must return one of them"),
        );
    }
    shape.output
}

/// A global invariant, validated.
pub(crate) struct GlobalInvariant<'a> {
    pub(crate) func: &'a Ident,
    /// `T` of `World<T>`.
    pub(crate) process: &'a Type,
    pub(crate) output: &'a Type,
}

const GLOBAL_SIGNATURE: &str = "a global invariant is `fn(world: &World<P>) -> bool` or \
     `fn(world: &World<P>) -> Result<(), E>` with `E: Display`";

/// Validates a function under `#[cmc::invariant]`.
pub(crate) fn global_invariant<'a>(
    free: &FreeFn<'a>,
    errors: &mut Errors,
) -> Option<GlobalInvariant<'a>> {
    let shape = &free.shape;
    plain(shape.sig, "a global invariant", errors);
    if shape.receiver != Receiver::None {
        errors.at(
            shape.receiver_arg,
            format!(
                "{GLOBAL_SIGNATURE}, a free function; an invariant of each process is a method \
                 marked #[invariant] inside the #[cmc::process] impl block"
            ),
        );
        return None;
    }
    let process = match shape.args.as_slice() {
        [world] => {
            let process = ast::world_process_type(world);
            if process.is_none() {
                errors.at(world, format!("{GLOBAL_SIGNATURE}: it takes `&World<P>`"));
            }
            process
        }
        [] => {
            errors.at(
                shape.sig,
                format!("{GLOBAL_SIGNATURE}: it takes `world: &World<P>`"),
            );
            None
        }
        [_, extra @ ..] => {
            for ty in extra {
                errors.at(
                    ty,
                    format!("{GLOBAL_SIGNATURE}: it takes no other arguments"),
                );
            }
            None
        }
    };
    if shape.output.is_none() {
        errors.at(
            shape.sig,
            format!("{GLOBAL_SIGNATURE}: it must return one of them"),
        );
    }
    Some(GlobalInvariant {
        func: &shape.sig.ident,
        process: process?,
        output: shape.output?,
    })
}

/// Validates a function under `#[cmc::model]`; returns its name and
/// return type.
pub(crate) fn model<'a>(free: &FreeFn<'a>, errors: &mut Errors) -> Option<(&'a Ident, &'a Type)> {
    let shape = &free.shape;
    let signature = "a model is `fn() -> cmc::Model<P>`";
    plain(shape.sig, "a model function", errors);
    if !shape.sig.inputs.is_empty() {
        errors.at(
            &shape.sig.inputs,
            format!(
                "{signature}: it takes no arguments (a harness calls it with none); put \
                 parameters in a helper and register one function per configuration"
            ),
        );
    }
    if shape.output.is_none() {
        errors.at(
            shape.sig.to_token_stream(),
            format!("{signature}: it returns the model"),
        );
    }
    Some((&shape.sig.ident, shape.output?))
}

/// What `#[cmc::roles]` implements `Process` with.
pub(crate) struct Roles<'a> {
    pub(crate) name: &'a Ident,
    pub(crate) roles: Vec<Role<'a>>,
}

/// One variant of a roles enum.
pub(crate) struct Role<'a> {
    /// The variant, whose name prefixes the role's handler names.
    pub(crate) variant: &'a Ident,
    /// The role's process type.
    pub(crate) ty: &'a Type,
    /// The variant's `#[cfg(..)]` attributes, which its part of the tables
    /// gets too.
    pub(crate) cfgs: Vec<&'a Attribute>,
}

const ROLES_SHAPE: &str =
    "a variant of a #[cmc::roles] enum wraps one process type: `Client(Client)`";

/// Validates an enum under `#[cmc::roles]`.
pub(crate) fn roles<'a>(ast: &ast::RolesEnum<'a>, errors: &mut Errors) -> Option<Roles<'a>> {
    let item = ast.item;
    if !item.generics.params.is_empty() || item.generics.where_clause.is_some() {
        errors.at(
            &item.generics,
            "#[cmc::roles] does not support generic enums: the handler table is built for \
             one concrete type (a type alias of a concrete instance works as a role)",
        );
    }
    if item.variants.is_empty() {
        errors.at(
            &item.ident,
            "a #[cmc::roles] enum needs at least one variant: one per role, each wrapping the \
             role's process type (`Client(Client)`)",
        );
    }
    let mut roles = Vec::new();
    for variant in &item.variants {
        if let Some((_, discriminant)) = &variant.discriminant {
            errors.at(
                discriminant,
                "a variant of a #[cmc::roles] enum has no discriminant",
            );
        }
        let ty = match &variant.fields {
            syn::Fields::Unnamed(fields) if fields.unnamed.len() == 1 => &fields.unnamed[0].ty,
            syn::Fields::Unnamed(fields) => {
                errors.at(
                    fields,
                    format!(
                        "{ROLES_SHAPE}; `{}` has {} fields (put them in a struct of their own \
                         and make that the process type)",
                        variant.ident,
                        fields.unnamed.len()
                    ),
                );
                continue;
            }
            syn::Fields::Named(fields) => {
                errors.at(
                    fields,
                    format!(
                        "{ROLES_SHAPE}: a tuple variant; `{}` has named fields",
                        variant.ident
                    ),
                );
                continue;
            }
            syn::Fields::Unit => {
                errors.at(
                    &variant.ident,
                    format!("{ROLES_SHAPE}; `{}` wraps nothing", variant.ident),
                );
                continue;
            }
        };
        let cfgs = variant
            .attrs
            .iter()
            .filter(|a| a.path().is_ident("cfg"))
            .collect();
        roles.push(Role {
            variant: &variant.ident,
            ty,
            cfgs,
        });
    }
    Some(Roles {
        name: &item.ident,
        roles,
    })
}
