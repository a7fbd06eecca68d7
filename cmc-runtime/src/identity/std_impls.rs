//! [`StateHash`] for the standard types protocol code keeps its state in.
//!
//! Sequences hash their length, then their live elements in order (never
//! spare capacity). Unordered collections (`HashMap`, `HashSet`,
//! hashbrown's, `BinaryHeap`) hash their length and the sum of one 128-bit
//! hash per entry, so neither the hasher's keys nor the insertion history
//! matter. Ordered maps and sets hash their entries in order. Pointers
//! (`Box`, `Rc`, `Arc`, references) hash what they point to.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, HashSet, LinkedList, VecDeque};
use std::hash::Hasher;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::StateHash;
use crate::identity::hasher::StateHasher;

macro_rules! int {
    ($($t:ty => $w:ident, $raw:expr);* $(;)?) => {$(
        impl StateHash for $t {
            const SELF_CONTAINED: bool = true;
            const RAW_BYTES: bool = $raw;
            #[inline]
            fn state_hash(&self, h: &mut StateHasher) {
                h.$w(*self)
            }
        }
    )*};
}

// The flag: whether the hash is that of the bytes (`RAW_BYTES`); not for
// `usize` and `isize`, which hash as possible pointers into the program
// image.
int!(
    u8 => write_u8, true; u16 => write_u16, true; u32 => write_u32, true;
    u64 => write_u64, true; u128 => write_u128, true; usize => write_usize, false;
    i8 => write_i8, true; i16 => write_i16, true; i32 => write_i32, true;
    i64 => write_i64, true; i128 => write_i128, true; isize => write_isize, false;
);

impl StateHash for bool {
    const SELF_CONTAINED: bool = true;
    #[inline]
    fn state_hash(&self, h: &mut StateHasher) {
        h.write_u8(u8::from(*self))
    }
}

impl StateHash for char {
    const SELF_CONTAINED: bool = true;
    #[inline]
    fn state_hash(&self, h: &mut StateHasher) {
        h.write_u32(u32::from(*self))
    }
}

impl StateHash for f32 {
    const SELF_CONTAINED: bool = true;
    fn state_hash(&self, h: &mut StateHasher) {
        h.write_u32(self.to_bits())
    }
}

impl StateHash for f64 {
    const SELF_CONTAINED: bool = true;
    fn state_hash(&self, h: &mut StateHasher) {
        h.write_u64(self.to_bits())
    }
}

impl StateHash for () {
    const SELF_CONTAINED: bool = true;
    fn state_hash(&self, _: &mut StateHasher) {}
}

impl StateHash for str {
    fn state_hash(&self, h: &mut StateHasher) {
        h.write(self.as_bytes());
        h.write_u8(0xff);
    }
}

impl StateHash for String {
    fn state_hash(&self, h: &mut StateHasher) {
        self.as_str().state_hash(h)
    }
}

impl<T: StateHash> StateHash for [T] {
    /// A long slice of values whose hash reads only their own bytes is
    /// hashed in chunks, whose hashes are remembered by the pages that hold
    /// them (see `identity::chunks`).
    fn state_hash(&self, h: &mut StateHasher) {
        if T::SELF_CONTAINED && size_of_val(self) >= super::chunks::MIN_RUN_BYTES {
            if T::RAW_BYTES {
                // SAFETY: an integer type: every byte of the slice is
                // initialised and part of a value.
                let bytes = unsafe {
                    std::slice::from_raw_parts(self.as_ptr().cast::<u8>(), size_of_val(self))
                };
                h.write_u64(self.len() as u64);
                h.write(bytes);
            } else {
                super::hasher::write_values(h, self, T::state_hash);
            }
            return;
        }
        h.write_usize(self.len());
        for x in self {
            x.state_hash(h);
        }
    }
}

impl<T: StateHash, const N: usize> StateHash for [T; N] {
    const SELF_CONTAINED: bool = T::SELF_CONTAINED;
    fn state_hash(&self, h: &mut StateHasher) {
        self.as_slice().state_hash(h)
    }
}

impl<T: StateHash> StateHash for Vec<T> {
    fn state_hash(&self, h: &mut StateHasher) {
        self.as_slice().state_hash(h)
    }
}

impl<T: StateHash> StateHash for VecDeque<T> {
    /// In logical order, wherever the ring buffer wrapped.
    fn state_hash(&self, h: &mut StateHasher) {
        h.write_usize(self.len());
        for x in self {
            x.state_hash(h);
        }
    }
}

