//! Hashing a value by walking it with its type table ([`super::dwarf`]).

use std::hash::Hasher;

use super::dwarf::{Shape, TyId, Types};
use super::ids::{IdPlan, Mode};
use crate::identity::hasher::StateHasher;

type Map<K, V> = hashbrown::HashMap<K, V, std::hash::BuildHasherDefault<KeyHasher>>;

/// A multiply-fold hasher for the memo's keys (addresses and type ids,
/// chosen by no adversary).
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        crate::sys::hash::fmix64(self.0)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
}

/// The memo and the current path of a walk, kept between walks so that a
/// walk allocates nothing once they have grown.
#[derive(Default)]
pub(crate) struct Scratch {
    memo: Map<(usize, TyId), u128>,
    path: Map<(usize, TyId), usize>,
    /// The hashes of objects outside the arenas (a configuration behind an
    /// `Arc` made before the check, the program's constants), for the
    /// whole check: such memory is part of no state (it is never restored),
    /// so its meaning is taken once.
    outside: Map<(usize, TyId), u128>,
    /// The fields the model declares to hold process identifiers
    /// ([`super::ids`]).
    pub(crate) ids: IdPlan,
}

impl Scratch {
    /// A check begins.
    pub(crate) fn new_check(&mut self) {
        self.outside.clear();
    }
}

/// Tags that keep different kinds of pointer outcome apart.
const NULL: u8 = 0;
const EMPTY: u8 = 1;
const TARGET: u8 = 2;
const UNREADABLE: u8 = 3;
const CYCLE: u8 = 4;
const DEAD: u8 = 5;
/// A sequence of identifiers in ascending order (a sorted set), and in
/// any other order.
const SORTED: u8 = 6;
const ORDERED: u8 = 7;

/// Deeper than this, a value is cut off (a tag stands for the rest): the
/// checker's own stack must not overflow on a long linked list.
const MAX_DEPTH: usize = 2_000;

/// One walk: the memo of pointees already hashed (shared objects hash once),
/// the pointees on the current path (cycles), and the readable memory.
pub(crate) struct Walker<'t> {
    pub(crate) types: &'t mut Types,
    s: &'t mut Scratch,
    depth: usize,
    segments: &'static [(usize, usize)],
    bias: u64,
    /// Pointers that could not be followed (not into an arena or the
    /// program): counted, for `-v`.
    pub(crate) unreadable: u64,
    /// When set, every datum hashed is also written out as a line
    /// `field.path = hex` (see [`super::dump`]).
    pub(crate) log: Option<Log>,
    /// Whether process identifiers are renamed in this walk: a renaming is
    /// active (`StateHasher::renaming`) and the model declares where
    /// its identifiers are.
    renaming: bool,
    /// The next run of elements is a multiset (the field being walked is
    /// declared unordered, `Model::unordered_in`): taken by the run.
    bag: bool,
}

/// The text form of a walk.
#[derive(Default)]
pub(crate) struct Log {
    path: Vec<String>,
    pub(crate) out: String,
}

/// The program's loaded segments, `[start, end)` (readable memory outside
/// the arenas).
fn segments() -> &'static [(usize, usize)] {
    static SEGMENTS: std::sync::OnceLock<Vec<(usize, usize)>> = std::sync::OnceLock::new();
    SEGMENTS.get_or_init(|| {
        let _sys = crate::sys::scope::system_scope();
        let mut out: Vec<(usize, usize)> = Vec::new();
        crate::sys::layout::each_module(|bias, phdrs| {
            for p in phdrs
                .iter()
                .filter(|p| p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_R != 0)
            {
                let start = bias + p.p_vaddr as usize;
                out.push((start, start + p.p_memsz as usize));
            }
            true
        });
        out.sort_unstable();
        out
    })
}

/// Whether `[addr, addr + len)` can be read: inside the committed part of
/// an arena, or inside a loaded segment of the program.
pub(crate) fn readable(addr: usize, len: usize) -> bool {
    if len == 0 {
        return true;
    }
    let Some(end) = addr.checked_add(len) else {
        return false;
    };
    if let Some(ctl) = crate::memory::arena::find(addr) {
        let base = ctl.base.as_ptr() as usize;
        let committed = ctl.committed.load(std::sync::atomic::Ordering::Relaxed);
        return end <= base + committed;
    }
    let segs = segments();
    let i = segs.partition_point(|&(s, _)| s <= addr);
    if i.checked_sub(1).is_some_and(|i| end <= segs[i].1) {
        return true;
    }
    probe(addr, end)
}

