//! The typed identity: a value fingerprinted by walking it with the type
//! information the compiler wrote into the executable (DWARF), for types
//! that offer no `StateHash`, `Hash` or `Debug` — a third-party type such
//! as raft-rs's `RawNode`.
//!
//! The walk sees what the bytes mean: every field of a struct (never its
//! padding), the live variant of an enum, what a pointer points to
//! (whatever its address), a `Vec`'s live elements (not its spare
//! capacity), a `VecDeque` in logical order, a hash map's entries as an
//! unordered collection (not its random keys or bucket layout), a B-tree's
//! entries in order (not its node shapes), the value an `Rc` or `Arc` holds
//! (not its reference counts), the concrete type and value behind a `dyn`.
//! Shared objects hash once per walk; a cycle hashes as its length.
//!
//! It needs full debugging information (`debug = 2`, which `cargo cmc`
//! builds its harnesses with). The type of a value is found through an
//! *anchor*: a generic function instantiated for that type, whose
//! debugging entry names its type parameter.

mod dwarf;
mod ids;
mod values;

use std::collections::HashMap;

use crate::identity::hasher::StateHasher;
use dwarf::{TyId, Types};

/// The instantiation for `T` is the anchor by which `T`'s debugging entry
/// is found. Its body differs for every `T` (a different string), so no
/// two instantiations are merged.
#[inline(never)]
fn anchor<T: ?Sized>() -> &'static str {
    std::hint::black_box(std::any::type_name::<T>())
}

struct State {
    types: Result<Types, String>,
    scratch: values::Scratch,
    /// The resolved type of each anchor address.
    roots: HashMap<usize, Result<TyId, String>>,
}