impl<T: StateHash> StateHash for LinkedList<T> {
    fn state_hash(&self, h: &mut StateHasher) {
        h.write_usize(self.len());
        for x in self {
            x.state_hash(h);
        }
    }
}

impl<T: StateHash + ?Sized> StateHash for &T {
    fn state_hash(&self, h: &mut StateHasher) {
        (**self).state_hash(h)
    }
}

impl<T: StateHash + ?Sized> StateHash for &mut T {
    fn state_hash(&self, h: &mut StateHasher) {
        (**self).state_hash(h)
    }
}

impl<T: StateHash + ?Sized> StateHash for Box<T> {
    fn state_hash(&self, h: &mut StateHasher) {
        (**self).state_hash(h)
    }
}

impl<T: StateHash + ?Sized> StateHash for Rc<T> {
    fn state_hash(&self, h: &mut StateHasher) {
        (**self).state_hash(h)
    }
}

impl<T: StateHash + ?Sized> StateHash for Arc<T> {
    fn state_hash(&self, h: &mut StateHasher) {
        (**self).state_hash(h)
    }
}

impl<T: StateHash + ToOwned + ?Sized> StateHash for std::borrow::Cow<'_, T> {
    fn state_hash(&self, h: &mut StateHasher) {
        (**self).state_hash(h)
    }
}

impl<T: StateHash> StateHash for Option<T> {
    const SELF_CONTAINED: bool = T::SELF_CONTAINED;
    fn state_hash(&self, h: &mut StateHasher) {
        match self {
            None => h.write_u8(0),
            Some(x) => {
                h.write_u8(1);
                x.state_hash(h)
            }
        }
    }
}

impl<T: StateHash, E: StateHash> StateHash for Result<T, E> {
    const SELF_CONTAINED: bool = T::SELF_CONTAINED && E::SELF_CONTAINED;
    fn state_hash(&self, h: &mut StateHasher) {
        match self {
            Ok(x) => {
                h.write_u8(0);
                x.state_hash(h)
            }
            Err(e) => {
                h.write_u8(1);
                e.state_hash(h)
            }
        }
    }
}

impl<T: StateHash + Copy> StateHash for Cell<T> {
    const SELF_CONTAINED: bool = T::SELF_CONTAINED;
    fn state_hash(&self, h: &mut StateHasher) {
        self.get().state_hash(h)
    }
}

impl<T: StateHash + ?Sized> StateHash for RefCell<T> {
    /// Panics if the value is mutably borrowed, which cannot happen while
    /// the engine fingerprints a state (no handler runs).
    fn state_hash(&self, h: &mut StateHasher) {
        self.borrow().state_hash(h)
    }
}

impl<T: StateHash + ?Sized> StateHash for std::sync::Mutex<T> {
    /// A poisoned mutex hashes its value like a healthy one.
    fn state_hash(&self, h: &mut StateHasher) {
        match self.lock() {
            Ok(g) => g.state_hash(h),
            Err(poisoned) => poisoned.into_inner().state_hash(h),
        }
    }
}

impl<T: StateHash + ?Sized> StateHash for std::sync::RwLock<T> {
    fn state_hash(&self, h: &mut StateHasher) {
        match self.read() {
            Ok(g) => g.state_hash(h),
            Err(poisoned) => poisoned.into_inner().state_hash(h),
        }
    }
}

impl<T: StateHash> StateHash for std::cell::OnceCell<T> {
    fn state_hash(&self, h: &mut StateHasher) {
        self.get().state_hash(h)
    }
}

impl<T: StateHash> StateHash for std::sync::OnceLock<T> {
    fn state_hash(&self, h: &mut StateHasher) {
        self.get().state_hash(h)
    }
}

impl<T: ?Sized> StateHash for std::marker::PhantomData<T> {
    const SELF_CONTAINED: bool = true;
    fn state_hash(&self, _: &mut StateHasher) {}
}

impl<T: StateHash> StateHash for std::cmp::Reverse<T> {
    const SELF_CONTAINED: bool = T::SELF_CONTAINED;
    fn state_hash(&self, h: &mut StateHasher) {
        self.0.state_hash(h)
    }
}