/// Whether every page of `[addr, end)` can be read, asked of the kernel
/// (one byte of each page copied with `process_vm_readv`, which fails
/// instead of faulting): for memory outside the arenas and the program,
/// which a state reaches only exceptionally (an object the system
/// allocator made before the check began).
fn probe(addr: usize, end: usize) -> bool {
    let page = crate::sys::PAGE;
    let mut at = addr;
    while at < end {
        if PROBED.with(|p| p.borrow().contains(&(at / page))) {
            at = (at / page + 1) * page;
            continue;
        }
        if !crate::sys::layout::byte_readable(at) {
            return false;
        }
        PROBED.with(|p| {
            let mut p = p.borrow_mut();
            if p.len() < MAX_PROBED {
                let _sys = crate::sys::scope::system_scope();
                p.insert(at / page);
            }
        });
        at = (at / page + 1) * page;
    }
    true
}

/// At most this many pages are remembered as readable.
const MAX_PROBED: usize = 1 << 16;

thread_local! {
    /// Pages outside the arenas and the program found readable during the
    /// current check: an object a state reaches there (made by the system
    /// allocator before the check began, such as a configuration behind an
    /// `Arc`) lives as long as the state holds it, so its pages stay
    /// mapped; asking the kernel again on every walk would cost a system
    /// call per pointer. Forgotten when a check begins ([`new_check`]).
    static PROBED: std::cell::RefCell<std::collections::HashSet<usize>> =
        std::cell::RefCell::new(std::collections::HashSet::new());
}

/// Forgets the pages [`probe`] found readable (a new check begins).
pub(crate) fn new_check() {
    PROBED.with(|p| {
        let _sys = crate::sys::scope::system_scope();
        p.borrow_mut().clear();
    });
}

/// Reads a `T` at `addr`.
///
/// # Safety
/// `[addr, addr + size_of::<T>())` must be readable.
unsafe fn read<T: Copy>(addr: usize) -> T {
    // SAFETY: the caller's contract; unaligned reads are allowed.
    unsafe { std::ptr::read_unaligned(addr as *const T) }
}

impl<'t> Walker<'t> {
    pub(crate) fn new(types: &'t mut Types, s: &'t mut Scratch) -> Self {
        s.memo.clear();
        s.path.clear();
        let renaming = !s.ids.is_empty() && StateHasher::default().renaming();
        Walker {
            types,
            s,
            depth: 0,
            segments: segments(),
            bias: crate::sys::layout::modules().exe_bias,
            unreadable: 0,
            log: None,
            renaming,
            bag: false,
        }
    }

    /// Feeds `bytes` to `h` (and to the log).
    fn put(&mut self, h: &mut StateHasher, bytes: &[u8]) {
        h.write(bytes);
        if let Some(log) = &mut self.log {
            use std::fmt::Write;
            // A string's bytes (a `String` is a `vec` of them) as text.
            let text = std::str::from_utf8(bytes)
                .ok()
                .filter(|_| log.path.last().is_some_and(|f| f == "vec"))
                .filter(|t| !t.is_empty() && !t.chars().any(char::is_control));
            if let Some(t) = text {
                let _ = writeln!(log.out, "{} = {t:?}", log.path.join("."));
                return;
            }
            let _ = write!(log.out, "{} =", log.path.join("."));
            for b in bytes.iter().take(64) {
                let _ = write!(log.out, " {b:02x}");
            }
            if bytes.len() > 64 {
                let _ = write!(log.out, " … ({} bytes)", bytes.len());
            }
            log.out.push('\n');
        }
    }

    /// Feeds a process identifier to `h` (renamed, under a renaming).
    fn put_id(&mut self, h: &mut StateHasher, id: u64) {
        h.write_process_id(id);
        if let Some(log) = &mut self.log {
            use std::fmt::Write;
            let shown = h.renamed_id(id);
            let _ = writeln!(log.out, "{} = process id {shown}", log.path.join("."));
        }
    }

    /// Feeds a word that may point into the program to `h`.
    fn put_word(&mut self, h: &mut StateHasher, w: usize) {
        h.write_usize(w);
        if let Some(log) = &mut self.log {
            use std::fmt::Write;
            let v = crate::sys::layout::modules().relocate(w as u64);
            let _ = writeln!(log.out, "{} = word {v:#x}", log.path.join("."));
        }
    }

