//! State identity: how cmc decides that two states are the same.
//!
//! Bytes are how states are stored and restored; they are not how states are
//! compared. Real Rust state holds `HashMap`s with per-map random keys,
//! `Vec`s with stale bytes in their spare capacity, B-tree nodes with dead
//! slots: equal values, different bytes. So every type that is part of a
//! state (the process type, the shared variables, the messages) is
//! fingerprinted from the best *source* it offers, in this order:
//!
//! 1. [`StateHash`], cmc's own state-hashing trait: implemented here for the
//!    standard types protocol code keeps its state in (maps and sets count
//!    by their contents, whatever their hasher keys and insertion history;
//!    vectors by their live elements), and derivable for user types with
//!    `#[derive(cmc::StateHash)]`, with `#[cmc(skip)]` to leave a field out;
//! 2. the type's own [`Hash`](std::hash::Hash);
//! 3. its `Debug` output, canonicalized ([`debug_hash`]): anonymous `{ … }`
//!    groups, which is how maps and sets print, count as unordered
//!    collections, so a `HashMap` inside a third-party type counts by its
//!    contents;
//! 4. for process types and shared variables only, their type
//!    information ([`typed`]): the value walked by the layout the compiler
//!    describes in the executable's debugging information;
//! 5. for process types and shared variables only, the canonical heap
//!    ([`crate::identity::canon`]), when the executable does not describe the type.
//!
//! Which sources a type has is detected at compile time, where the type is
//! concrete: `#[cmc::process]` and `#[derive(cmc::StateHash)]` probe for
//! them (see [`probe`]). The engine only asks this module for a hash.

pub mod canon;
pub(crate) mod chunks;
mod debug;
pub(crate) mod hasher;
pub mod probe;
pub mod rename;
mod std_impls;
pub mod typed;
pub mod visited;

pub use debug::debug_hash;

use std::fmt;

use crate::identity::hasher::{FingerprintMode, StateHasher};

/// A value's contribution to a state fingerprint, by its meaning: two values
/// that behave the same must feed the hasher the same data, whatever their
/// bytes (hasher keys, spare capacity, allocation history).
///
/// cmc implements it for the standard types, and `#[derive(cmc::StateHash)]`
/// implements it for structs and enums field by field: each field by its own
/// `StateHash`, or else its `Hash`, or else its canonical `Debug`; fields
/// marked `#[cmc(skip)]` (caches, statistics: data that never changes what
/// the process does) are left out.
///
/// ```
/// use std::collections::HashMap;
///
/// #[derive(Debug, cmc::StateHash)]
/// struct Node {
///     routes: HashMap<u32, (u32, u8)>,
///     #[cmc(skip)]
///     packets_seen: u64,
/// }
///
/// let mut a = Node { routes: HashMap::new(), packets_seen: 0 };
/// a.routes.insert(1, (7, 2));
/// a.routes.insert(2, (3, 1));
/// let mut b = Node { routes: HashMap::new(), packets_seen: 9 };
/// b.routes.insert(2, (3, 1));
/// b.routes.insert(1, (7, 2));
/// assert_eq!(cmc::identity::fingerprint(&a), cmc::identity::fingerprint(&b));
/// ```
pub trait StateHash {
    /// Whether [`state_hash`](StateHash::state_hash) reads nothing but the
    /// value's own `size_of` bytes: no pointer is followed, no global
    /// read. cmc then remembers the hash of a long run of such values (a
    /// large `Vec<u64>`) by the memory pages that hold it, so that a
    /// transition that changes one element does not rehash the others.
    /// False unless an implementation says otherwise: cmc's own say so for
    /// numbers, `bool`, `char`, and arrays, tuples, options of them.
    const SELF_CONTAINED: bool = false;

    /// Whether the value's hash is that of its bytes as they lie in memory
    /// (a fixed-width integer): cmc then hashes a long run of such values
    /// as bytes, at once. Implies [`SELF_CONTAINED`](StateHash::SELF_CONTAINED).
    /// Not for user types: padding bytes are not part of a value.
    #[doc(hidden)]
    const RAW_BYTES: bool = false;

    /// Feeds the value's meaning to `h`.
    fn state_hash(&self, h: &mut StateHasher);
}

