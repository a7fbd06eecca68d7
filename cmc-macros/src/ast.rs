//! What the user wrote, as borrowed syn nodes that keep their spans: the
//! arguments of `#[cmc::process(..)]`, the methods of the impl block with
//! their helper attributes, and the shapes of function signatures. Nothing
//! here judges whether a signature is acceptable; `validate` does.

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::{
    Attribute, FnArg, Ident, ImplItem, ImplItemFn, Item, ItemImpl, LitStr, Meta, Path, Signature,
    Token, Type,
};

use crate::errors::Errors;

/// The inert attribute marking a handler inside a `#[cmc::process]` impl.
pub(crate) const HANDLER: &str = "handler";
/// The inert attribute marking a per-process invariant.
pub(crate) const INVARIANT: &str = "invariant";

/// `#[cmc::process(msg = Type, shared = Type)]`.
#[derive(Default)]
pub(crate) struct ProcessArgs {
    pub(crate) msg: Option<Type>,
    pub(crate) shared: Option<Type>,
}

impl ProcessArgs {
    /// Parses the arguments; unknown or repeated keys are recorded in
    /// `errors`, a syntax error is returned.
    pub(crate) fn parse(args: TokenStream, errors: &mut Errors) -> syn::Result<ProcessArgs> {
        let pairs = parse_key_values.parse2(args)?;
        let mut parsed = ProcessArgs::default();
        for (key, value) in pairs {
            let slot = if key == "msg" {
                &mut parsed.msg
            } else if key == "shared" {
                &mut parsed.shared
            } else {
                errors.at(
                    &key,
                    format!(
                        "unknown argument `{key}`: #[cmc::process] takes `msg = Type` and \
                         `shared = Type` (both default to `()`)"
                    ),
                );
                continue;
            };
            if slot.is_some() {
                errors.at(&key, format!("`{key}` is given twice"));
            }
            *slot = value;
        }
        Ok(parsed)
    }
}

/// `key = value, ...` where the values of `msg` and `shared` are types and
/// the value of an unknown key is skipped (so that the other keys are still
/// read and all mistakes reported).
fn parse_key_values(input: ParseStream<'_>) -> syn::Result<Vec<(Ident, Option<Type>)>> {
    let mut pairs = Vec::new();
    while !input.is_empty() {
        let key = input.call(Ident::parse_any)?;
        input.parse::<Token![=]>()?;
        let value = if key == "msg" || key == "shared" {
            Some(input.parse::<Type>()?)
        } else {
            skip_value(input)?;
            None
        };
        pairs.push((key, value));
        if input.is_empty() {
            break;
        }
        input.parse::<Token![,]>()?;
    }
    Ok(pairs)
}

/// Skips tokens up to the next comma outside angle brackets.
fn skip_value(input: ParseStream<'_>) -> syn::Result<()> {
    input.step(|cursor| {
        let mut rest = *cursor;
        let mut depth = 0usize;
        while let Some((tree, next)) = rest.token_tree() {
            if let TokenTree::Punct(p) = &tree {
                match p.as_char() {
                    ',' if depth == 0 => break,
                    '<' => depth += 1,
                    '>' => depth = depth.saturating_sub(1),
                    _ => {}
                }
            }
            rest = next;
        }
        Ok(((), rest))
    })
}

/// The impl block under `#[cmc::process]`.
pub(crate) struct ProcessImpl<'a> {
    pub(crate) item: &'a ItemImpl,
    /// Every function of the block, marked or not: guards may name any.
    pub(crate) fns: Vec<&'a ImplItemFn>,
    /// The functions that carry a helper attribute, in source order.
    pub(crate) marked: Vec<Marked<'a>>,
}

impl<'a> ProcessImpl<'a> {
    /// The impl block and its marked methods, or `None` (with the reason
    /// recorded) when `item` is not an impl block. A trait impl is returned
    /// too, so that `validate` can say what is wrong with it.
    pub(crate) fn parse(item: &'a Item, errors: &mut Errors) -> Option<ProcessImpl<'a>> {
        let Item::Impl(item) = item else {
            errors.push(syn::Error::new(
                Span::call_site(),
                "#[cmc::process] goes on an inherent impl block of the process type: \
                 `impl MyProcess { ... }`",
            ));
            return None;
        };
        let mut fns = Vec::new();
        let mut marked = Vec::new();
        for member in &item.items {
            match member {
                ImplItem::Fn(func) => {
                    fns.push(func);
                    if let Some(m) = Marked::parse(func, errors) {
                        marked.push(m);
                    }
                }
                ImplItem::Const(c) => helpers_misplaced(&c.attrs, errors),
                ImplItem::Type(t) => helpers_misplaced(&t.attrs, errors),
                ImplItem::Macro(m) => helpers_misplaced(&m.attrs, errors),
                _ => {}
            }
        }
        Some(ProcessImpl { item, fns, marked })
    }

    /// The function of this block named `name`.
    pub(crate) fn find(&self, name: &Ident) -> Option<&'a ImplItemFn> {
        self.fns.iter().copied().find(|f| f.sig.ident == *name)
    }
}