    fn size(&self, ty: TyId) -> usize {
        self.types.tys[ty as usize].size as usize
    }

    /// Hashes the value of type `ty` at `addr` into `h`.
    ///
    /// # Safety
    /// The value's own `size` bytes at `addr` must be readable; everything
    /// it points to is checked before it is read.
    pub(crate) unsafe fn value(&mut self, ty: TyId, addr: usize, h: &mut StateHasher) {
        // SAFETY: the caller's contract.
        unsafe { self.value_in(ty, addr, h, &Mode::Normal) }
    }

    /// Whether the bytes of the plain type `ty` can be hashed in one run
    /// in `mode` (not when they hold identifiers to rename).
    fn bulk(&mut self, ty: TyId, mode: &Mode) -> bool {
        if self.renaming {
            mode.is_normal() && !self.s.ids.touched(self.types, ty)
        } else {
            // Nor when they hold hidden fields.
            !self.s.ids.has_hidden() || !self.s.ids.touched(self.types, ty)
        }
    }

    /// [`Walker::value`] in `mode` (see [`super::ids`]): where the value
    /// holds process identifiers under a renaming.
    ///
    /// # Safety
    /// As [`Walker::value`].
    unsafe fn value_in(&mut self, ty: TyId, addr: usize, h: &mut StateHasher, mode: &Mode) {
        let t = std::sync::Arc::clone(&self.types.tys[ty as usize]);
        let size = t.size as usize;
        if t.plain && self.bulk(ty, mode) {
            // SAFETY: the caller's contract covers the value's bytes.
            self.put(h, unsafe {
                std::slice::from_raw_parts(addr as *const u8, size)
            });
            return;
        }
        let ids = matches!(mode, Mode::Ids);
        let shape: &Shape = &t.shape;
        // SAFETY: every read below is inside the value's own bytes, covered
        // by the caller's contract, or in memory `readable` just approved.
        unsafe {
            match *shape {
                Shape::Skip => {}
                Shape::Plain if ids => match super::ids::integer_size(self.types, ty) {
                    Some(n) => self.put_id(h, read_uint(addr, n)),
                    None => self.put(h, std::slice::from_raw_parts(addr as *const u8, size)),
                },
                Shape::Word if ids => self.put_id(h, read::<usize>(addr) as u64),
                Shape::Plain | Shape::Opaque => {
                    self.put(h, std::slice::from_raw_parts(addr as *const u8, size))
                }
                Shape::Word => self.put_word(h, read::<usize>(addr)),
                Shape::FnPtr => self.put_word(h, read::<usize>(addr)),
                Shape::Struct(ref fields) => {
                    let declared = if self.renaming && mode.is_normal() {
                        self.s.ids.declared(self.types, ty)
                    } else {
                        None
                    };
                    let (hidden, unordered) = if self.s.ids.has_hidden() {
                        (
                            self.s.ids.hidden(self.types, ty),
                            self.s.ids.unordered(self.types, ty),
                        )
                    } else {
                        (None, None)
                    };
                    for (k, (at, f, name)) in fields.iter().enumerate() {
                        if hidden.as_ref().is_some_and(|h| h[k]) {
                            continue;
                        }
                        // A `Vec` (checked when declared): its run of
                        // elements takes the mark.
                        self.bag = unordered.as_ref().is_some_and(|u| u[k]);
                        if let Some(log) = &mut self.log {
                            log.path.push(name.clone());
                        }
                        let at = addr + *at as usize;
                        match (&declared, mode) {
                            (None, Mode::Normal) => self.value(*f, at, h),
                            _ => {
                                let d = declared.as_ref().and_then(|d| d[k].as_ref());
                                self.value_in(*f, at, h, &mode.field(name, d));
                            }
                        }
                        self.bag = false;
                        if let Some(log) = &mut self.log {
                            log.path.pop();
                        }
                    }
                }
                Shape::Array { elem, count } => self.run(elem, addr, count as usize, h, mode),
                Shape::Enum {
                    discr,
                    ref variants,
                } => {
                    let raw = discr.map(|(at, n)| read_uint(addr + at as usize, n));
                    let mask = |v: u64, n: u8| {
                        if n >= 8 {
                            v
                        } else {
                            v & ((1u64 << (n * 8)) - 1)
                        }
                    };
                    let chosen = match (raw, discr) {
                        (Some(raw), Some((_, n))) => variants
                            .iter()
                            .position(|(d, _)| d.is_some_and(|d| mask(d, n) == raw))
                            .or_else(|| variants.iter().position(|(d, _)| d.is_none())),
                        _ => (!variants.is_empty()).then_some(0),
                    };
                    match chosen {
                        Some(i) => {
                            self.put(h, &(i as u32).to_le_bytes());
                            if mode.is_normal() {
                                self.value(variants[i].1, addr, h);
                            } else {
                                self.value_in(variants[i].1, addr, h, &mode.variant());
                            }
                        }
                        None => {
                            self.put(h, &(u32::MAX).to_le_bytes());
                            self.put(h, &(raw.unwrap_or(0)).to_le_bytes());
                        }
                    }
                }
                Shape::Ptr(p) => {
                    let target = read::<usize>(addr);
                    self.pointee(p, target, h, mode);
                }
                Shape::Slice { pointee, tail } => {
                    let (ptr, len) = (read::<usize>(addr), read::<usize>(addr + 8));
                    self.put(h, &(len as u64).to_le_bytes());
                    match tail {
                        None => self.elements(pointee, ptr, len, h, mode),
                        Some((at, elem)) => {
                            let head = self.size(pointee);
                            if ptr == 0 || !readable(ptr, head.min(at as usize)) {
                                self.unreadable += 1;
                                self.put(h, &(UNREADABLE).to_le_bytes());
                                return;
                            }
                            self.value(pointee, ptr, h);
                            self.elements(elem, ptr + at as usize, len, h, &Mode::Normal);
                        }
                    }
                }
                Shape::Dyn { head, tail } => {
                    let (ptr, vtable) = (read::<usize>(addr), read::<usize>(addr + 8));
                    self.dyn_value(head, tail, ptr, vtable, h);
                }
                Shape::Vec { ptr, len, elem } => {
                    let (p, n) = (
                        read::<usize>(addr + ptr as usize),
                        read::<usize>(addr + len as usize),
                    );
                    self.put(h, &(n as u64).to_le_bytes());
                    self.elements(elem, p, n, h, mode);
                }
                Shape::Deque {
                    ptr,
                    cap,
                    head,
                    len,
                    elem,
                } => {
                    let p = read::<usize>(addr + ptr as usize);
                    let cap = read::<usize>(addr + cap as usize);
                    let head = read::<usize>(addr + head as usize);
                    let n = read::<usize>(addr + len as usize);
                    self.put(h, &(n as u64).to_le_bytes());
                    let stride = self.size(elem);
                    if n == 0 || stride == 0 {
                        return;
                    }
                    if cap < n || !readable(p, cap * stride) {
                        self.unreadable += 1;
                        self.put(h, &(UNREADABLE).to_le_bytes());
                        return;
                    }
                    let at = |i: usize| p + ((head + i) % cap) * stride;
                    let mut set = Set::new(ids && self.sorted(elem, (0..n).map(at), h));
                    for i in 0..n {
                        let at = at(i);
                        let e = set.element(h);
                        self.value_in(elem, at, e, mode);
                        set.add();
                    }
                    set.finish(self, h);
                }
                Shape::Table {
                    ctrl,
                    mask,
                    items,
                    elem,
                } => {
                    let ctrl = read::<usize>(addr + ctrl as usize);
                    let mask = read::<usize>(addr + mask as usize);
                    let items = read::<usize>(addr + items as usize);
                    self.put(h, &(items as u64).to_le_bytes());
                    if items == 0 {
                        return;
                    }
                    let stride = self.size(elem);
                    let buckets = mask.wrapping_add(1);
                    if !readable(ctrl, buckets)
                        || !readable(ctrl.wrapping_sub(buckets * stride), buckets * stride)
                    {
                        self.unreadable += 1;
                        self.put(h, &(UNREADABLE).to_le_bytes());
                        return;
                    }
                    let entry = mode.entry();
                    let mut sum = 0u128;
                    for i in 0..buckets {
                        if read::<u8>(ctrl + i) & 0x80 == 0 {
                            let mut e = StateHasher::default();
                            self.value_in(elem, ctrl - (i + 1) * stride, &mut e, &entry);
                            sum = sum.wrapping_add(e.finish128());
                        }
                    }
                    self.put(h, &(sum).to_le_bytes());
                }
                Shape::BTree(ref b) => {
                    let node = read::<usize>(addr + b.node as usize);
                    let height = read::<usize>(addr + b.height as usize);
                    let mut count = 0u64;
                    // Under a renaming, entries as a set: the image holds
                    // the renamed keys in another order.
                    let mut set = Set::new(self.renaming);
                    if node != 0 {
                        let entry = mode.entry();
                        self.btree_node(b, node, height, &mut count, h, &entry, &mut set);
                    }
                    set.finish(self, h);
                    self.put(h, &(count).to_le_bytes());
                }
                Shape::Weak {
                    ptr,
                    strong,
                    value,
                    ty,
                } => {
                    let p = read::<usize>(addr + ptr as usize);
                    if p == usize::MAX || p == 0 || !readable(p + strong as usize, 8) {
                        self.put(h, &(DEAD).to_le_bytes());
                        return;
                    }
                    if read::<usize>(p + strong as usize) == 0 {
                        self.put(h, &(DEAD).to_le_bytes());
                        return;
                    }
                    self.pointee(ty, p + value as usize, h, &Mode::Normal);
                }
                Shape::SmallVec {
                    capacity,
                    inline,
                    inline_cap,
                    ptr,
                    len,
                    elem,
                } => {
                    let cap = read::<usize>(addr + capacity as usize);
                    if cap as u64 > inline_cap {
                        let p = read::<usize>(addr + ptr as usize);
                        let n = read::<usize>(addr + len as usize);
                        self.put(h, &(n as u64).to_le_bytes());
                        self.elements(elem, p, n, h, mode);
                    } else {
                        self.put(h, &(cap as u64).to_le_bytes());
                        self.run(elem, addr + inline as usize, cap, h, mode);
                    }
                }
                Shape::Bytes { ptr, len } => {
                    let p = read::<usize>(addr + ptr as usize);
                    let n = read::<usize>(addr + len as usize);
                    self.put(h, &(n as u64).to_le_bytes());
                    if n > 0 && readable(p, n) {
                        self.put(h, std::slice::from_raw_parts(p as *const u8, n));
                    } else if n > 0 {
                        self.unreadable += 1;
                        self.put(h, &(UNREADABLE).to_le_bytes());
                    }
                }
            }
        }
    }