impl<T: StateHash> StateHash for std::num::Wrapping<T> {
    const SELF_CONTAINED: bool = T::SELF_CONTAINED;
    fn state_hash(&self, h: &mut StateHasher) {
        self.0.state_hash(h)
    }
}

impl<T: StateHash> StateHash for std::ops::Range<T> {
    const SELF_CONTAINED: bool = T::SELF_CONTAINED;
    fn state_hash(&self, h: &mut StateHasher) {
        self.start.state_hash(h);
        self.end.state_hash(h);
    }
}

impl<T: StateHash> StateHash for std::ops::RangeInclusive<T> {
    const SELF_CONTAINED: bool = T::SELF_CONTAINED;
    fn state_hash(&self, h: &mut StateHasher) {
        self.start().state_hash(h);
        self.end().state_hash(h);
    }
}

macro_rules! via_get {
    ($($t:ty),* $(,)?) => {$(
        impl StateHash for $t {
            const SELF_CONTAINED: bool = true;
            fn state_hash(&self, h: &mut StateHasher) {
                self.get().state_hash(h)
            }
        }
    )*};
}

via_get!(
    std::num::NonZeroU8,
    std::num::NonZeroU16,
    std::num::NonZeroU32,
    std::num::NonZeroU64,
    std::num::NonZeroU128,
    std::num::NonZeroUsize,
    std::num::NonZeroI8,
    std::num::NonZeroI16,
    std::num::NonZeroI32,
    std::num::NonZeroI64,
    std::num::NonZeroI128,
    std::num::NonZeroIsize,
);

macro_rules! atomic {
    ($($t:ty),* $(,)?) => {$(
        impl StateHash for $t {
            const SELF_CONTAINED: bool = true;
            fn state_hash(&self, h: &mut StateHasher) {
                self.load(std::sync::atomic::Ordering::Relaxed).state_hash(h)
            }
        }
    )*};
}

atomic!(
    std::sync::atomic::AtomicBool,
    std::sync::atomic::AtomicU8,
    std::sync::atomic::AtomicU16,
    std::sync::atomic::AtomicU32,
    std::sync::atomic::AtomicU64,
    std::sync::atomic::AtomicUsize,
    std::sync::atomic::AtomicI8,
    std::sync::atomic::AtomicI16,
    std::sync::atomic::AtomicI32,
    std::sync::atomic::AtomicI64,
    std::sync::atomic::AtomicIsize,
);

impl StateHash for Duration {
    const SELF_CONTAINED: bool = true;
    fn state_hash(&self, h: &mut StateHasher) {
        h.write_u64(self.as_secs());
        h.write_u32(self.subsec_nanos());
    }
}

impl StateHash for std::time::Instant {
    /// Its offset from an arbitrary fixed instant: two equal instants hash
    /// equally. (A state that holds a clock reading is a state of this
    /// run's clock.)
    fn state_hash(&self, h: &mut StateHasher) {
        let mut s = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(self, &mut s);
        h.write_u64(s.finish())
    }
}

impl StateHash for std::time::SystemTime {
    fn state_hash(&self, h: &mut StateHasher) {
        match self.duration_since(std::time::UNIX_EPOCH) {
            Ok(d) => {
                h.write_u8(0);
                d.state_hash(h)
            }
            Err(e) => {
                h.write_u8(1);
                e.duration().state_hash(h)
            }
        }
    }
}

impl StateHash for Ipv4Addr {
    const SELF_CONTAINED: bool = true;
    fn state_hash(&self, h: &mut StateHasher) {
        h.write(&self.octets())
    }
}

impl StateHash for Ipv6Addr {
    const SELF_CONTAINED: bool = true;
    fn state_hash(&self, h: &mut StateHasher) {
        h.write(&self.octets())
    }
}

impl StateHash for IpAddr {
    const SELF_CONTAINED: bool = true;
    fn state_hash(&self, h: &mut StateHasher) {
        match self {
            IpAddr::V4(a) => {
                h.write_u8(4);
                a.state_hash(h)
            }
            IpAddr::V6(a) => {
                h.write_u8(6);
                a.state_hash(h)
            }
        }
    }
}

impl StateHash for SocketAddrV4 {
    const SELF_CONTAINED: bool = true;
    fn state_hash(&self, h: &mut StateHasher) {
        self.ip().state_hash(h);
        h.write_u16(self.port());
    }
}

