//! Process identifiers that are plain integers, named by type and field
//! ([`Model::ids_in`](crate::Model::ids_in)): under a renaming of
//! interchangeable processes (`identity::rename`), the typed walk
//! writes the integers at those fields as process identifiers.
//!
//! A declaration is a type's name (as `std::any::type_name` writes it,
//! generic arguments left out) and paths of field names from it. A path
//! passes through what holds values without naming them — `Option` and
//! other enums' variants, `Box`, `Rc`, `Arc`, `Vec`, `VecDeque`, arrays,
//! slices, and the values of maps — and ends at the identifiers: integers,
//! or containers of them. Where it ends:
//!
//! * every integer is an identifier (a tuple of integers is a pair of
//!   identifiers);
//! * a sequence of identifiers in ascending order is a sorted set, and its
//!   image is the set of renamed identifiers, sorted as the renamed
//!   program keeps it (the image of the voters `[1, 2, 3]` is `[1, 2, 3]`,
//!   not `[2, 1, 3]`); in any other order (the order they arrived in) it
//!   is renamed element by element, in its order. Both are sound: a
//!   sequence sorted by chance only merges less;
//! * a map's keys are identifiers, its values are hashed as they are.
//!
//! Under a renaming every `BTreeMap` and `BTreeSet` is also hashed as a
//! set of entries, as the `StateHash` of the standard collections is.
//!
//! What can be declared is checked against the type information when the
//! check starts ([`IdPlan::declare`]): a type that no state holds, a field
//! it does not have, a path that ends at something other than integers,
//! are errors then, not counts that are silently wrong.

use std::sync::Arc;

use super::dwarf::{Shape, TyId, Types};

/// What remains of the paths along which a value holds identifiers (each
/// a list of field names; an empty one: the value itself is identifiers).
pub(crate) type Rests = Arc<[Arc<[String]>]>;

/// The paths each field of a declared struct is on.
pub(crate) type Fields = Arc<[Option<Rests>]>;

/// How the walk reads a value for identifiers.
#[derive(Clone)]
pub(crate) enum Mode {
    /// As it is (a declared type marks its fields).
    Normal,
    /// Every integer in it is a process identifier; sequences are sets.
    Ids,
    /// The identifiers are where these paths lead.
    Path(Rests),
    /// An enum's variant, passed through: each field along the paths.
    Each(Rests),
    /// A map's entry (a key and a value): the key is identifiers when
    /// `key`, the value is read in the mode given.
    Entry { key: bool, val: Option<Rests> },
}

impl Mode {
    /// The mode of a field named `name` of a struct read in this mode,
    /// where `declared` holds the paths a declaration gives the field.
    pub(crate) fn field(&self, name: &str, declared: Option<&Rests>) -> Mode {
        match self {
            Mode::Normal => declared.map_or(Mode::Normal, |r| along(r.clone())),
            Mode::Ids => Mode::Ids,
            Mode::Path(rests) => {
                let sub: Vec<Arc<[String]>> = rests
                    .iter()
                    .filter(|p| p.first().is_some_and(|f| same_field(f, name)))
                    .map(|p| Arc::from(&p[1..]))
                    .collect();
                if sub.is_empty() {
                    Mode::Normal
                } else {
                    along(sub.into())
                }
            }
            Mode::Each(rests) => along(rests.clone()),
            // A map's bucket is the tuple (key, value): fields `__0`, `__1`
            // (a set's value, `()`, may have no field at all).
            Mode::Entry { key, val } => match (name, val) {
                ("__0", _) if *key => Mode::Ids,
                ("__1", Some(v)) => along(v.clone()),
                _ => Mode::Normal,
            },
        }
    }

    /// The mode of an enum's variant (a struct of the variant's fields).
    pub(crate) fn variant(&self) -> Mode {
        match self {
            Mode::Path(r) | Mode::Each(r) => Mode::Each(r.clone()),
            other => other.clone(),
        }
    }

    /// The mode of a map's entry.
    pub(crate) fn entry(&self) -> Mode {
        match self {
            Mode::Normal => Mode::Normal,
            Mode::Ids => Mode::Entry {
                key: true,
                val: None,
            },
            Mode::Path(r) | Mode::Each(r) => Mode::Entry {
                key: false,
                val: Some(r.clone()),
            },
            Mode::Entry { .. } => Mode::Normal,
        }
    }