    /// `count` values of `elem` in a row at `addr` (inside a value), in
    /// `mode` (identifiers: as a set).
    ///
    /// # Safety
    /// As [`Walker::value`], for the whole run.
    unsafe fn run(
        &mut self,
        elem: TyId,
        addr: usize,
        count: usize,
        h: &mut StateHasher,
        mode: &Mode,
    ) {
        let bag = std::mem::take(&mut self.bag);
        let t = std::sync::Arc::clone(&self.types.tys[elem as usize]);
        let stride = t.size as usize;
        if t.plain && !bag && self.bulk(elem, mode) {
            // SAFETY: the caller's contract.
            self.put(h, unsafe {
                std::slice::from_raw_parts(addr as *const u8, stride * count)
            });
            return;
        }
        let ids = matches!(mode, Mode::Ids);
        let mut set =
            Set::new(bag || (ids && self.sorted(elem, (0..count).map(|i| addr + i * stride), h)));
        for i in 0..count {
            let e = set.element(h);
            // SAFETY: the caller's contract.
            unsafe { self.value_in(elem, addr + i * stride, e, mode) };
            set.add();
        }
        set.finish(self, h);
    }

    /// Whether the identifiers of type `elem` at `addrs` are a sorted set
    /// (ascending), tagged into `h`: then the image of the sequence under
    /// a renaming is the set of renamed identifiers, kept sorted, as the
    /// renamed program keeps it, and the sequence is hashed as a set; in
    /// any other order (identifiers in the order they arrived, or not
    /// integers) it is hashed in its order, each renamed.
    fn sorted(
        &mut self,
        elem: TyId,
        addrs: impl Iterator<Item = usize>,
        h: &mut StateHasher,
    ) -> bool {
        let size = match &self.types.tys[elem as usize].shape {
            Shape::Word => Some(8),
            _ => super::ids::integer_size(self.types, elem),
        };
        let sorted = size.is_some_and(|n| {
            let mut last = None;
            addrs.into_iter().all(|at| {
                // SAFETY: the caller's contract covers the elements.
                let v = unsafe { read_uint(at, n) };
                last.replace(v).is_none_or(|l| l <= v)
            })
        });
        self.put(h, &[if sorted { SORTED } else { ORDERED }]);
        sorted
    }

