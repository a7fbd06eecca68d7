//! Compile-time detection of the sources a type offers (autoref
//! specialization). Generated code calls these on a concrete type; method
//! resolution then picks the most specific implementation that applies.
//! Not public API: the macros use it through `cmc::__private`.
//!
//! * `(&Has::<T>::new()).state_fn()`, `.hash_fn()`, `.debug_fn()`: each
//!   `Some` when `T` implements the trait, `None` otherwise (one probe per
//!   source, so the engine knows them all and `--fingerprint` can pick
//!   any).
//! * `(&&&Best::<T>::new()).best()`: the best source's function, for a field
//!   of a derived [`StateHash`]; a type with none is a compile error that
//!   says what to do.

use std::fmt::Debug;
use std::hash::Hash;
use std::marker::PhantomData;

use super::{debug_hash, HashFn, StateHash};
use crate::identity::hasher::StateHasher;

/// A probe for which sources `T` has.
pub struct Has<T: ?Sized>(PhantomData<T>);

impl<T: ?Sized> Has<T> {
    /// A probe.
    #[allow(clippy::new_without_default, reason = "generated-code hook")]
    pub fn new() -> Self {
        Has(PhantomData)
    }
}

impl<T: ?Sized> Clone for Has<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: ?Sized> Copy for Has<T> {}

impl<T: ?Sized> Debug for Has<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Has")
    }
}

fn via_state<T: StateHash + ?Sized>(v: &T, h: &mut StateHasher) {
    v.state_hash(h)
}

fn via_hash<T: Hash + ?Sized>(v: &T, h: &mut StateHasher) {
    v.hash(h)
}

macro_rules! has {
    ($yes:ident, $no:ident, $method:ident, $bound:path, $f:ident) => {
        /// The probe's answer when `T` has the source.
        pub trait $yes<T: ?Sized> {
            /// Its function.
            fn $method(self) -> Option<HashFn<T>>;
        }

        impl<T: $bound + ?Sized> $yes<T> for &Has<T> {
            fn $method(self) -> Option<HashFn<T>> {
                Some($f::<T>)
            }
        }

        /// The probe's answer when it does not.
        pub trait $no<T: ?Sized> {
            /// Nothing.
            fn $method(self) -> Option<HashFn<T>>;
        }

        impl<T: ?Sized> $no<T> for Has<T> {
            fn $method(self) -> Option<HashFn<T>> {
                None
            }
        }
    };
}

has!(HasState, NoState, state_fn, StateHash, via_state);
has!(HasHash, NoHash, hash_fn, Hash, via_hash);
has!(HasDebug, NoDebug, debug_fn, Debug, debug_hash);

/// A probe for the best source of `T`.
pub struct Best<T: ?Sized>(PhantomData<T>);

impl<T: ?Sized> Best<T> {
    /// A probe.
    #[allow(clippy::new_without_default, reason = "generated-code hook")]
    pub fn new() -> Self {
        Best(PhantomData)
    }
}

impl<T: ?Sized> Clone for Best<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: ?Sized> Copy for Best<T> {}

impl<T: ?Sized> Debug for Best<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Best")
    }
}

/// First choice: `StateHash`.
pub trait BestState<T: ?Sized> {
    /// The function.
    fn best(self) -> HashFn<T>;
}

impl<T: StateHash + ?Sized> BestState<T> for &&&Best<T> {
    fn best(self) -> HashFn<T> {
        via_state::<T>
    }
}

/// Second choice: `Hash`.
pub trait BestHash<T: ?Sized> {
    /// The function.
    fn best(self) -> HashFn<T>;
}

impl<T: Hash + ?Sized> BestHash<T> for &&Best<T> {
    fn best(self) -> HashFn<T> {
        via_hash::<T>
    }
}

/// Third choice: canonical `Debug`.
pub trait BestDebug<T: ?Sized> {
    /// The function.
    fn best(self) -> HashFn<T>;
}

impl<T: Debug + ?Sized> BestDebug<T> for &Best<T> {
    fn best(self) -> HashFn<T> {
        debug_hash::<T>
    }
}

/// Implemented by no type: the bound that turns "this field has no
/// fingerprint" into an error message that says what to do.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be part of a cmc state: it implements neither `cmc::StateHash`, `Hash` nor `Debug`",
    label = "no fingerprint for this field",
    note = "derive `Debug` (or `cmc::StateHash`) for it, or leave the field out of the state with `#[cmc(skip)]`"
)]
pub trait Fingerprintable {}

/// No source: a compile error at the field.
pub trait BestNone<T: ?Sized> {
    /// Never compiles.
    fn best(self) -> HashFn<T>
    where
        T: Fingerprintable;
}

impl<T: ?Sized> BestNone<T> for Best<T> {
    fn best(self) -> HashFn<T>
    where
        T: Fingerprintable,
    {
        unreachable!("no type implements Fingerprintable")
    }
}
