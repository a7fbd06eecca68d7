//! Each attribute from tokens to tokens: parse, validate, expand, and on
//! error emit the errors with the item as written.

use proc_macro2::TokenStream;
use syn::Item;

use crate::ast::{FreeFn, ProcessArgs, ProcessImpl, RolesEnum};
use crate::errors::Errors;
use crate::{expand, validate};

/// `#[cmc::process(args)] item`.
pub(crate) fn process(args: TokenStream, item: &Item) -> TokenStream {
    let mut errors = Errors::default();
    let args = ProcessArgs::parse(args, &mut errors).map_err(|e| errors.push(e));
    let ast = ProcessImpl::parse(item, &mut errors);
    let table = match (&ast, &args) {
        (Some(ast), Ok(args)) => validate::process(ast, args, &mut errors),
        _ => None,
    };
    match errors.finish(()) {
        Ok(()) => {
            let (Some(table), Some(ast)) = (table, &ast) else {
                unreachable!("no errors, so the table was built");
            };
            expand::process(&table, ast.item)
        }
        Err(errors) => {
            // The type's `Process` impl, with no handlers, when its type and
            // associated types are known, so that code using it does not
            // fail too.
            let fallback = match (&ast, &args) {
                (Some(ast), Ok(args))
                    if ast.item.trait_.is_none() && ast.item.generics.params.is_empty() =>
                {
                    expand::process_fallback(&ast.item.self_ty, args)
                }
                _ => TokenStream::new(),
            };
            expand::error(errors, item, fallback)
        }
    }
}

/// `#[cmc::invariant] item`.
pub(crate) fn invariant(args: TokenStream, item: &Item) -> TokenStream {
    let mut errors = Errors::default();
    no_args(args, "#[cmc::invariant]", &mut errors);
    let inv = FreeFn::parse(item, "#[cmc::invariant]", &mut errors)
        .and_then(|free| validate::global_invariant(&free, &mut errors));
    match (errors.finish(()), inv) {
        (Ok(()), Some(inv)) => expand::global_invariant(&inv, item),
        (Err(errors), _) => expand::error(errors, item, TokenStream::new()),
        (Ok(()), None) => unreachable!("no errors, so the invariant was validated"),
    }
}

/// `#[cmc::sometimes] item` or `#[cmc::eventually] item` (`kind`).
pub(crate) fn property(args: TokenStream, item: &Item, kind: &str) -> TokenStream {
    let mut errors = Errors::default();
    let what = format!("#[cmc::{kind}]");
    no_args(args, &what, &mut errors);
    let inv = FreeFn::parse(item, &what, &mut errors)
        .and_then(|free| validate::global_invariant(&free, &mut errors));
    match (errors.finish(()), inv) {
        (Ok(()), Some(inv)) => expand::property(&inv, item, kind),
        (Err(errors), _) => expand::error(errors, item, TokenStream::new()),
        (Ok(()), None) => unreachable!("no errors, so the property was validated"),
    }
}

/// `#[cmc::model] item`.
pub(crate) fn model(args: TokenStream, item: &Item) -> TokenStream {
    let mut errors = Errors::default();
    no_args(args, "#[cmc::model]", &mut errors);
    let model = FreeFn::parse(item, "#[cmc::model]", &mut errors)
        .and_then(|free| validate::model(&free, &mut errors));
    match (errors.finish(()), model) {
        (Ok(()), Some((name, output))) => expand::model(name, output, item),
        (Err(errors), _) => expand::error(errors, item, TokenStream::new()),
        (Ok(()), None) => unreachable!("no errors, so the model was validated"),
    }
}

fn no_args(args: TokenStream, what: &str, errors: &mut Errors) {
    if !args.is_empty() {
        errors.at(args, format!("{what} takes no arguments"));
    }
}

/// `#[cmc::roles] item`.
pub(crate) fn roles(args: TokenStream, item: &Item) -> TokenStream {
    let mut errors = Errors::default();
    no_args(args, "#[cmc::roles]", &mut errors);
    let ast = RolesEnum::parse(item, &mut errors);
    let roles = ast
        .as_ref()
        .and_then(|ast| validate::roles(ast, &mut errors));
    match (errors.finish(()), roles) {
        (Ok(()), Some(roles)) => expand::roles(&roles, item),
        (Err(errors), roles) => {
            let fallback = match (&ast, &roles) {
                (Some(ast), Some(roles)) if ast.item.generics.params.is_empty() => {
                    expand::roles_fallback(roles.name, roles.roles.first().map(|r| r.ty))
                }
                _ => TokenStream::new(),
            };
            expand::error(errors, item, fallback)
        }
        (Ok(()), None) => unreachable!("no errors, so the roles were validated"),
    }
}
