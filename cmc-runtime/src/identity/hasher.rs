//! The hasher every source of identity writes into ([`StateHasher`]),
//! and the choice of source a model makes ([`FingerprintMode`]).

/// How a process's state is fingerprinted, that is, which states the search
/// considers the same (the environment's network and timers are always
/// fingerprinted by their meaning, whatever the mode). Without a choice,
/// each type uses the best source it offers: [`FingerprintMode::State`],
/// then [`FingerprintMode::Hash`], then [`FingerprintMode::Debug`], then
/// [`FingerprintMode::Typed`] where the executable describes the type, then
/// [`FingerprintMode::Heap`] (see [`crate::identity`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FingerprintMode {
    /// The raw pages of the process's arena: the fastest, and exact about
    /// bytes, so states that differ only in where objects were allocated
    /// (or in garbage, or in a hash map's random keys) count twice.
    Bytes,
    /// The canonical heap: objects reachable from the process, with
    /// pointers replaced by canonical addresses from breadth-first access
    /// chains (see [`crate::identity::canon`]). Allocation order and garbage no longer
    /// matter; a hash map's keys and layout still do. The last resort, for
    /// types with no other source.
    Heap,
    /// The type's [`StateHash`](crate::StateHash) (cmc's own state-hashing
    /// trait, derivable): by meaning, with fields left out where the user
    /// says so. The first choice.
    State,
    /// The type's own `Hash` implementation: exact about what the type says
    /// matters, like stateright. Restore still comes from pages, so no
    /// `Clone` is needed.
    Hash,
    /// The type's `Debug` output, canonicalized (maps and sets count as
    /// unordered): for types that offer nothing better, such as third-party
    /// ones. Exact about what `Debug` shows.
    Debug,
    /// A user function returning a hashable abstraction of the process
    /// ([`Model::abstraction`](crate::Model::abstraction)): CMC's "abstract state". Sound only when
    /// states with equal abstractions behave alike.
    Abstract,
    /// The value walked by its type information (the executable's DWARF,
    /// see [`crate::identity::typed`]): fields, not padding; live
    /// elements, not spare capacity; map entries, not bucket layout. For
    /// types with no `StateHash`, `Hash` or `Debug`.
    Typed,
}

impl FingerprintMode {
    /// The name `--fingerprint` takes.
    pub fn name(self) -> &'static str {
        match self {
            FingerprintMode::Bytes => "bytes",
            FingerprintMode::Heap => "heap",
            FingerprintMode::State => "state",
            FingerprintMode::Hash => "hash",
            FingerprintMode::Debug => "debug",
            FingerprintMode::Abstract => "abstract",
            FingerprintMode::Typed => "typed",
        }
    }
}

/// The hasher state hashes are fed to: a 128-bit multiply-fold stream
/// hash with fixed keys (see `hash::FoldStream`), so fingerprints are the
/// same in every run. It is not keyed against adversaries: a fingerprint
/// needs no defence against chosen inputs, only a low chance of collision.
#[derive(Debug, Clone, Default)]
pub struct StateHasher(pub(crate) crate::sys::hash::FoldStream);

impl StateHasher {
    /// The 128-bit result.
    pub fn finish128(&self) -> u128 {
        self.0.finish128()
    }
}

impl std::hash::Hasher for StateHasher {
    fn finish(&self) -> u64 {
        self.0.finish128() as u64
    }

    /// A long run of bytes (a large `Vec<u8>`, `String`, or slice of
    /// numbers hashed by their `Hash`) is hashed in chunks, whose hashes
    /// are remembered by the pages that hold them (see `identity::chunks`).
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        if bytes.len() >= crate::identity::chunks::MIN_RUN_BYTES {
            crate::identity::chunks::write_run(&mut self.0, bytes);
        } else {
            self.0.bytes(bytes)
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.0.word(i as u64)
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.0.word(i as u64)
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.0.word(i as u64)
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0.word(i)
    }

    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.0.word(i as u64);
        self.0.word((i >> 64) as u64)
    }

    #[inline]
    fn write_i8(&mut self, i: i8) {
        self.0.word(i as u64)
    }

    #[inline]
    fn write_i16(&mut self, i: i16) {
        self.0.word(i as u64)
    }

    #[inline]
    fn write_i32(&mut self, i: i32) {
        self.0.word(i as u64)
    }

    #[inline]
    fn write_i64(&mut self, i: i64) {
        self.0.word(i as u64)
    }

    #[inline]
    fn write_i128(&mut self, i: i128) {
        self.write_u128(i as u128)
    }

    #[inline]
    fn write_isize(&mut self, i: isize) {
        self.0.word(i as u64)
    }

    /// Pointers hash through here (`Hash` of a function pointer or a raw
    /// pointer): one into the program image hashes as (module, offset), so
    /// it is the same in every run whatever address randomization did.
    #[inline]
    fn write_usize(&mut self, i: usize) {
        let v = crate::sys::layout::modules().relocate(i as u64);
        self.0.word(v)
    }
}

/// Feeds the slice `items` to `h` as a long run of values, each hashed by
/// `each`, which must read nothing but the value's own bytes: its length,
/// then the sum of its chunks' terms.
pub(crate) fn write_values<T>(h: &mut StateHasher, items: &[T], each: fn(&T, &mut StateHasher)) {
    let size = size_of::<T>();
    let per = (crate::identity::chunks::CHUNK_BYTES / size.max(1)).max(1);
    let sum = if size == 0 {
        0
    } else {
        crate::identity::chunks::run(
            items.as_ptr() as usize,
            size_of_val(items),
            per * size,
            each as usize,
            |i| {
                let piece = &items[i * per..items.len().min((i + 1) * per)];
                let mut e = StateHasher::default();
                for x in piece {
                    each(x, &mut e);
                }
                e.finish128()
            },
        )
    };
    std::hash::Hasher::write_u64(h, items.len() as u64);
    std::hash::Hasher::write_u128(h, sum);
}