    pub(crate) fn is_normal(&self) -> bool {
        matches!(self, Mode::Normal)
    }
}

/// The mode of a value along `rests`: identifiers if a path ends here.
fn along(rests: Rests) -> Mode {
    if rests.iter().any(|p| p.is_empty()) {
        Mode::Ids
    } else {
        Mode::Path(rests)
    }
}

/// Whether the path component `want` names the field `name` (a tuple's
/// field `0` is `__0` in the type information).
fn same_field(want: &str, name: &str) -> bool {
    want == name || name.strip_prefix("__") == Some(want)
}

/// Whether a type of this name is an integer.
fn integer(name: &str) -> bool {
    matches!(
        name,
        "u8" | "u16" | "u32" | "u64" | "usize" | "i8" | "i16" | "i32" | "i64" | "isize"
    )
}

/// Whether the plain type `ty` is an integer the walk can read as an
/// identifier (and its size).
pub(crate) fn integer_size(types: &Types, ty: TyId) -> Option<u8> {
    let t = &types.tys[ty as usize];
    (integer(&t.name) && matches!(t.size, 1 | 2 | 4 | 8)).then_some(t.size as u8)
}

/// The declarations of a check, and what the walk has learnt of them.
#[derive(Default)]
pub(crate) struct IdPlan {
    /// (type name without generic arguments, the paths from it).
    decls: Vec<(String, Vec<Arc<[String]>>)>,
    /// Per type, once looked up: the paths of each of its fields, if it
    /// is declared.
    by_ty: Vec<Option<Option<Fields>>>,
    /// The structs (and enums' variants) the declarations name, found when
    /// they were checked.
    explicit: std::collections::HashMap<TyId, Fields>,
    /// Per type, once looked up (for plain types): 2 when it holds a
    /// declared type (so its bytes cannot be hashed in one run), 1 when
    /// not.
    touched: Vec<u8>,
    /// The hidden fields ([`Model::hidden_in`](crate::Model::hidden_in)).
    hidden: Marks,
    /// The sequences hashed as multisets
    /// ([`Model::unordered_in`](crate::Model::unordered_in)).
    unordered: Marks,
}

/// Fields of structs marked by a declaration (hidden, unordered).
#[derive(Default)]
struct Marks {
    /// (type name without generic arguments, field names).
    decls: Vec<(String, Vec<String>)>,
    /// The structs the fields are in, found when they were checked: per
    /// field, whether it is marked.
    explicit: std::collections::HashMap<TyId, Arc<[bool]>>,
    /// Per type, once looked up: its marked fields, if any.
    by_ty: Vec<Option<Option<Arc<[bool]>>>>,
}

impl Marks {
    fn clear(&mut self) {
        self.decls.clear();
        self.explicit.clear();
        self.by_ty.clear();
    }

    /// Takes the declarations `decls` of `what`, checked against the
    /// structs among `reachable`; `fits` says why a field cannot be
    /// marked, if it cannot.
    fn declare(
        &mut self,
        types: &Types,
        reachable: &[TyId],
        roots: &[(TyId, &str)],
        decls: &[(String, Vec<String>)],
        what: &str,
        fits: impl Fn(&Types, TyId) -> Result<(), String>,
    ) -> Result<(), String> {
        for (ty, fields) in decls {
            let want = ty.trim();
            if want.is_empty() || fields.is_empty() {
                return Err(format!(
                    "{what}({ty:?}, {fields:?}): name a type and at least one field"
                ));
            }
            for t in named(types, reachable, roots, want, what)? {
                let Shape::Struct(have) = &types.tys[t as usize].shape else {
                    return Err(format!(
                        "{what}({want:?}): {} is an enum; name the struct whose fields are \
                         meant",
                        types.tys[t as usize].name
                    ));
                };
                for f in fields {
                    match have.iter().find(|h| same_field(f.trim(), &h.2)) {
                        None => {
                            return Err(format!(
                                "{what}({want:?}, {f:?}): {} has no field `{}` (its fields: {})",
                                types.tys[t as usize].name,
                                f.trim(),
                                field_names(have)
                            ))
                        }
                        Some(h) => fits(types, h.1).map_err(|e| {
                            format!(
                                "{what}({want:?}, {f:?}): in {}, {e}",
                                types.tys[t as usize].name
                            )
                        })?,
                    }
                }
                self.explicit.insert(t, hidden_mask(have, fields));
            }
            self.decls.push((want.to_string(), fields.clone()));
        }
        Ok(())
    }

