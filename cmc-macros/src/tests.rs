//! Expansion tests: what each attribute generates, as tokens.

use proc_macro2::TokenStream;
use quote::quote;

use crate::run;

fn process(args: TokenStream, item: TokenStream) -> String {
    run::process(args, &syn::parse2(item).unwrap()).to_string()
}

fn invariant(item: TokenStream) -> String {
    run::invariant(TokenStream::new(), &syn::parse2(item).unwrap()).to_string()
}

fn model(item: TokenStream) -> String {
    run::model(TokenStream::new(), &syn::parse2(item).unwrap()).to_string()
}

#[track_caller]
fn assert_contains(expansion: &str, part: TokenStream) {
    let part = part.to_string();
    assert!(
        expansion.contains(&part),
        "expected\n{part}\nin\n{expansion}"
    );
}

#[test]
fn a_minimal_process_expands_to_the_hand_written_table() {
    let expansion = process(
        quote!(),
        quote! {
            impl Counter {
                #[handler]
                fn inc(&mut self, ctx: &mut Ctx<'_, Self>) {
                    self.value += 1;
                }
            }
        },
    );
    let expected = quote! {
        impl Counter {
            fn inc(&mut self, ctx: &mut Ctx<'_, Self>) {
                self.value += 1;
            }
        }

        const _: () = {
            impl ::cmc::Process for Counter {
                type Msg = ();
                type Shared = ();

                fn handlers() -> ::std::vec::Vec<::cmc::Handler<Self>> {
                    ::std::vec![::cmc::Handler::new("inc", Self::inc)]
                }

                fn hash_fns() -> ::cmc::HashFns<Self> {
                    #[allow(unused_imports)]
                    use ::cmc::__private::{
                        HasDebug as _, HasHash as _, HasState as _, NoDebug as _, NoHash as _,
                        NoState as _,
                    };
                    ::cmc::HashFns {
                        process: ::cmc::__private::Sources {
                            state: (&::cmc::__private::Has::<Self>::new()).state_fn(),
                            hash: (&::cmc::__private::Has::<Self>::new()).hash_fn(),
                            debug: (&::cmc::__private::Has::<Self>::new()).debug_fn(),
                        },
                        shared: ::cmc::__private::Sources {
                            state: (&::cmc::__private::Has::< <Self as ::cmc::Process>::Shared>::new()).state_fn(),
                            hash: (&::cmc::__private::Has::< <Self as ::cmc::Process>::Shared>::new()).hash_fn(),
                            debug: (&::cmc::__private::Has::< <Self as ::cmc::Process>::Shared>::new()).debug_fn(),
                        },
                        msg: ::cmc::__private::Sources {
                            state: (&::cmc::__private::Has::< <Self as ::cmc::Process>::Msg>::new()).state_fn(),
                            hash: (&::cmc::__private::Has::< <Self as ::cmc::Process>::Msg>::new()).hash_fn(),
                            debug: (&::cmc::__private::Has::< <Self as ::cmc::Process>::Msg>::new()).debug_fn(),
                        },
                    }
                }
            }
        };
    };
    assert_eq!(expansion, expected.to_string());
}