    /// `count` values of `elem` at `ptr`, which is checked first.
    fn elements(&mut self, elem: TyId, ptr: usize, count: usize, h: &mut StateHasher, mode: &Mode) {
        let stride = self.size(elem);
        if count == 0 || stride == 0 {
            return;
        }
        let Some(len) = stride.checked_mul(count) else {
            self.put(h, &(UNREADABLE).to_le_bytes());
            return;
        };
        if !readable(ptr, len) {
            self.unreadable += 1;
            self.put(h, &(UNREADABLE).to_le_bytes());
            return;
        }
        // SAFETY: just checked.
        unsafe { self.run(elem, ptr, count, h, mode) };
    }

    /// What a thin pointer to a `ty` at `target` contributes.
    fn pointee(&mut self, ty: TyId, target: usize, h: &mut StateHasher, mode: &Mode) {
        if target == 0 {
            self.put(h, &(NULL).to_le_bytes());
            return;
        }
        let size = self.size(ty);
        if size == 0 {
            self.put(h, &(EMPTY).to_le_bytes());
            return;
        }
        self.put(h, &(TARGET).to_le_bytes());
        let sub = if mode.is_normal() {
            self.child(ty, target, size)
        } else {
            // Identifiers behind a box: hashed in their mode, not
            // memoised (the memo is of values read as they are).
            if !readable(target, size) || self.depth >= MAX_DEPTH {
                self.unreadable += 1;
                u128::from(UNREADABLE) << 64
            } else {
                self.depth += 1;
                let mut sub = StateHasher::default();
                // SAFETY: `readable` approved the value's bytes.
                unsafe { self.value_in(ty, target, &mut sub, mode) };
                self.depth -= 1;
                sub.finish128()
            }
        };
        self.put(h, &(sub).to_le_bytes());
    }