    /// Which fields of the struct `ty` are marked, if any are.
    fn get(&mut self, types: &Types, ty: TyId) -> Option<Arc<[bool]>> {
        if self.decls.is_empty() {
            return None;
        }
        let i = ty as usize;
        if self.by_ty.len() <= i {
            self.by_ty.resize(types.tys.len().max(i + 1), None);
        }
        if let Some(known) = &self.by_ty[i] {
            return known.clone();
        }
        let t = &types.tys[i];
        let found = if let Some(f) = self.explicit.get(&ty) {
            Some(f.clone())
        } else if let Shape::Struct(have) = &t.shape {
            // A struct first met after the declarations were checked (a
            // `dyn` value's): by its name.
            let fields: Vec<String> = self
                .decls
                .iter()
                .filter(|d| matches_name(&t.name, &d.0))
                .flat_map(|d| d.1.iter().cloned())
                .collect();
            (!fields.is_empty()).then(|| hidden_mask(have, &fields))
        } else {
            None
        };
        self.by_ty[i] = Some(found.clone());
        found
    }
}

/// Whether the type named `name` is the one a declaration names `want`:
/// by its full name when `want` has generic arguments, else by its name
/// without them.
fn matches_name(name: &str, want: &str) -> bool {
    if want.contains('<') {
        name == want
    } else {
        base(name) == want
    }
}

/// A type's name without its generic arguments.
fn base(name: &str) -> &str {
    name.split('<').next().unwrap_or(name)
}

impl IdPlan {
    pub(crate) fn is_empty(&self) -> bool {
        self.decls.is_empty()
    }

    /// Whether some fields are hidden or unordered (marked).
    pub(crate) fn has_hidden(&self) -> bool {
        !self.hidden.decls.is_empty() || !self.unordered.decls.is_empty()
    }

    /// Forgets the declarations (a check without them begins).
    pub(crate) fn clear(&mut self) {
        self.decls.clear();
        self.explicit.clear();
        self.by_ty.clear();
        self.touched.clear();
        self.hidden.clear();
        self.unordered.clear();
    }