#[test]
fn arguments_set_the_associated_types() {
    let expansion = process(
        quote!(msg = Vec<(u8, u16)>, shared = crate::Flags),
        quote!(impl P { #[handler] fn h(&mut self) {} }),
    );
    assert_contains(
        &expansion,
        quote!(
            type Msg = Vec<(u8, u16)>;
        ),
    );
    assert_contains(
        &expansion,
        quote!(
            type Shared = crate::Flags;
        ),
    );
}

#[test]
fn handlers_without_a_context_are_wrapped() {
    let expansion = process(quote!(), quote!(impl P { #[handler] fn h(&mut self) {} }));
    assert_contains(
        &expansion,
        quote!(::cmc::Handler::new(
            "h",
            |this: &mut Self, _ctx: &mut ::cmc::Ctx<'_, Self>| Self::h(this)
        )),
    );
}

#[test]
fn triggers_follow_the_attribute_in_source_order() {
    let expansion = process(
        quote!(),
        quote! {
            impl P {
                #[handler(guard = with_view)]
                fn a(&mut self, ctx: &mut Ctx<'_, Self>) {}
                #[handler(guard = Self::without_view)]
                fn b(&mut self, ctx: &mut Ctx<'_, Self>) {}
                #[handler(guard = free::function)]
                fn c(&mut self, ctx: &mut Ctx<'_, Self>) {}
                #[handler(timer = "resend")]
                fn d(&mut self, ctx: &mut Ctx<'_, Self>) {}
                fn with_view(&self, view: &View<'_, Self>) -> bool { true }
                fn without_view(&self) -> bool { true }
            }
        },
    );
    assert_contains(
        &expansion,
        quote! {
            ::std::vec![
                ::cmc::Handler::new("a", Self::a).guard(Self::with_view),
                ::cmc::Handler::new("b", Self::b)
                    .guard(|this: &Self, _: &::cmc::View<'_, Self>| Self::without_view(this)),
                ::cmc::Handler::new("c", Self::c).guard(
                    |this: &Self, view: &::cmc::View<'_, Self>|
                        __CmcGuard::<Self, _>::__cmc_guard(&free::function, this, view)
                ),
                ::cmc::Handler::new("d", Self::d).on_timer("resend")
            ]
        },
    );
    // The dispatch trait is generated only because of the foreign guard.
    assert_contains(
        &expansion,
        quote!(trait __CmcGuard<P: ::cmc::Process, Form>),
    );
    let local_only = process(
        quote!(),
        quote!(impl P { #[handler(guard = g)] fn h(&mut self) {} fn g(&self) -> bool { true } }),
    );
    assert!(!local_only.contains("__CmcGuard"), "{local_only}");
}

#[test]
fn invariants_and_helper_attributes() {
    let expansion = process(
        quote!(),
        quote! {
            impl P {
                #[handler]
                fn h(&mut self) {}
                #[invariant]
                fn small(&self) -> bool { true }
                #[invariant]
                fn r#type(&self) -> Result<(), String> { Ok(()) }
            }
        },
    );
    assert!(!expansion.contains("# [handler]"), "{expansion}");
    assert!(!expansion.contains("# [invariant]"), "{expansion}");
    assert_contains(
        &expansion,
        quote! {
            ::std::vec![
                ::cmc::Invariant::new("small", |this: &Self| -> ::cmc::Check {
                    __CmcOutcome::__cmc_check(Self::small(this))
                }),
                ::cmc::Invariant::new("type", |this: &Self| -> ::cmc::Check {
                    __CmcOutcome::__cmc_check(Self::r#type(this))
                })
            ]
        },
    );
    assert_contains(&expansion, quote!(impl __CmcOutcome for bool));
}

#[test]
fn cfg_attributes_apply_to_table_entries() {
    let expansion = process(
        quote!(),
        quote! {
            impl P {
                #[handler]
                fn always(&mut self) {}
                #[cfg(feature = "extra")]
                #[handler]
                fn sometimes(&mut self, ctx: &mut Ctx<'_, Self>) {}
            }
        },
    );
    assert_contains(
        &expansion,
        quote! {
            let mut table = ::std::vec::Vec::new();
            table.push(::cmc::Handler::new("always", |this: &mut Self, _ctx: &mut ::cmc::Ctx<'_, Self>| Self::always(this)));
            #[cfg(feature = "extra")]
            table.push(::cmc::Handler::new("sometimes", Self::sometimes));
            table
        },
    );
}

#[test]
fn on_error_the_item_is_emitted_without_helpers_and_with_a_fallback() {
    let expansion = process(
        quote!(),
        quote! {
            impl P {
                #[handler(gaurd = g)]
                fn h(&mut self) {}
                #[invariant]
                fn i(&self) {}
            }
        },
    );
    assert_eq!(expansion.matches("compile_error").count(), 2, "{expansion}");
    assert_contains(
        &expansion,
        quote!(impl P { fn h(&mut self) {} fn i(&self) {} }),
    );
    assert_contains(
        &expansion,
        quote! {
            impl ::cmc::Process for P {
                type Msg = ();
                type Shared = ();
                fn handlers() -> ::std::vec::Vec<::cmc::Handler<Self>> {
                    ::std::vec::Vec::new()
                }
            }
        },
    );
    // No fallback for a generic type: there is no one type to give it.
    let generic = process(
        quote!(),
        quote!(
            impl<T> P<T> {
                #[handler]
                fn h(&mut self) {}
            }
        ),
    );
    assert!(generic.contains("compile_error"), "{generic}");
    assert!(!generic.contains("Process"), "{generic}");
}

#[test]
fn a_global_invariant_is_registered_for_its_process_type() {
    let expansion = invariant(quote! {
        fn sum_below_five(world: &World<'_, Tally>) -> Check { Ok(()) }
    });
    assert_contains(
        &expansion,
        quote!(
            fn sum_below_five(world: &World<'_, Tally>) -> Check {
                Ok(())
            }
        ),
    );
    assert_contains(&expansion, quote!(::cmc::__private::inventory::submit!));
    assert!(
        expansion.contains(r#"InvariantEntry :: new ("sum_below_five" ,"#),
        "{expansion}"
    );
    assert_contains(&expansion, quote!(::cmc::__private::TypeId::of::<Tally>,));
    assert_contains(
        &expansion,
        quote! {
            unsafe fn __cmc_erased(world: *const ()) -> ::cmc::Check {
                __CmcOutcome::__cmc_check(
                    sum_below_five(unsafe { &*(world as *const ::cmc::World<'_, Tally>) })
                )
            }
            __cmc_erased
        },
    );
}

#[test]
fn a_model_is_registered_under_its_path() {
    let expansion = model(quote!(
        fn tallies() -> Model<Tally> {
            todo!()
        }
    ));
    assert_contains(
        &expansion,
        quote!(
            fn tallies() -> Model<Tally> {
                todo!()
            }
        ),
    );
    assert_contains(
        &expansion,
        quote! {
            ::cmc::__private::ModelEntry::new(
                ::std::concat!(::std::module_path!(), "::", "tallies"),
                ::std::file!(),
                ::std::line!(),
                |path, options| ::cmc::__private::check_model(path, || __cmc_model(tallies()), options),
                |path, options, trace| {
                    ::cmc::__private::replay_model(path, || __cmc_model(tallies()), options, trace)
                },
            )
        },
    );
}

#[test]
fn mistakes_are_all_reported() {
    let expansion = model(quote!(
        async fn m(x: u8) {}
    ));
    assert_eq!(expansion.matches("compile_error").count(), 3, "{expansion}");
    let expansion = invariant(quote!(
        fn i(a: &World<P>, b: u8) {}
    ));
    assert_eq!(expansion.matches("compile_error").count(), 2, "{expansion}");
}

fn roles(item: TokenStream) -> String {
    run::roles(TokenStream::new(), &syn::parse2(item).unwrap()).to_string()
}

#[test]
fn roles_lift_each_role_s_tables_in_variant_order() {
    let expansion = roles(quote! {
        enum Node {
            Client(Client),
            Server(server::Server),
        }
    });
    // The enum stays as written.
    assert_contains(
        &expansion,
        quote!(
            enum Node {
                Client(Client),
                Server(server::Server),
            }
        ),
    );
    assert_contains(
        &expansion,
        quote!(impl ::cmc::__private::Role<0usize, Client> for Node),
    );
    assert_contains(
        &expansion,
        quote!(impl ::cmc::__private::Role<1usize, server::Server> for Node),
    );
    assert_contains(
        &expansion,
        quote!(
            const NAME: &'static str = "Server";
        ),
    );
    // The messages and shared variables are the first role's.
    assert_contains(
        &expansion,
        quote!(
            type Msg = <Client as ::cmc::Process>::Msg;
        ),
    );
    let client = expansion
        .find(&quote!(lift_handlers::<Self, Client, 0usize>).to_string())
        .expect("the client's handlers are lifted");
    let server = expansion
        .find(&quote!(lift_handlers::<Self, server::Server, 1usize>).to_string())
        .expect("the server's handlers are lifted");
    assert!(client < server, "variant order");
}

#[test]
fn roles_on_error_emit_the_enum_and_a_fallback() {
    let expansion = roles(quote! {
        enum Node {
            Client(Client),
            Idle,
        }
    });
    assert!(expansion.contains("compile_error"));
    assert_contains(
        &expansion,
        quote!(
            enum Node {
                Client(Client),
                Idle,
            }
        ),
    );
    // An empty table for the enum, so that code using it does not fail
    // too, and no role impls.
    assert_contains(&expansion, quote!(impl ::cmc::Process for Node));
    assert_contains(
        &expansion,
        quote!(
            type Msg = <Client as ::cmc::Process>::Msg;
        ),
    );
    assert!(!expansion.contains("Role"));
}
