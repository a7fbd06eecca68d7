//! Tokens only: the `Process` impl, the registrations, and what is emitted
//! on error.
//!
//! Generated code names the runtime by absolute path (`::cmc::...`,
//! `::cmc::__private::...`) with call-site spans, so lints about the user's
//! own paths (`unused_qualifications`) do not see it. Where a type error in
//! generated code is the user's mistake, the tokens are *located* at the
//! user's code (`Span::located_at`) but keep the call-site resolution.

use proc_macro2::{Delimiter, Group, Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Ident, ImplItem, Item, ItemImpl, Type};

use crate::ast::{self, ProcessArgs};
use crate::validate::{GlobalInvariant, Guard, Handler, Invariant, Table, Trigger};

/// A call-site span shown at `user`'s location.
fn at(user: Span) -> Span {
    Span::call_site().located_at(user)
}

/// A local variable name invisible to the user's code.
fn local(name: &str) -> Ident {
    Ident::new(name, Span::mixed_site())
}

/// `item` without the inert helper attributes, which are not attributes
/// the compiler knows.
pub(crate) fn strip_helpers(item: &Item) -> Item {
    let mut item = item.clone();
    if let Item::Impl(imp) = &mut item {
        strip_impl(imp);
    }
    item
}

fn strip_impl(item: &mut ItemImpl) {
    for member in &mut item.items {
        let attrs = match member {
            ImplItem::Fn(f) => &mut f.attrs,
            ImplItem::Const(c) => &mut c.attrs,
            ImplItem::Type(t) => &mut t.attrs,
            ImplItem::Macro(m) => &mut m.attrs,
            _ => continue,
        };
        attrs.retain(|a| !ast::is_helper(a));
    }
}

/// What a macro emits when it found mistakes: the errors, the item as
/// written (minus helper attributes), and `fallback`, which keeps the rest
/// of the crate from failing for want of what the macro would have made.
pub(crate) fn error(errors: syn::Error, item: &Item, fallback: TokenStream) -> TokenStream {
    let errors = errors.to_compile_error();
    let item = strip_helpers(item);
    quote! {
        #errors
        #item
        #fallback
    }
}

/// `impl Process` with an empty handler table, emitted on error when the
/// process type and its arguments are known.
pub(crate) fn process_fallback(self_ty: &Type, args: &ProcessArgs) -> TokenStream {
    let (msg, shared) = associated_types(args.msg.as_ref(), args.shared.as_ref());
    quote! {
        impl ::cmc::Process for #self_ty {
            type Msg = #msg;
            type Shared = #shared;
            fn handlers() -> ::std::vec::Vec<::cmc::Handler<Self>> {
                ::std::vec::Vec::new()
            }
        }
    }
}

fn associated_types(msg: Option<&Type>, shared: Option<&Type>) -> (TokenStream, TokenStream) {
    let or_unit = |t: Option<&Type>| t.map_or_else(|| quote!(()), ToTokens::to_token_stream);
    (or_unit(msg), or_unit(shared))
}

/// The impl block (minus helper attributes) and `impl Process` for its type.
pub(crate) fn process(table: &Table<'_>, item: &ItemImpl) -> TokenStream {
    let mut item = item.clone();
    strip_impl(&mut item);
    let self_ty = table.self_ty;
    let (msg, shared) = associated_types(table.msg, table.shared);
    let foreign_guards = table
        .handlers
        .iter()
        .any(|h| matches!(h.trigger, Trigger::Guard(Guard::Foreign(_))));
    let guard_trait = foreign_guards.then(guard_trait);
    let handlers = entries(table.handlers.iter().map(|h| (h.cfgs, handler(h))));
    let invariants = (!table.invariants.is_empty()).then(|| {
        let outcome = outcome_trait();
        let entries = entries(table.invariants.iter().map(|i| (i.cfgs, invariant(i))));
        quote! {
            fn invariants() -> ::std::vec::Vec<::cmc::Invariant<Self>> {
                #outcome
                #entries
            }
        }
    });
    let process_sources = sources(quote!(Self));
    let shared_sources = sources(quote!(<Self as ::cmc::Process>::Shared));
    let msg_sources = sources(quote!(<Self as ::cmc::Process>::Msg));
    quote! {
        #item

        const _: () = {
            #guard_trait

            impl ::cmc::Process for #self_ty {
                type Msg = #msg;
                type Shared = #shared;

                fn handlers() -> ::std::vec::Vec<::cmc::Handler<Self>> {
                    #handlers
                }

                #invariants

                fn hash_fns() -> ::cmc::HashFns<Self> {
                    // Autoref specialization: each probe's `Has*` answer
                    // applies when the type implements the trait, its `No*`
                    // answer (one reference less) otherwise.
                    #[allow(unused_imports)]
                    use ::cmc::__private::{
                        HasDebug as _, HasHash as _, HasState as _, NoDebug as _, NoHash as _,
                        NoState as _,
                    };
                    ::cmc::HashFns {
                        process: #process_sources,
                        shared: #shared_sources,
                        msg: #msg_sources,
                    }
                }
            }
        };
    }
}