    /// The hash of the `ty` at `target` on its own: memoised (a shared
    /// object hashes once), a cycle back to an object on the current path
    /// hashes as its distance.
    fn child(&mut self, ty: TyId, target: usize, size: usize) -> u128 {
        let key = (target, ty);
        if let Some(&m) = self.s.memo.get(&key).filter(|_| self.log.is_none()) {
            return m;
        }
        if let Some(&d) = self.s.path.get(&key) {
            return u128::from(CYCLE) << 64 | (self.depth - d) as u128;
        }
        if !readable(target, size) {
            self.unreadable += 1;
            let w = crate::sys::layout::modules().relocate(target as u64);
            return u128::from(UNREADABLE) << 64 | u128::from(w);
        }
        if self.depth >= MAX_DEPTH {
            return u128::from(UNREADABLE) << 96;
        }
        let outside = crate::memory::arena::find(target).is_none();
        // Under a renaming, what is outside is hashed again: the same
        // object hashes differently under different renamings.
        let outside = outside && !self.renaming;
        if outside && self.log.is_none() {
            if let Some(&m) = self.s.outside.get(&key) {
                return m;
            }
        }
        if let Some(log) = self.log.as_mut().filter(|_| outside) {
            use std::fmt::Write;
            let _ = writeln!(log.out, "{} = (outside the arenas)", log.path.join("."));
        }
        self.s.path.insert(key, self.depth);
        self.depth += 1;
        let mut sub = StateHasher::default();
        // SAFETY: `readable` approved the value's bytes.
        unsafe { self.value(ty, target, &mut sub) };
        self.depth -= 1;
        self.s.path.remove(&key);
        let r = sub.finish128();
        self.s.memo.insert(key, r);
        if outside {
            self.s.outside.insert(key, r);
        }
        r
    }

