//! `#[derive(cmc::StateHash)]`: parse the item and its `#[cmc(..)]` field
//! attributes, then expand into an impl that hashes every field that is not
//! skipped by the best source its type offers (`StateHash`, `Hash`,
//! `Debug`), detected where the field's type is known.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, Ident, Index, Member};

use crate::errors::Errors;

/// The attribute that configures a field.
const ATTR: &str = "cmc";

/// One field: how to name it, its type, and whether it is left out.
struct Field<'a> {
    member: Member,
    ty: &'a syn::Type,
    skip: bool,
}

fn fields<'a>(fields: &'a Fields, errors: &mut Errors) -> Vec<Field<'a>> {
    fields
        .iter()
        .enumerate()
        .map(|(i, f)| Field {
            member: match &f.ident {
                Some(id) => Member::Named(id.clone()),
                None => Member::Unnamed(Index {
                    index: i as u32,
                    span: f.ty.span(),
                }),
            },
            ty: &f.ty,
            skip: skipped(&f.attrs, errors),
        })
        .collect()
}

/// Whether `#[cmc(skip)]` is among `attrs`; any other `cmc` argument is an
/// error.
fn skipped(attrs: &[syn::Attribute], errors: &mut Errors) -> bool {
    let mut skip = false;
    for attr in attrs.iter().filter(|a| a.path().is_ident(ATTR)) {
        let parsed = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("skip") {
                if skip {
                    return Err(meta.error("`skip` is given twice"));
                }
                skip = true;
                Ok(())
            } else {
                Err(meta.error(
                    "unknown argument: a field of a `cmc::StateHash` type takes `#[cmc(skip)]` \
                     (leave the field out of the state)",
                ))
            }
        });
        if let Err(e) = parsed {
            errors.push(e);
        }
    }
    skip
}

/// The statement that hashes one field, reachable as `value`.
fn hash_field(value: TokenStream, ty: &syn::Type, hasher: &Ident) -> TokenStream {
    // The probe is located at the field's type, so a type with no source
    // is reported there.
    let span = Span::call_site().located_at(ty.span());
    let probe = quote_spanned!(span=> (&&&::cmc::__private::Best::<#ty>::new()).best());
    quote!(#probe(#value, #hasher);)
}

/// The derive's output: the impl, or the errors.
pub(crate) fn derive(input: &DeriveInput) -> TokenStream {
    let mut errors = Errors::default();
    let hasher = Ident::new("__cmc_hasher", Span::mixed_site());
    // The hashed fields' types: the value is self-contained when each of
    // them is (by its `StateHash`; a field hashed by `Hash` or `Debug` is
    // not).
    let mut hashed_types: Vec<&syn::Type> = Vec::new();
    let body = match &input.data {
        Data::Struct(data) => {
            let fields = fields(&data.fields, &mut errors);
            hashed_types.extend(fields.iter().filter(|f| !f.skip).map(|f| f.ty));
            let stmts = fields.iter().filter(|f| !f.skip).map(|f| {
                let member = &f.member;
                hash_field(quote!(&self.#member), f.ty, &hasher)
            });
            quote!(#(#stmts)*)
        }
        Data::Enum(data) => {
            let arms = data.variants.iter().enumerate().map(|(i, v)| {
                let index = i as u32;
                let name = &v.ident;
                let fields = fields(&v.fields, &mut errors);
                hashed_types.extend(fields.iter().filter(|f| !f.skip).map(|f| f.ty));
                let bind = |k: usize| format_ident!("__cmc_f{}", k, span = Span::mixed_site());
                let patterns = fields.iter().enumerate().map(|(k, f)| {
                    let binding = if f.skip {
                        quote!(_)
                    } else {
                        let b = bind(k);
                        quote!(#b)
                    };
                    match &f.member {
                        Member::Named(id) => quote!(#id: #binding),
                        Member::Unnamed(_) => binding,
                    }
                });
                let pattern = match &v.fields {
                    Fields::Named(_) => quote!(Self::#name { #(#patterns),* }),
                    Fields::Unnamed(_) => quote!(Self::#name(#(#patterns),*)),
                    Fields::Unit => quote!(Self::#name),
                };
                let stmts = fields
                    .iter()
                    .enumerate()
                    .filter(|(_, f)| !f.skip)
                    .map(|(k, f)| {
                        let b = bind(k);
                        hash_field(quote!(#b), f.ty, &hasher)
                    });
                quote! {
                    #pattern => {
                        ::std::hash::Hasher::write_u32(#hasher, #index);
                        #(#stmts)*
                    }
                }
            });
            if data.variants.is_empty() {
                quote!(match *self {})
            } else {
                quote!(match self { #(#arms)* })
            }
        }
        Data::Union(u) => {
            errors.at(
                u.union_token,
                "`cmc::StateHash` cannot be derived for a union: which field is live is not \
                 known; implement it by hand",
            );
            TokenStream::new()
        }
    };
    if let Err(e) = errors.finish(()) {
        return e.to_compile_error();
    }
    let name = &input.ident;
    let mut generics = input.generics.clone();
    for param in generics.type_params_mut() {
        param.bounds.push(syn::parse_quote!(::cmc::StateHash));
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    quote! {
        #[automatically_derived]
        impl #impl_generics ::cmc::StateHash for #name #ty_generics #where_clause {
            const SELF_CONTAINED: bool = {
                #[allow(unused_imports)]
                use ::cmc::__private::NotStateHash as _;
                true #(&& ::cmc::__private::SelfContained::<#hashed_types>::VALUE)*
            };
            fn state_hash(&self, #hasher: &mut ::cmc::__private::StateHasher) {
                #[allow(unused_imports)]
                use ::cmc::__private::{BestDebug as _, BestHash as _, BestNone as _, BestState as _};
                #body
            }
        }
    }
}

/// `#[derive(cmc::ProcessId)]`: a newtype of an integer names processes.
/// Its `StateHash` writes the integer as a process identifier (renamed
/// under symmetry reduction), and it implements `cmc::ProcessId`.
pub(crate) fn derive_process_id(input: &DeriveInput) -> TokenStream {
    let mut errors = Errors::default();
    let field = match &input.data {
        Data::Struct(data) if data.fields.len() == 1 => {
            let f = data.fields.iter().next().expect("one field");
            Some((
                match &f.ident {
                    Some(id) => Member::Named(id.clone()),
                    None => Member::Unnamed(Index {
                        index: 0,
                        span: f.ty.span(),
                    }),
                },
                &f.ty,
            ))
        }
        _ => {
            errors.at(
                &input.ident,
                "`cmc::ProcessId` is derived for a newtype of an integer, such as \
                 `struct NodeId(u64);`",
            );
            None
        }
    };
    if !input.generics.params.is_empty() {
        errors.at(
            &input.generics,
            "a `cmc::ProcessId` type has no type or lifetime parameters",
        );
    }
    if let Err(e) = errors.finish(()) {
        return e.to_compile_error();
    }
    let (member, ty) = field.expect("checked above");
    let name = &input.ident;
    let span = Span::call_site().located_at(ty.span());
    let word = quote_spanned!(span=> <#ty as ::cmc::__private::IdWord>::id_word(self.#member));
    quote! {
        #[automatically_derived]
        impl ::cmc::StateHash for #name {
            // Not self-contained: its hash depends on the renaming hashed
            // under, so no page may remember it.
            fn state_hash(&self, hasher: &mut ::cmc::__private::StateHasher) {
                hasher.write_process_id(#word)
            }
        }
        #[automatically_derived]
        impl ::cmc::ProcessId for #name {
            fn process_id(&self) -> u64 {
                #word
            }
        }
    }
}