impl StateHash for SocketAddrV6 {
    const SELF_CONTAINED: bool = true;
    fn state_hash(&self, h: &mut StateHasher) {
        self.ip().state_hash(h);
        h.write_u16(self.port());
        h.write_u32(self.flowinfo());
        h.write_u32(self.scope_id());
    }
}

impl StateHash for SocketAddr {
    const SELF_CONTAINED: bool = true;
    fn state_hash(&self, h: &mut StateHasher) {
        match self {
            SocketAddr::V4(a) => {
                h.write_u8(4);
                a.state_hash(h)
            }
            SocketAddr::V6(a) => {
                h.write_u8(6);
                a.state_hash(h)
            }
        }
    }
}

macro_rules! tuple {
    ($($name:ident)+) => {
        impl<$($name: StateHash),+> StateHash for ($($name,)+) {
            const SELF_CONTAINED: bool = true $(&& $name::SELF_CONTAINED)+;
            #[allow(non_snake_case, reason = "the type parameters name the fields")]
            fn state_hash(&self, h: &mut StateHasher) {
                let ($($name,)+) = self;
                $($name.state_hash(h);)+
            }
        }
    };
}

tuple!(A);
tuple!(A B);
tuple!(A B C);
tuple!(A B C D);
tuple!(A B C D E);
tuple!(A B C D E F);
tuple!(A B C D E F G);
tuple!(A B C D E F G H);
tuple!(A B C D E F G H I);
tuple!(A B C D E F G H I J);
tuple!(A B C D E F G H I J K);
tuple!(A B C D E F G H I J K L);

impl<K: StateHash, V: StateHash> StateHash for BTreeMap<K, V> {
    /// In key order; as a set of entries while process identifiers are
    /// renamed (the renamed keys would sort otherwise).
    fn state_hash(&self, h: &mut StateHasher) {
        if crate::identity::rename::active() {
            return unordered(self.len(), self.iter(), h, |(k, v), e| {
                k.state_hash(e);
                v.state_hash(e);
            });
        }
        h.write_usize(self.len());
        for (k, v) in self {
            k.state_hash(h);
            v.state_hash(h);
        }
    }
}

impl<T: StateHash> StateHash for BTreeSet<T> {
    /// In order; as a set while process identifiers are renamed.
    fn state_hash(&self, h: &mut StateHasher) {
        if crate::identity::rename::active() {
            return unordered(self.len(), self.iter(), h, |x, e| x.state_hash(e));
        }
        h.write_usize(self.len());
        for x in self {
            x.state_hash(h);
        }
    }
}

/// An unordered collection: its length and the sum of its entries' own
/// 128-bit hashes (AdHash), so the order of iteration does not matter.
fn unordered<I: Iterator>(
    len: usize,
    items: I,
    h: &mut StateHasher,
    each: impl Fn(I::Item, &mut StateHasher),
) {
    let mut sum = 0u128;
    for item in items {
        let mut e = StateHasher::default();
        each(item, &mut e);
        sum = sum.wrapping_add(e.finish128());
    }
    h.write_usize(len);
    h.write_u128(sum);
}

impl<K: StateHash, V: StateHash, S> StateHash for HashMap<K, V, S> {
    fn state_hash(&self, h: &mut StateHasher) {
        unordered(self.len(), self.iter(), h, |(k, v), e| {
            k.state_hash(e);
            v.state_hash(e);
        })
    }
}

impl<T: StateHash, S> StateHash for HashSet<T, S> {
    fn state_hash(&self, h: &mut StateHasher) {
        unordered(self.len(), self.iter(), h, |x, e| x.state_hash(e))
    }
}

impl<K: StateHash, V: StateHash, S> StateHash for hashbrown::HashMap<K, V, S> {
    fn state_hash(&self, h: &mut StateHasher) {
        unordered(self.len(), self.iter(), h, |(k, v), e| {
            k.state_hash(e);
            v.state_hash(e);
        })
    }
}

impl<T: StateHash, S> StateHash for hashbrown::HashSet<T, S> {
    fn state_hash(&self, h: &mut StateHasher) {
        unordered(self.len(), self.iter(), h, |x, e| x.state_hash(e))
    }
}

impl<T: StateHash> StateHash for BinaryHeap<T> {
    /// A multiset: the heap's internal order depends on its history.
    fn state_hash(&self, h: &mut StateHasher) {
        unordered(self.len(), self.iter(), h, |x, e| x.state_hash(e))
    }
}