    /// Takes `decls` (type name, field paths with `.` between names) for
    /// the states whose types are `roots`, checking each against the type
    /// information: the type is held by some state, and every path leads
    /// to integers.
    pub(crate) fn declare(
        &mut self,
        types: &mut Types,
        roots: &[(TyId, &str)],
        decls: &[(String, Vec<String>)],
        hidden: &[(String, Vec<String>)],
        unordered: &[(String, Vec<String>)],
    ) -> Result<(), String> {
        self.clear();
        let mut reachable = reachable(types, roots.iter().map(|r| r.0));
        // A type only a `dyn` value holds (a logger's key-value list) is
        // looked for among the concrete types of the program's `dyn`
        // values, when a declaration names one not found otherwise.
        let found = |types: &Types, reachable: &[TyId], want: &str| {
            reachable
                .iter()
                .any(|&t| matches_name(&types.tys[t as usize].name, want))
        };
        let mut extra = Vec::new();
        for (ty, _) in decls.iter().chain(hidden).chain(unordered) {
            let want = ty.trim();
            if !want.is_empty() && !found(types, &reachable, want) {
                extra.extend(types.dyn_types_naming(base(want))?);
            }
        }
        if !extra.is_empty() {
            let mut seen: std::collections::HashSet<TyId> = reachable.iter().copied().collect();
            for t in reachable_from(types, extra) {
                if seen.insert(t) {
                    reachable.push(t);
                }
            }
        }
        let types: &Types = types;
        let mut out = Vec::new();
        for (ty, fields) in decls {
            let want = ty.trim();
            if want.is_empty() || fields.is_empty() {
                return Err(format!(
                    "ids_in({ty:?}, {fields:?}): name a type and at least one field"
                ));
            }
            let matching = named(types, &reachable, roots, want, "ids_in")?;
            let paths: Vec<Arc<[String]>> = fields
                .iter()
                .map(|f| f.split('.').map(|s| s.trim().to_string()).collect())
                .collect();
            for &t in &matching {
                // A struct's fields, or an enum's variants' fields.
                let structs: Vec<TyId> = match &types.tys[t as usize].shape {
                    Shape::Enum { variants, .. } => variants.iter().map(|v| v.1).collect(),
                    _ => vec![t],
                };
                for (path, field) in paths.iter().zip(fields) {
                    if path.iter().any(String::is_empty) {
                        return Err(format!("ids_in({want:?}): the path {field:?} is malformed"));
                    }
                    let has = |s: TyId| match &types.tys[s as usize].shape {
                        Shape::Struct(f) => f.iter().any(|f| same_field(&path[0], &f.2)),
                        _ => false,
                    };
                    let with: Vec<TyId> = structs.iter().copied().filter(|&s| has(s)).collect();
                    let check = |s: TyId| check_path(types, s, path, &mut Vec::new());
                    let r = if with.is_empty() {
                        // The first struct's error names its fields.
                        check(structs[0])
                    } else {
                        with.iter().try_for_each(|&s| check(s))
                    };
                    r.map_err(|e| {
                        format!(
                            "ids_in({want:?}, {field:?}): {e} (in {})",
                            types.tys[t as usize].name
                        )
                    })?;
                }
                for s in structs {
                    let rests = field_rests(types, s, &paths);
                    self.explicit.insert(s, rests);
                }
            }
            out.push((want.to_string(), paths));
        }
        self.decls = out;
        self.hidden
            .declare(types, &reachable, roots, hidden, "hidden_in", |_, _| Ok(()))?;
        self.unordered.declare(
            types,
            &reachable,
            roots,
            unordered,
            "unordered_in",
            |types, f| match types.tys[f as usize].shape {
                Shape::Vec { .. } => Ok(()),
                _ => Err(format!(
                    "the field is a {}, not a `Vec`",
                    types.tys[f as usize].name
                )),
            },
        )?;
        Ok(())
    }

    /// Which fields of the struct `ty` are hidden, if any are.
    pub(crate) fn hidden(&mut self, types: &Types, ty: TyId) -> Option<Arc<[bool]>> {
        self.hidden.get(types, ty)
    }

    /// Which fields of the struct `ty` are unordered sequences, if any are.
    pub(crate) fn unordered(&mut self, types: &Types, ty: TyId) -> Option<Arc<[bool]>> {
        self.unordered.get(types, ty)
    }

    /// The paths of each field of `ty`, if a declaration names it.
    pub(crate) fn declared(&mut self, types: &Types, ty: TyId) -> Option<Fields> {
        let i = ty as usize;
        if self.by_ty.len() <= i {
            self.by_ty.resize(types.tys.len().max(i + 1), None);
        }
        if let Some(known) = &self.by_ty[i] {
            return known.clone();
        }
        let t = &types.tys[i];
        let found = if let Some(f) = self.explicit.get(&ty) {
            Some(f.clone())
        } else if matches!(t.shape, Shape::Struct(_)) {
            // A struct first met after the declarations were checked (a
            // `dyn` value's): by its name.
            let paths: Vec<Arc<[String]>> = self
                .decls
                .iter()
                .filter(|d| matches_name(&t.name, &d.0))
                .flat_map(|d| d.1.iter().cloned())
                .collect();
            (!paths.is_empty()).then(|| field_rests(types, ty, &paths))
        } else {
            None
        };
        self.by_ty[i] = Some(found.clone());
        found
    }