/// The sources of identity `ty` offers, as a `cmc::__private::Sources`.
fn sources(ty: TokenStream) -> TokenStream {
    quote! {
        ::cmc::__private::Sources {
            state: (&::cmc::__private::Has::<#ty>::new()).state_fn(),
            hash: (&::cmc::__private::Has::<#ty>::new()).hash_fn(),
            debug: (&::cmc::__private::Has::<#ty>::new()).debug_fn(),
        }
    }
}

/// A vector of entries in source order; an entry whose method has
/// `#[cfg(..)]` attributes is pushed under them.
fn entries<'a>(
    entries: impl Iterator<Item = (&'a [&'a syn::Attribute], TokenStream)>,
) -> TokenStream {
    let entries: Vec<_> = entries.collect();
    if entries.iter().all(|(cfgs, _)| cfgs.is_empty()) {
        let entries = entries.iter().map(|(_, e)| e);
        return quote!(::std::vec![#(#entries),*]);
    }
    let table = local("table");
    let pushes = entries
        .iter()
        .map(|(cfgs, e)| quote!(#(#cfgs)* #table.push(#e);));
    quote! {
        let mut #table = ::std::vec::Vec::new();
        #(#pushes)*
        #table
    }
}

fn handler(h: &Handler<'_>) -> TokenStream {
    let name = h.method.unraw().to_string();
    let method = h.method;
    let this = local("this");
    let body = if h.takes_ctx {
        quote_spanned!(at(method.span())=> Self::#method)
    } else {
        let ctx = local("_ctx");
        quote_spanned! {at(method.span())=>
            |#this: &mut Self, #ctx: &mut ::cmc::Ctx<'_, Self>| Self::#method(#this)
        }
    };
    let trigger = match &h.trigger {
        Trigger::Always => TokenStream::new(),
        Trigger::Timer(timer) => quote!(.on_timer(#timer)),
        Trigger::Start => quote!(.on_start()),
        Trigger::Guard(guard) => {
            let guard = guard_fn(guard);
            quote!(.guard(#guard))
        }
    };
    let fair = if h.fair {
        quote!(.fair())
    } else {
        TokenStream::new()
    };
    quote!(::cmc::Handler::new(#name, #body)#trigger #fair)
}

/// A guard as a `cmc::Guard<Self>`.
fn guard_fn(guard: &Guard<'_>) -> TokenStream {
    let this = local("this");
    let view = local("view");
    match guard {
        Guard::Local {
            path,
            name,
            takes_view: true,
        } => quote_spanned!(at(path.span())=> Self::#name),
        Guard::Local {
            path,
            name,
            takes_view: false,
        } => {
            let call = quote_spanned!(at(path.span())=> Self::#name(#this));
            quote!(|#this: &Self, _: &::cmc::View<'_, Self>| #call)
        }
        Guard::Foreign(path) => {
            // Which form the function has is known only to type checking:
            // `__CmcGuard` is implemented for both.
            let call = quote_spanned! {at(path.span())=>
                __CmcGuard::<Self, _>::__cmc_guard(&#path, #this, #view)
            };
            quote!(|#this: &Self, #view: &::cmc::View<'_, Self>| #call)
        }
    }
}

/// Turns a function of either guard form into a call; its diagnostic is
/// the error a guard of the wrong type gets.
fn guard_trait() -> TokenStream {
    quote! {
        #[diagnostic::on_unimplemented(
            message = "`{Self}` is not a guard of `{P}`",
            label = "a guard is `fn(&{P}) -> bool` or `fn(&{P}, &View<{P}>) -> bool`"
        )]
        trait __CmcGuard<P: ::cmc::Process, Form> {
            fn __cmc_guard(&self, this: &P, view: &::cmc::View<'_, P>) -> bool;
        }

        impl<P: ::cmc::Process, F: ::std::ops::Fn(&P) -> bool> __CmcGuard<P, [(); 1]> for F {
            fn __cmc_guard(&self, this: &P, _: &::cmc::View<'_, P>) -> bool {
                self(this)
            }
        }

        impl<P: ::cmc::Process, F: ::std::ops::Fn(&P, &::cmc::View<'_, P>) -> bool>
            __CmcGuard<P, [(); 2]> for F
        {
            fn __cmc_guard(&self, this: &P, view: &::cmc::View<'_, P>) -> bool {
                self(this, view)
            }
        }
    }
}

/// Turns what an invariant returns into a `cmc::Check`; its diagnostic is
/// the error an invariant of the wrong type gets.
fn outcome_trait() -> TokenStream {
    quote! {
        #[diagnostic::on_unimplemented(
            message = "an invariant returns `bool` or `Result<(), E>` with `E: Display`, not `{Self}`",
            label = "not `bool` or `Result<(), E>` with `E: Display`"
        )]
        trait __CmcOutcome {
            fn __cmc_check(self) -> ::cmc::Check;
        }

        impl __CmcOutcome for bool {
            fn __cmc_check(self) -> ::cmc::Check {
                if self {
                    ::std::result::Result::Ok(())
                } else {
                    ::std::result::Result::Err(::std::string::String::from("returned false"))
                }
            }
        }

        impl<E: ::std::fmt::Display> __CmcOutcome for ::std::result::Result<(), E> {
            fn __cmc_check(self) -> ::cmc::Check {
                self.map_err(|e| ::std::string::ToString::to_string(&e))
            }
        }
    }
}

/// `call(args)` located from the first to the last token of `user`, so
/// that a type error in the call's value underlines all of `user`.
fn call_located_at(call: TokenStream, args: TokenStream, user: &Type) -> TokenStream {
    let mut tokens = user.to_token_stream().into_iter();
    let first = tokens.next().map_or_else(Span::call_site, |t| t.span());
    let last = tokens.last().map_or(first, |t| t.span());
    let mut args = Group::new(Delimiter::Parenthesis, args);
    args.set_span(at(last));
    let call = respan(call, at(first));
    quote!(#call #args)
}

/// `tokens` with every span (outside groups' contents) set to `span`.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut t| {
            t.set_span(span);
            t
        })
        .collect()
}

fn invariant(i: &Invariant<'_>) -> TokenStream {
    let name = i.method.unraw().to_string();
    let method = i.method;
    let this = local("this");
    let value = call_located_at(quote!(Self::#method), quote!(#this), i.output);
    let check = quote_spanned! {at(i.output.span())=>
        __CmcOutcome::__cmc_check(#value)
    };
    quote!(::cmc::Invariant::new(#name, |#this: &Self| -> ::cmc::Check { #check }))
}

/// The function and its registration as a global invariant of `World<T>`.
pub(crate) fn global_invariant(inv: &GlobalInvariant<'_>, item: &Item) -> TokenStream {
    registration(inv, item, None)
}

/// A `#[cmc::sometimes]` or `#[cmc::eventually]` function and its
/// registration.
pub(crate) fn property(inv: &GlobalInvariant<'_>, item: &Item, kind: &str) -> TokenStream {
    registration(inv, item, Some(kind))
}

/// A global invariant (`kind` `None`) or property and its registration.
fn registration(inv: &GlobalInvariant<'_>, item: &Item, kind: Option<&str>) -> TokenStream {
    let func = inv.func;
    let name = func.unraw().to_string();
    let process = inv.process;
    let outcome = outcome_trait();
    let world = local("world");
    let value = call_located_at(
        quote!(#func),
        quote!(unsafe { &*(#world as *const ::cmc::World<'_, #process>) }),
        inv.output,
    );
    let check = quote_spanned!(at(inv.output.span())=> __CmcOutcome::__cmc_check(#value));
    let erased = quote! {
        {
            #outcome

            // The engine calls this with a pointer to a `World` over
            // the process type this entry is registered for.
            unsafe fn __cmc_erased(#world: *const ()) -> ::cmc::Check {
                #check
            }
            __cmc_erased
        }
    };
    let entry = match kind {
        None => quote! {
            ::cmc::__private::InvariantEntry::new(
                #name,
                ::cmc::__private::TypeId::of::<#process>,
                #erased,
            )
        },
        Some(kind) => {
            let kind = if kind == "sometimes" {
                quote!(::cmc::PropertyKind::Sometimes)
            } else {
                quote!(::cmc::PropertyKind::Eventually)
            };
            quote! {
                ::cmc::__private::InvariantEntry::property(
                    #name,
                    ::cmc::__private::TypeId::of::<#process>,
                    #erased,
                    #kind,
                )
            }
        }
    };
    quote! {
        #item

        ::cmc::__private::inventory::submit! {
            #entry
        }
    }
}

/// The function and its registration as a model.
pub(crate) fn model(func: &Ident, output: &Type, item: &Item) -> TokenStream {
    let name = func.unraw().to_string();
    let (path, options, trace) = (local("path"), local("options"), local("trace"));
    // Both closures build the model through `__cmc_model`, so a function
    // that does not return a model gets one error, at its return type.
    let model = call_located_at(quote!(#func), TokenStream::new(), output);
    let build = quote!(__cmc_model(#model));
    quote! {
        #item

        ::cmc::__private::inventory::submit! {
            fn __cmc_model<P: ::cmc::Process>(model: ::cmc::Model<P>) -> ::cmc::Model<P> {
                model
            }

            ::cmc::__private::ModelEntry::new(
                ::std::concat!(::std::module_path!(), "::", #name),
                // Where the attribute is: `line!()` reports the outermost
                // macro call, whatever span it is given.
                ::std::file!(),
                ::std::line!(),
                |#path, #options| ::cmc::__private::check_model(#path, || #build, #options),
                |#path, #options, #trace| {
                    ::cmc::__private::replay_model(#path, || #build, #options, #trace)
                },
            )
        }
    }
}

/// The enum as written, one `Role<I, R>` impl per variant, and `impl Process`
/// whose tables are the roles' tables one after the other.
pub(crate) fn roles(roles: &crate::validate::Roles<'_>, item: &Item) -> TokenStream {
    let name = roles.name;
    let Some(first) = roles
        .roles
        .iter()
        .find(|r| r.cfgs.is_empty())
        .or(roles.roles.first())
    else {
        return item.to_token_stream();
    };
    let first_ty = first.ty;
    let (table, this, hasher, mode) = (
        local("table"),
        local("this"),
        local("hasher"),
        local("mode"),
    );
    let mut impls = Vec::new();
    let mut handlers = Vec::new();
    let mut invariants = Vec::new();
    let mut arms = Vec::new();
    let mut sources = Vec::new();
    let (state, hash, debug) = (local("state"), local("hash"), local("debug"));
    for (i, role) in roles.roles.iter().enumerate() {
        let (variant, ty, cfgs) = (role.variant, role.ty, &role.cfgs);
        let role_name = variant.unraw().to_string();
        let (inner, new) = (local("role"), local("new"));
        // A role whose messages or shared variables are not the enum's
        // (the first role's): the one error is at the variant's type.
        let narrowing = quote_spanned! {at(ty.span())=>
            ::cmc::__private::Narrowing::<#name, #ty>::new
        };
        impls.push(quote! {
            #(#cfgs)*
            impl ::cmc::__private::Role<#i, #ty> for #name {
                const NAME: &'static str = #role_name;

                fn get(&self) -> ::std::option::Option<&#ty> {
                    #[allow(unreachable_patterns)]
                    match self {
                        #name::#variant(#inner) => ::std::option::Option::Some(#inner),
                        _ => ::std::option::Option::None,
                    }
                }

                fn get_mut(&mut self) -> ::std::option::Option<&mut #ty> {
                    #[allow(unreachable_patterns)]
                    match self {
                        #name::#variant(#inner) => ::std::option::Option::Some(#inner),
                        _ => ::std::option::Option::None,
                    }
                }

                fn narrowing() -> ::cmc::__private::Narrowing<Self, #ty> {
                    let #new = #narrowing;
                    #new()
                }

                fn tables() -> &'static ::cmc::__private::RoleTables<#ty> {
                    static TABLES: ::cmc::__private::OnceLock<::cmc::__private::RoleTables<#ty>> =
                        ::cmc::__private::OnceLock::new();
                    TABLES.get_or_init(|| ::cmc::__private::RoleTables::new(#role_name))
                }
            }
        });
        handlers.push(quote! {
            #(#cfgs)*
            ::cmc::__private::lift_handlers::<Self, #ty, #i>(&mut #table);
        });
        invariants.push(quote! {
            #(#cfgs)*
            ::cmc::__private::lift_invariants::<Self, #ty, #i>(&mut #table);
        });
        arms.push(quote! {
            #(#cfgs)*
            #name::#variant(_) => ::cmc::__private::role_hash::<#name, #ty, #i>(#this, #hasher, #mode),
        });
        sources.push(quote! {
            #(#cfgs)*
            {
                #state &= ::cmc::__private::role_has_source::<Self, #ty, #i>(::cmc::FingerprintMode::State);
                #hash &= ::cmc::__private::role_has_source::<Self, #ty, #i>(::cmc::FingerprintMode::Hash);
                #debug &= ::cmc::__private::role_has_source::<Self, #ty, #i>(::cmc::FingerprintMode::Debug);
            }
        });
    }
    let first_sources = local("first");
    quote! {
        #item

        const _: () = {
            #(#impls)*

            impl ::cmc::Process for #name {
                type Msg = <#first_ty as ::cmc::Process>::Msg;
                type Shared = <#first_ty as ::cmc::Process>::Shared;

                fn handlers() -> ::std::vec::Vec<::cmc::Handler<Self>> {
                    let mut #table = ::std::vec::Vec::new();
                    #(#handlers)*
                    #table
                }

                fn invariants() -> ::std::vec::Vec<::cmc::Invariant<Self>> {
                    let mut #table = ::std::vec::Vec::new();
                    #(#invariants)*
                    #table
                }

                fn hash_fns() -> ::cmc::HashFns<Self> {
                    // Each role by its own source of `mode`: the enum
                    // offers a source when every role does.
                    fn __cmc_role_source(
                        #this: &#name,
                        #hasher: &mut ::cmc::StateHasher,
                        #mode: ::cmc::FingerprintMode,
                    ) {
                        match #this {
                            #(#arms)*
                        }
                    }
                    fn __cmc_state(#this: &#name, #hasher: &mut ::cmc::StateHasher) {
                        __cmc_role_source(#this, #hasher, ::cmc::FingerprintMode::State)
                    }
                    fn __cmc_hash(#this: &#name, #hasher: &mut ::cmc::StateHasher) {
                        __cmc_role_source(#this, #hasher, ::cmc::FingerprintMode::Hash)
                    }
                    fn __cmc_debug(#this: &#name, #hasher: &mut ::cmc::StateHasher) {
                        __cmc_role_source(#this, #hasher, ::cmc::FingerprintMode::Debug)
                    }
                    let (mut #state, mut #hash, mut #debug) = (true, true, true);
                    #(#sources)*
                    let #first_sources = <#first_ty as ::cmc::Process>::hash_fns();
                    ::cmc::HashFns {
                        process: ::cmc::__private::Sources {
                            state: #state.then_some(__cmc_state as ::cmc::HashFn<Self>),
                            hash: #hash.then_some(__cmc_hash as ::cmc::HashFn<Self>),
                            debug: #debug.then_some(__cmc_debug as ::cmc::HashFn<Self>),
                        },
                        shared: #first_sources.shared,
                        msg: #first_sources.msg,
                    }
                }
            }
        };
    }
}

/// `impl Process` with empty tables, emitted on error when a role's type
/// is known, so that code using the enum does not fail too.
pub(crate) fn roles_fallback(name: &Ident, first: Option<&Type>) -> TokenStream {
    let Some(first) = first else {
        return TokenStream::new();
    };
    quote! {
        impl ::cmc::Process for #name {
            type Msg = <#first as ::cmc::Process>::Msg;
            type Shared = <#first as ::cmc::Process>::Shared;
            fn handlers() -> ::std::vec::Vec<::cmc::Handler<Self>> {
                ::std::vec::Vec::new()
            }
        }
    }
}