thread_local! {
    /// Per thread, not behind a process-wide lock: a search forks its
    /// workers, and a lock another thread (another check in the same test
    /// binary) held at the fork would stay held in the child for ever.
    static STATE: std::cell::RefCell<Option<State>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` on the type table and the entry for `root`. Generic only in
/// its result: the work is [`with_root_dyn`]'s, one copy for every type.
fn with_root<R>(
    root: &Root,
    f: impl FnOnce(&mut Types, TyId, &mut values::Scratch) -> R,
) -> Result<R, String> {
    let mut f = Some(f);
    let mut out = None;
    with_root_dyn(root, &mut |types, id, scratch| {
        out = f.take().map(|f| f(types, id, scratch));
    })?;
    Ok(out.expect("with_root_dyn runs its function once when it succeeds"))
}

fn with_root_dyn(
    root: &Root,
    f: &mut dyn FnMut(&mut Types, TyId, &mut values::Scratch),
) -> Result<(), String> {
    STATE.with(|cell| {
        let _sys = crate::sys::scope::system_scope();
        let mut guard = cell.borrow_mut();
        let st = guard.get_or_insert_with(|| State {
            types: Types::load(),
            scratch: values::Scratch::default(),
            roots: HashMap::new(),
        });
        let id = resolve(st, root)?;
        let types = st.types.as_mut().map_err(|e| e.clone())?;
        f(types, id, &mut st.scratch);
        Ok(())
    })
}

/// A type by its anchor, to be resolved in the type table.
#[derive(Debug)]
pub struct Root {
    key: usize,
    size: usize,
    name: &'static str,
}

impl Root {
    /// The root for values of type `T`.
    pub fn of<T>() -> Root {
        Root {
            key: anchor::<T> as fn() -> &'static str as usize,
            size: size_of::<T>(),
            name: std::any::type_name::<T>(),
        }
    }
}

/// The type table's entry for `root`.
fn resolve(st: &mut State, root: &Root) -> Result<TyId, String> {
    let types = st.types.as_mut().map_err(|e| e.clone())?;
    let id = match st.roots.get(&root.key) {
        Some(r) => r.clone(),
        None => {
            let pc = (root.key as u64).wrapping_sub(crate::sys::layout::modules().exe_bias);
            let r = types.anchor_type(pc);
            st.roots.insert(root.key, r.clone());
            r
        }
    }?;
    if types.tys[id as usize].size != root.size as u64 {
        return Err(format!(
            "the debugging information gives {} a size of {} bytes, not {}",
            root.name, types.tys[id as usize].size, root.size
        ));
    }
    Ok(id)
}

/// Declares where the states of a check hold process identifiers as plain
/// integers (see `Model::ids_in`): `decls` are (type name, field paths), `roots`
/// the types the typed walk hashes, and the fields it leaves out
/// (`hidden`, see `Model::hidden_in`: type name, field names) and those
/// it hashes as multisets (`unordered`, `Model::unordered_in`). Checked
/// against the type information; empty lists forget the last check's.
pub fn declare_ids(
    roots: &[Root],
    decls: &[(String, Vec<String>)],
    hidden: &[(String, Vec<String>)],
    unordered: &[(String, Vec<String>)],
) -> Result<(), String> {
    STATE.with(|cell| {
        let _sys = crate::sys::scope::system_scope();
        let mut guard = cell.borrow_mut();
        let st = guard.get_or_insert_with(|| State {
            types: Types::load(),
            scratch: values::Scratch::default(),
            roots: HashMap::new(),
        });
        st.scratch.ids.clear();
        if decls.is_empty() && hidden.is_empty() && unordered.is_empty() {
            return Ok(());
        }
        if roots.is_empty() {
            return Err(if decls.is_empty() {
                "Model::hidden_in or unordered_in names fields for the walk by type information, but every \
                 type of this model is fingerprinted by its StateHash, which decides what it \
                 hashes: leave the fields out of it instead"
                    .into()
            } else {
                "Model::ids_in names fields that hold identifiers for the walk by \
                 type information, but every type of this model is fingerprinted by \
                 its StateHash: derive cmc::ProcessId on the identifier type instead"
                    .into()
            });
        }
        let mut ids = Vec::new();
        for r in roots {
            ids.push((resolve(st, r)?, r.name));
        }
        let types = st.types.as_mut().map_err(|e| e.clone())?;
        st.scratch.ids.declare(types, &ids, decls, hidden, unordered)
    })
}

/// A check begins: what earlier checks learnt about memory outside the
/// arenas is forgotten. The engine calls it when it starts; a caller of
/// [`typed_hash`] outside a check (a test of the walk) calls it before
/// each value that is a check of its own.
pub fn new_check() {
    values::new_check();
    STATE.with(|cell| {
        if let Some(st) = cell.borrow_mut().as_mut() {
            let _sys = crate::sys::scope::system_scope();
            st.scratch.new_check();
        }
    });
}

/// Whether values of `T` can be fingerprinted by their type information;
/// the reason when not.
pub fn available<T>() -> Result<(), String> {
    with_root_dyn(&Root::of::<T>(), &mut |_, _, _| ())
}

/// Feeds `value`'s meaning to `h`, walking it by its type information.
/// Types cmc cannot describe (no debugging information) hash nothing; the
/// engine asks [`available`] before it chooses this source.
pub fn typed_hash<T>(value: &T, h: &mut StateHasher) {
    // SAFETY: `value` is a live `T`.
    unsafe { typed_hash_at(&Root::of::<T>(), value as *const T as usize, h) }
}

/// [`typed_hash`] of the value of type `root` at `addr`.
///
/// # Safety
/// `addr` holds a live value of the type `root` names.
unsafe fn typed_hash_at(root: &Root, addr: usize, h: &mut StateHasher) {
    let _ = with_root_dyn(root, &mut |types, id, scratch| {
        let mut w = values::Walker::new(types, scratch);
        // SAFETY: the caller's contract; the table's size for the type
        // agrees with the root's (checked when it was resolved).
        unsafe { w.value(id, addr, h) };
    });
}

/// Where the walk of a `T` has to guess, by type name: unions it hashes by
/// their bytes (equal values may count twice there), and raw pointers in
/// types outside the standard library, which it follows to one element
/// (a collection that keeps several behind one, such as a spilled
/// `SmallVec`, is seen through its first). Empty when the type information
/// does not describe `T`.
pub fn guesses<T>() -> Vec<String> {
    guesses_of(&Root::of::<T>())
}

fn guesses_of(root: &Root) -> Vec<String> {
    with_root(root, |types, root, _| {
        let std_lib = |name: &str| {
            [
                "alloc::",
                "core::",
                "std::",
                "hashbrown::",
                "*const alloc::",
                "*const core::",
            ]
            .iter()
            .any(|p| name.starts_with(p))
        };
        let mut out = std::collections::BTreeSet::new();
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![(root, String::new())];
        while let Some((id, parent)) = stack.pop() {
            let t = &types.tys[id as usize];
            let raw = t.name.starts_with("*const ") || t.name.starts_with("*mut ");
            if raw && matches!(t.shape, dwarf::Shape::Ptr(_)) && !std_lib(&parent) {
                out.insert(format!("{} in {parent} (one element followed)", t.name));
            }
            if !seen.insert(id) {
                continue;
            }
            if matches!(t.shape, dwarf::Shape::Opaque) {
                out.insert(format!("{} (by its bytes)", t.name));
            }
            for c in t.shape.children() {
                stack.push((c, t.name.clone()));
            }
        }
        out.into_iter().collect()
    })
    .unwrap_or_default()
}

/// What the walk of `value` hashes, one line per datum: `field.path =
/// bytes in hex` (unordered collections in their storage order). A
/// diagnostic: diff two states that should be one.
pub fn dump<T>(value: &T) -> Result<String, String> {
    // SAFETY: `value` is a live `T`.
    unsafe { dump_at(&Root::of::<T>(), value as *const T as usize) }
}

/// [`dump`] of the value of type `root` at `addr`.
///
/// # Safety
/// `addr` holds a live value of the type `root` names.
unsafe fn dump_at(root: &Root, addr: usize) -> Result<String, String> {
    with_root(root, |types, root, scratch| {
        let mut w = values::Walker::new(types, scratch);
        w.log = Some(values::Log::default());
        let mut h = StateHasher::default();
        // SAFETY: the caller's contract; the sizes agree (checked when the
        // root was resolved).
        unsafe { w.value(root, addr, &mut h) };
        let unreadable = w.unreadable;
        let mut out = w.log.map(|l| l.out).unwrap_or_default();
        if unreadable > 0 {
            out.push_str(&format!("# {unreadable} pointers not followed\n"));
        }
        out
    })
}

/// The name of every type the walk of a `T` knows, with its shape (a
/// diagnostic for `cargo cmc check -v` and tests).
pub fn describe<T>() -> Result<String, String> {
    describe_of(&Root::of::<T>())
}

fn describe_of(root: &Root) -> Result<String, String> {
    with_root(root, |types, root, _| {
        let mut out = String::new();
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![(root, 0usize)];
        while let Some((id, depth)) = stack.pop() {
            let t = &types.tys[id as usize];
            out.push_str(&format!(
                "{}{} ({} B): {}\n",
                "  ".repeat(depth),
                t.name,
                t.size,
                shape_name(&t.shape)
            ));
            if !seen.insert(id) || depth > 8 {
                continue;
            }
            for c in t.shape.children().into_iter().rev() {
                stack.push((c, depth + 1));
            }
        }
        out
    })
}

fn shape_name(s: &dwarf::Shape) -> &'static str {
    use dwarf::Shape::*;
    match s {
        Skip => "skip",
        Plain => "plain",
        Word => "word",
        Opaque => "opaque bytes",
        Struct(_) => "struct",
        Array { .. } => "array",
        Enum { .. } => "enum",
        Ptr(_) => "pointer",
        FnPtr => "function pointer",
        Slice { .. } => "slice",
        Dyn { .. } => "dyn",
        Vec { .. } => "vec",
        Deque { .. } => "deque",
        Table { .. } => "hash table",
        BTree(_) => "b-tree",
        Weak { .. } => "weak",
        Bytes { .. } => "bytes",
        SmallVec { .. } => "smallvec",
    }
}