    /// Whether the plain type `ty` holds a declared type (then its bytes
    /// are not hashed in one run under a renaming).
    pub(crate) fn touched(&mut self, types: &Types, ty: TyId) -> bool {
        let i = ty as usize;
        if self.touched.len() <= i {
            self.touched.resize(types.tys.len().max(i + 1), 0);
        }
        if self.touched[i] != 0 {
            return self.touched[i] == 2;
        }
        let yes = self.declared(types, ty).is_some()
            || self.hidden(types, ty).is_some()
            || self.unordered(types, ty).is_some()
            || match &types.tys[i].shape {
                Shape::Struct(f) => f.iter().any(|f| self.touched(types, f.1)),
                Shape::Array { elem, .. } => self.touched(types, *elem),
                Shape::Enum { variants, .. } => variants.iter().any(|v| self.touched(types, v.1)),
                _ => false,
            };
        self.touched[i] = if yes { 2 } else { 1 };
        yes
    }
}

/// The structs and enums among `reachable` named `want` (by a
/// declaration of `what`), or an error that says what is held instead.
fn named(
    types: &Types,
    reachable: &[TyId],
    roots: &[(TyId, &str)],
    want: &str,
    what: &str,
) -> Result<Vec<TyId>, String> {
    let matching: Vec<TyId> = reachable
        .iter()
        .copied()
        .filter(|&t| {
            let t = &types.tys[t as usize];
            matches_name(&t.name, want) && matches!(t.shape, Shape::Struct(_) | Shape::Enum { .. })
        })
        .collect();
    if !matching.is_empty() {
        return Ok(matching);
    }
    let last = base(want).rsplit("::").next().unwrap_or(want);
    let mut similar: Vec<&str> = reachable
        .iter()
        .map(|&t| base(&types.tys[t as usize].name))
        .filter(|n| n.rsplit("::").next() == Some(last))
        .collect();
    similar.sort_unstable();
    similar.dedup();
    let held = roots.iter().map(|r| r.1).collect::<Vec<_>>().join(", ");
    Err(if similar.is_empty() {
        format!(
            "{what}: no struct named `{want}` is held by the states' types walked by their \
             type information ({held})"
        )
    } else {
        format!(
            "{what}: no struct named `{want}` is held by the states' types ({held}); did you \
             mean {}?",
            similar
                .iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(" or ")
        )
    })
}

/// Per field of a struct with fields `have`, whether `fields` names it.
fn hidden_mask(have: &[(u32, TyId, String)], fields: &[String]) -> Arc<[bool]> {
    have.iter()
        .map(|h| fields.iter().any(|f| same_field(f.trim(), &h.2)))
        .collect()
}

