//! Collecting errors so that the user sees every mistake at once.

use std::fmt::Display;

use quote::ToTokens;

/// The mistakes found so far, combined into one `syn::Error`.
#[derive(Default)]
pub(crate) struct Errors {
    all: Option<syn::Error>,
}

impl Errors {
    /// Records a mistake at `tokens`.
    pub(crate) fn at(&mut self, tokens: impl ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// Records an error (which may itself combine several).
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.all {
            Some(all) => all.combine(error),
            None => self.all = Some(error),
        }
    }

    /// `Ok(value)` when nothing was recorded.
    pub(crate) fn finish<T>(self, value: T) -> syn::Result<T> {
        match self.all {
            Some(all) => Err(all),
            None => Ok(value),
        }
    }
}