    /// A `dyn` value: its concrete type's name, then the value.
    fn dyn_value(
        &mut self,
        head: Option<TyId>,
        tail: u32,
        ptr: usize,
        vtable: usize,
        h: &mut StateHasher,
    ) {
        if ptr == 0 {
            self.put(h, &(NULL).to_le_bytes());
            return;
        }
        let concrete = match self.types.dyn_types.get(&(vtable as u64)) {
            Some(&c) => c,
            None => {
                let c = {
                    let _sys = crate::sys::scope::system_scope();
                    self.types
                        .vtable_type((vtable as u64).wrapping_sub(self.bias))
                        .ok()
                        .flatten()
                };
                self.types.dyn_types.insert(vtable as u64, c);
                c
            }
        };
        let Some(c) = concrete else {
            // No description: the vtable says which type, by its place.
            self.unreadable += 1;
            self.put(h, &(UNREADABLE).to_le_bytes());
            self.put_word(h, vtable);
            return;
        };
        let concrete = std::sync::Arc::clone(&self.types.tys[c as usize]);
        self.put(h, concrete.name.as_bytes());
        // The vtable's third word is the value's alignment.
        if !readable(vtable, 24) {
            self.put(h, &(UNREADABLE).to_le_bytes());
            return;
        }
        // SAFETY: just checked.
        let align = unsafe { read::<usize>(vtable + 16) }.max(1);
        if let Some(head) = head {
            let hsize = self.size(head).min(tail as usize);
            if !readable(ptr, hsize) {
                self.put(h, &(UNREADABLE).to_le_bytes());
                return;
            }
            // SAFETY: just checked.
            unsafe { self.value(head, ptr, h) };
        }
        let at = ptr + (tail as usize).next_multiple_of(align);
        let size = self.size(c);
        if size == 0 {
            return;
        }
        let sub = self.child(c, at, size);
        self.put(h, &(sub).to_le_bytes());
    }

    #[allow(clippy::too_many_arguments)]
    fn btree_node(
        &mut self,
        b: &super::dwarf::BTreeShape,
        node: usize,
        height: usize,
        count: &mut u64,
        h: &mut StateHasher,
        entry: &Mode,
        set: &mut Set,
    ) {
        let (ks, vs) = (self.size(b.key), self.size(b.val));
        if !readable(node + b.len as usize, 2) {
            self.put(h, &(UNREADABLE).to_le_bytes());
            return;
        }
        // SAFETY: just checked.
        let len = unsafe { read::<u16>(node + b.len as usize) } as usize;
        let keys = node + b.keys as usize;
        let vals = node + b.vals as usize;
        let edges = node + b.edges as usize;
        if len > 11
            || !readable(keys, ks * len)
            || !readable(vals, vs * len)
            || (height > 0 && !readable(edges, 8 * (len + 1)))
            || height > 64
        {
            self.put(h, &(UNREADABLE).to_le_bytes());
            return;
        }
        let (key_mode, val_mode) = (entry.field("__0", None), entry.field("__1", None));
        for i in 0..=len {
            if height > 0 {
                // SAFETY: checked above.
                let child = unsafe { read::<usize>(edges + 8 * i) };
                self.btree_node(b, child, height - 1, count, h, entry, set);
            }
            if i < len {
                *count += 1;
                let e = set.element(h);
                // SAFETY: checked above.
                unsafe {
                    self.value_in(b.key, keys + i * ks, e, &key_mode);
                    self.value_in(b.val, vals + i * vs, e, &val_mode);
                }
                set.add();
            }
        }
        let _ = self.segments;
    }
}

/// Elements hashed in order into the value's hasher, or, as a set, each
/// on its own and summed (identifiers under a renaming: the image holds
/// them in another order).
struct Set {
    on: bool,
    sum: u128,
    /// The element being hashed, when a set.
    one: Option<StateHasher>,
}

impl Set {
    fn new(on: bool) -> Set {
        Set {
            on,
            sum: 0,
            one: None,
        }
    }

    /// Where the next element is hashed.
    fn element<'a>(&'a mut self, h: &'a mut StateHasher) -> &'a mut StateHasher {
        if self.on {
            self.one.insert(StateHasher::default())
        } else {
            h
        }
    }

    /// The element hashed into [`Set::element`] is complete.
    fn add(&mut self) {
        if let Some(one) = self.one.take() {
            self.sum = self.sum.wrapping_add(one.finish128());
        }
    }

    fn finish(self, w: &mut Walker<'_>, h: &mut StateHasher) {
        if self.on {
            w.put(h, &self.sum.to_le_bytes());
        }
    }
}

/// An unsigned integer of `n` bytes at `addr`.
///
/// # Safety
/// The bytes must be readable.
unsafe fn read_uint(addr: usize, n: u8) -> u64 {
    // SAFETY: the caller's contract.
    unsafe {
        match n {
            1 => u64::from(read::<u8>(addr)),
            2 => u64::from(read::<u16>(addr)),
            4 => u64::from(read::<u32>(addr)),
            _ => read::<u64>(addr),
        }
    }
}