fn helpers_misplaced(attrs: &[Attribute], errors: &mut Errors) {
    for attr in attrs.iter().filter(|a| is_helper(a)) {
        errors.at(attr, "#[handler] and #[invariant] go on methods");
    }
}

/// Whether `attr` is one of the inert helper attributes.
pub(crate) fn is_helper(attr: &Attribute) -> bool {
    attr.path().is_ident(HANDLER) || attr.path().is_ident(INVARIANT)
}

/// A method with at least one helper attribute.
pub(crate) struct Marked<'a> {
    pub(crate) func: &'a ImplItemFn,
    /// Its `#[cfg(..)]` attributes, which its table entry gets too.
    pub(crate) cfgs: Vec<&'a Attribute>,
    pub(crate) handlers: Vec<HandlerAttr<'a>>,
    pub(crate) invariants: Vec<&'a Attribute>,
}

impl<'a> Marked<'a> {
    fn parse(func: &'a ImplItemFn, errors: &mut Errors) -> Option<Marked<'a>> {
        let mut handlers = Vec::new();
        let mut invariants = Vec::new();
        for attr in &func.attrs {
            if attr.path().is_ident(HANDLER) {
                handlers.push(HandlerAttr::parse(attr, errors));
            } else if attr.path().is_ident(INVARIANT) {
                if !matches!(attr.meta, Meta::Path(_)) {
                    errors.at(attr, "#[invariant] takes no arguments");
                }
                invariants.push(attr);
            }
        }
        if handlers.is_empty() && invariants.is_empty() {
            return None;
        }
        let cfgs = func
            .attrs
            .iter()
            .filter(|a| a.path().is_ident("cfg"))
            .collect();
        Some(Marked {
            func,
            cfgs,
            handlers,
            invariants,
        })
    }
}

/// `#[handler]`, `#[handler(guard = path)]` or `#[handler(timer = "name")]`,
/// each optionally with `fair`.
pub(crate) struct HandlerAttr<'a> {
    pub(crate) attr: &'a Attribute,
    pub(crate) guard: Option<Path>,
    pub(crate) timer: Option<LitStr>,
    pub(crate) fair: bool,
    /// `start`, where it is written.
    pub(crate) start: Option<Ident>,
}

impl<'a> HandlerAttr<'a> {
    fn parse(attr: &'a Attribute, errors: &mut Errors) -> HandlerAttr<'a> {
        let mut parsed = HandlerAttr {
            attr,
            guard: None,
            timer: None,
            fair: false,
            start: None,
        };
        match &attr.meta {
            Meta::Path(_) => {}
            Meta::List(_) => {
                let result = attr.parse_nested_meta(|meta| {
                    if meta.path.is_ident("guard") {
                        let path: Path = meta.value()?.parse()?;
                        if parsed.guard.is_some() {
                            errors.at(&meta.path, "`guard` is given twice");
                        }
                        parsed.guard = Some(path);
                    } else if meta.path.is_ident("timer") {
                        let name: LitStr = meta.value()?.parse()?;
                        if parsed.timer.is_some() {
                            errors.at(&meta.path, "`timer` is given twice");
                        }
                        parsed.timer = Some(name);
                    } else if meta.path.is_ident("start")
                        && (meta.input.is_empty() || meta.input.peek(Token![,]))
                    {
                        if parsed.start.is_some() {
                            errors.at(&meta.path, "`start` is given twice");
                        }
                        parsed.start = meta.path.get_ident().cloned();
                    } else if meta.path.is_ident("fair") && meta.input.is_empty()
                        || meta.path.is_ident("fair") && meta.input.peek(Token![,])
                    {
                        if parsed.fair {
                            errors.at(&meta.path, "`fair` is given twice");
                        }
                        parsed.fair = true;
                    } else {
                        errors.at(
                            &meta.path,
                            format!(
                                "unknown key `{}` in #[handler(..)]: expected `guard = path`, \
                                 `timer = \"name\"`, `start` or `fair`",
                                quote::ToTokens::to_token_stream(&meta.path)
                                    .to_string()
                                    .replace(' ', "")
                            ),
                        );
                        // Skip its value, to read the keys after it.
                        if meta.input.peek(Token![=]) {
                            meta.value()?.parse::<syn::Expr>()?;
                        } else if !meta.input.is_empty() && !meta.input.peek(Token![,]) {
                            meta.input.parse::<proc_macro2::Group>()?;
                        }
                    }
                    Ok(())
                });
                if let Err(e) = result {
                    errors.push(e);
                }
            }
            Meta::NameValue(_) => errors.at(
                attr,
                "expected #[handler], #[handler(guard = path)] or #[handler(timer = \"name\")]",
            ),
        }
        parsed
    }
}

/// How a function takes `self`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Receiver {
    /// An associated function: no `self`.
    None,
    /// `&self`.
    Shared,
    /// `&mut self`.
    Mut,
    /// Anything else: `self`, `self: Box<Self>`, ...
    Other,
}