/// A struct's field names, for an error.
fn field_names(have: &[(u32, TyId, String)]) -> String {
    have.iter()
        .map(|h| h.2.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The paths each field of the struct `ty` is on (what remains of them).
fn field_rests(types: &Types, ty: TyId, paths: &[Arc<[String]>]) -> Fields {
    let Shape::Struct(fields) = &types.tys[ty as usize].shape else {
        return Arc::from(Vec::new());
    };
    fields
        .iter()
        .map(|(_, _, fname)| {
            let rests: Vec<Arc<[String]>> = paths
                .iter()
                .filter(|p| same_field(&p[0], fname))
                .map(|p| Arc::from(&p[1..]))
                .collect();
            (!rests.is_empty()).then(|| Rests::from(rests))
        })
        .collect()
}

fn reachable_from(types: &Types, roots: Vec<TyId>) -> Vec<TyId> {
    reachable(types, roots.into_iter())
}

/// Every type a value of the `roots` may hold.
fn reachable(types: &Types, roots: impl Iterator<Item = TyId>) -> Vec<TyId> {
    let mut seen = std::collections::HashSet::new();
    let mut stack: Vec<TyId> = roots.collect();
    let mut out = Vec::new();
    while let Some(t) = stack.pop() {
        if !seen.insert(t) {
            continue;
        }
        out.push(t);
        stack.extend(types.tys[t as usize].shape.children());
    }
    out
}

/// The type of the field `name` of a hash table's bucket (`(K, V)`).
fn bucket(types: &Types, elem: TyId, name: &str) -> Option<TyId> {
    match &types.tys[elem as usize].shape {
        Shape::Struct(fields) => fields.iter().find(|f| f.2 == name).map(|f| f.1),
        _ => None,
    }
}

/// Checks that `path` leads from a value of type `ty` to identifiers.
fn check_path(
    types: &Types,
    ty: TyId,
    path: &[String],
    seen: &mut Vec<TyId>,
) -> Result<(), String> {
    if path.is_empty() {
        return check_ids(types, ty, &mut Vec::new());
    }
    if seen.contains(&ty) {
        return Err(format!("no field `{}` is reached", path[0]));
    }
    seen.push(ty);
    let t = &types.tys[ty as usize];
    let r = match &t.shape {
        Shape::Struct(fields) => match fields.iter().find(|f| same_field(&path[0], &f.2)) {
            Some(f) => check_path(types, f.1, &path[1..], &mut Vec::new()),
            None => Err(format!(
                "{} has no field `{}` (its fields: {})",
                t.name,
                path[0],
                fields
                    .iter()
                    .map(|f| f.2.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        },
        Shape::Enum { variants, .. } => {
            let mut any = false;
            for (_, v) in variants {
                if let Shape::Struct(fields) = &types.tys[*v as usize].shape {
                    for f in fields {
                        check_path(types, f.1, path, seen)?;
                        any = true;
                    }
                }
            }
            if any {
                Ok(())
            } else {
                Err(format!("{} holds no field `{}`", t.name, path[0]))
            }
        }
        Shape::Ptr(elem)
        | Shape::Array { elem, .. }
        | Shape::Vec { elem, .. }
        | Shape::Deque { elem, .. }
        | Shape::SmallVec { elem, .. }
        | Shape::Slice {
            pointee: elem,
            tail: None,
        } => check_path(types, *elem, path, seen),
        Shape::Table { elem, .. } => match bucket(types, *elem, "__1") {
            Some(v) => check_path(types, v, path, seen),
            None => Err(format!("{} is not a map", t.name)),
        },
        Shape::BTree(b) => check_path(types, b.val, path, seen),
        _ => Err(format!(
            "a {} holds no field `{}` the walk can follow",
            t.name, path[0]
        )),
    };
    seen.pop();
    r
}

/// Checks that a value of type `ty` is made of identifiers: integers, or
/// what holds them (options, tuples, sequences, sets, map keys).
fn check_ids(types: &Types, ty: TyId, seen: &mut Vec<TyId>) -> Result<(), String> {
    let t = &types.tys[ty as usize];
    if seen.contains(&ty) {
        return Err(format!("{} is recursive", t.name));
    }
    seen.push(ty);
    let r = match &t.shape {
        Shape::Skip => Ok(()),
        Shape::Plain | Shape::Word if integer(&t.name) => Ok(()),
        // A tuple (or a tuple variant, such as `Some`) of identifiers; a
        // struct with named fields names the one that holds them.
        // (A wrapper of one value, such as `HashMap`'s of hashbrown's,
        // passes through.)
        Shape::Struct(fields) => match fields.iter().find(|f| !f.2.starts_with("__")).filter(|_| {
            fields
                .iter()
                .filter(|f| types.tys[f.1 as usize].size > 0)
                .count()
                > 1
        }) {
            Some(f) => Err(format!(
                "it holds a {}, a struct: name its field that holds identifiers \
                 (such as `….{}`)",
                t.name, f.2
            )),
            None => fields.iter().try_for_each(|f| check_ids(types, f.1, seen)),
        },
        Shape::Enum { variants, .. } => variants
            .iter()
            .try_for_each(|v| check_ids(types, v.1, seen)),
        Shape::Ptr(elem)
        | Shape::Array { elem, .. }
        | Shape::Vec { elem, .. }
        | Shape::Deque { elem, .. }
        | Shape::SmallVec { elem, .. }
        | Shape::Slice {
            pointee: elem,
            tail: None,
        } => check_ids(types, *elem, seen),
        Shape::Table { elem, .. } => match bucket(types, *elem, "__0") {
            Some(k) => check_ids(types, k, seen),
            None => Err(format!("{} is not a map or set", t.name)),
        },
        Shape::BTree(b) => check_ids(types, b.key, seen),
        _ => Err(format!(
            "it holds a {}, which is not an integer identifier",
            t.name
        )),
    };
    seen.pop();
    r
}