/// The 128-bit fingerprint of one value by its [`StateHash`].
pub fn fingerprint<T: StateHash + ?Sized>(value: &T) -> u128 {
    let mut h = StateHasher::default();
    value.state_hash(&mut h);
    h.finish128()
}

/// A way to hash a value into a [`StateHasher`].
pub type HashFn<T> = fn(&T, &mut StateHasher);

/// The sources a type offers, as detected where it is concrete.
pub struct Sources<T: ?Sized> {
    /// Its [`StateHash`].
    pub state: Option<HashFn<T>>,
    /// Its `Hash`.
    pub hash: Option<HashFn<T>>,
    /// Its canonical `Debug`.
    pub debug: Option<HashFn<T>>,
}

impl<T: ?Sized> Sources<T> {
    /// No source known (the engine falls back to the canonical heap).
    pub fn none() -> Self {
        Sources {
            state: None,
            hash: None,
            debug: None,
        }
    }

    /// The canonical `Debug` only: what every message type has.
    pub fn debug_only() -> Self
    where
        T: fmt::Debug,
    {
        Sources {
            state: None,
            hash: None,
            debug: Some(debug_hash::<T>),
        }
    }

    /// The best source, in cmc's order of preference, if any.
    pub fn best(&self) -> Option<(FingerprintMode, HashFn<T>)> {
        None.or(self.state.map(|f| (FingerprintMode::State, f)))
            .or(self.hash.map(|f| (FingerprintMode::Hash, f)))
            .or(self.debug.map(|f| (FingerprintMode::Debug, f)))
    }

    /// The function of source `mode`, if the type offers it.
    pub fn get(&self, mode: FingerprintMode) -> Option<HashFn<T>> {
        match mode {
            FingerprintMode::State => self.state,
            FingerprintMode::Hash => self.hash,
            FingerprintMode::Debug => self.debug,
            _ => None,
        }
    }
}

impl<T> Sources<T> {
    /// The best source including the typed walk ([`typed`]), which a type
    /// offers when the executable describes it: what the engine uses when
    /// the model does not choose.
    pub fn best_or_typed(&self) -> Option<(FingerprintMode, HashFn<T>)> {
        self.best_or_walk(typed::available::<T>, typed::typed_hash::<T>)
    }

    /// [`Sources::best_or_typed`] with the typed walk given: whether it
    /// describes the type, and the walk (the engine's, for a type it knows
    /// only by these; see `engine::erased`).
    pub(crate) fn best_or_walk(
        &self,
        available: fn() -> Result<(), String>,
        walk: HashFn<T>,
    ) -> Option<(FingerprintMode, HashFn<T>)> {
        self.best().or_else(|| {
            available()
                .is_ok()
                .then_some((FingerprintMode::Typed, walk))
        })
    }
}

impl<T: ?Sized> Clone for Sources<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: ?Sized> Copy for Sources<T> {}

impl<T: ?Sized> fmt::Debug for Sources<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sources")
            .field("state", &self.state.is_some())
            .field("hash", &self.hash.is_some())
            .field("debug", &self.debug.is_some())
            .finish()
    }
}

/// Which source one type of a model was fingerprinted from, for
/// `cargo cmc check -v` and the JSON result.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TypeSource {
    /// `process`, `shared` or `message`.
    pub role: String,
    /// The type's name.
    pub type_name: String,
    /// The source.
    pub source: FingerprintMode,
    /// Under the typed walk: where it has to guess (see
    /// [`typed::guesses`]): unions it hashes by their bytes, raw pointers
    /// outside the standard library it follows to one element.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guesses: Vec<String>,
}

impl fmt::Display for TypeSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.role,
            self.type_name,
            self.source.name()
        )?;
        if !self.guesses.is_empty() {
            write!(f, " (guessing at: {})", self.guesses.join("; "))?;
        }
        Ok(())
    }
}

impl TypeSource {
    /// The source of type `T` in role `role`.
    pub(crate) fn of<T>(role: &str, source: FingerprintMode) -> Self {
        let guesses = if source == FingerprintMode::Typed {
            typed::guesses::<T>()
        } else {
            Vec::new()
        };
        TypeSource {
            role: role.into(),
            type_name: std::any::type_name::<T>().into(),
            source,
            guesses,
        }
    }
}