/// The parts of a signature the rules look at.
pub(crate) struct FnShape<'a> {
    pub(crate) sig: &'a Signature,
    pub(crate) receiver: Receiver,
    /// The `self` argument, if any.
    pub(crate) receiver_arg: Option<&'a syn::Receiver>,
    /// The types of the arguments after `self`.
    pub(crate) args: Vec<&'a Type>,
    /// The return type, `None` for `()`.
    pub(crate) output: Option<&'a Type>,
}

impl<'a> FnShape<'a> {
    pub(crate) fn of(sig: &'a Signature) -> FnShape<'a> {
        let mut receiver = Receiver::None;
        let mut receiver_arg = None;
        let mut args = Vec::new();
        for input in &sig.inputs {
            match input {
                FnArg::Receiver(r) => {
                    receiver_arg = Some(r);
                    receiver = match &*r.ty {
                        Type::Reference(t) if is_self(&t.elem) => {
                            if t.mutability.is_some() {
                                Receiver::Mut
                            } else {
                                Receiver::Shared
                            }
                        }
                        _ => Receiver::Other,
                    };
                }
                FnArg::Typed(t) => args.push(&*t.ty),
            }
        }
        let output = match &sig.output {
            syn::ReturnType::Default => None,
            syn::ReturnType::Type(_, ty) => match &**ty {
                Type::Tuple(t) if t.elems.is_empty() => None,
                ty => Some(ty),
            },
        };
        FnShape {
            sig,
            receiver,
            receiver_arg,
            args,
            output,
        }
    }
}

fn is_self(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none() && p.path.is_ident("Self"))
}

/// Whether `ty` is `&Name<..>` (or `&mut Name<..>` when `mutable`), with
/// any path before `Name`: how `Ctx` and `View` arguments are recognised.
pub(crate) fn is_ref_to(ty: &Type, name: &str, mutable: bool) -> bool {
    last_segment_of_ref(ty, mutable).is_some_and(|s| s.ident == name)
}

fn last_segment_of_ref(ty: &Type, mutable: bool) -> Option<&syn::PathSegment> {
    let Type::Reference(r) = ty else {
        return None;
    };
    if r.mutability.is_some() != mutable {
        return None;
    }
    let Type::Path(p) = &*r.elem else {
        return None;
    };
    p.path.segments.last()
}

/// `T` in `&World<T>` or `&cmc::World<'a, T>`.
pub(crate) fn world_process_type(ty: &Type) -> Option<&Type> {
    let segment = last_segment_of_ref(ty, false).filter(|s| s.ident == "World")?;
    let syn::PathArguments::AngleBracketed(args) = &segment.arguments else {
        return None;
    };
    args.args.iter().rev().find_map(|a| match a {
        syn::GenericArgument::Type(t) => Some(t),
        _ => None,
    })
}

/// A free function under `#[cmc::invariant]` or `#[cmc::model]`.
pub(crate) struct FreeFn<'a> {
    pub(crate) shape: FnShape<'a>,
}

impl<'a> FreeFn<'a> {
    /// The function, or `None` (with the reason recorded) when `item` is not
    /// one.
    pub(crate) fn parse(item: &'a Item, what: &str, errors: &mut Errors) -> Option<FreeFn<'a>> {
        match item {
            Item::Fn(func) => Some(FreeFn {
                shape: FnShape::of(&func.sig),
            }),
            _ => {
                errors.push(syn::Error::new(
                    Span::call_site(),
                    format!("{what} goes on a free function"),
                ));
                None
            }
        }
    }
}

/// The enum under `#[cmc::roles]`: its variants as written.
pub(crate) struct RolesEnum<'a> {
    pub(crate) item: &'a syn::ItemEnum,
}

impl<'a> RolesEnum<'a> {
    /// The enum, or `None` (with the reason recorded) when `item` is not
    /// one.
    pub(crate) fn parse(item: &'a Item, errors: &mut Errors) -> Option<RolesEnum<'a>> {
        match item {
            Item::Enum(item) => Some(RolesEnum { item }),
            _ => {
                errors.push(syn::Error::new(
                    Span::call_site(),
                    "#[cmc::roles] goes on an enum with one variant per role, each wrapping \
                     the role's process type: `enum Node { Client(Client), Server(Server) }`",
                ));
                None
            }
        }
    }
}
