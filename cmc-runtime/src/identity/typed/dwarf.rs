//! The executable's own DWARF type information, read with gimli, turned into
//! the [`Ty`] table the walker interprets.
//!
//! Only what a value walk needs is kept: sizes, member offsets, enum
//! discriminants, what a pointer points to, and a recognised shape for the
//! standard containers whose bytes are not their value (`Vec`'s spare
//! capacity, `VecDeque`'s ring, hashbrown's buckets, B-tree nodes, the
//! reference counts of `Rc` and `Arc`, a hash map's random keys).
//!
//! Why one file of about 1,200 lines: it is one pass over one format. The
//! recognisers of the standard containers each read the same unit's DIEs
//! through the same cursor helpers and fill the same table, and a
//! container's shape (a `Vec` inside a `VecDeque` inside a map) is found by
//! their cooperation; split by container, each file would hold half of
//! the others' context. The ELF section lookup is the only separable part
//! (about 70 lines).

use std::collections::HashMap;

use gimli::{AttributeValue, DwAt, DwTag, EndianSlice, LittleEndian, Reader, UnitOffset};

type R = EndianSlice<'static, LittleEndian>;

/// An index into [`Types::tys`].
pub(crate) type TyId = u32;

/// How a value of one type is walked.
#[derive(Debug, Clone)]
pub(crate) enum Shape {
    /// Nothing to hash: zero-sized, or known to carry no meaning (a hash
    /// map's random keys, reference counts, markers).
    Skip,
    /// Its bytes, all meaningful (integers, `bool`, `char`, floats, C-like
    /// enums).
    Plain,
    /// A `usize` or `isize`: hashed as a word that may point into the
    /// program image (see `sys::layout`).
    Word,
    /// A union (`MaybeUninit` outside the containers cmc knows): its bytes,
    /// as the best available guess.
    Opaque,
    /// Fields at offsets, with their names.
    Struct(Vec<(u32, TyId, String)>),
    /// `count` elements of `stride` bytes.
    Array { elem: TyId, count: u64 },
    /// An enum: the discriminant `(offset, size)` and the variants as
    /// (discriminant value, or `None` for the variant that holds every
    /// other value; the variant's struct, fields at enum offsets).
    Enum {
        discr: Option<(u32, u8)>,
        variants: Vec<(Option<u64>, TyId)>,
    },
    /// A thin pointer (`&T`, `Box<T>`, `*const T`, `NonNull<T>`).
    Ptr(TyId),
    /// A function pointer.
    FnPtr,
    /// A fat pointer with a length: `pointee` is the element type, or a
    /// struct whose last field (at `tail`) is the start of the elements.
    Slice {
        pointee: TyId,
        tail: Option<(u32, TyId)>,
    },
    /// A fat pointer with a vtable: `&dyn Trait`, `Box<dyn Trait>`, or to
    /// a struct whose last field, at `tail`, is the `dyn` value.
    Dyn { head: Option<TyId>, tail: u32 },
    /// `Vec<T>` (and so `String`): `len` elements at the buffer pointer.
    Vec { ptr: u32, len: u32, elem: TyId },
    /// `VecDeque<T>`: `len` elements from `head`, wrapping at `cap`.
    Deque {
        ptr: u32,
        cap: u32,
        head: u32,
        len: u32,
        elem: TyId,
    },
    /// hashbrown's `RawTable<T>` (inside `HashMap`, `HashSet`): the full
    /// buckets, as an unordered collection.
    Table {
        ctrl: u32,
        mask: u32,
        items: u32,
        elem: TyId,
    },
    /// `BTreeMap<K, V>` (and `BTreeSet`): entries in key order.
    BTree(Box<BTreeShape>),
    /// `rc::Weak<T>` or `sync::Weak<T>`: the value while it lives.
    Weak {
        ptr: u32,
        strong: u32,
        value: u32,
        ty: TyId,
    },
    /// `bytes::Bytes` or `BytesMut`: the bytes of its view.
    Bytes { ptr: u32, len: u32 },
    /// smallvec's `SmallVec<[T; N]>`: `capacity` elements at `inline`
    /// while `capacity <= inline_cap`, else `len` elements at `ptr`.
    SmallVec {
        capacity: u32,
        inline: u32,
        inline_cap: u64,
        ptr: u32,
        len: u32,
        elem: TyId,
    },
}

impl Shape {
    /// The types a value of this shape holds.
    pub(crate) fn children(&self) -> Vec<TyId> {
        use Shape::*;
        match self {
            Struct(f) => f.iter().map(|f| f.1).collect(),
            Array { elem, .. } | Vec { elem, .. } | Deque { elem, .. } | Table { elem, .. } => {
                vec![*elem]
            }
            Enum { variants, .. } => variants.iter().map(|v| v.1).collect(),
            Ptr(p) => vec![*p],
            Slice { pointee, tail } => std::iter::once(*pointee).chain(tail.map(|t| t.1)).collect(),
            Dyn { head, .. } => head.iter().copied().collect(),
            BTree(b) => vec![b.key, b.val],
            Weak { ty, .. } => vec![*ty],
            _ => std::vec::Vec::new(),
        }
    }
}

/// Where a B-tree keeps its parts.
#[derive(Debug, Clone)]
pub(crate) struct BTreeShape {
    /// In the map: the root node pointer (0 when empty) and the height.
    pub(crate) node: u32,
    pub(crate) height: u32,
    /// In a node: the entry count (`u16`), the key and value arrays, and
    /// (in an internal node) the child pointers.
    pub(crate) len: u32,
    pub(crate) keys: u32,
    pub(crate) vals: u32,
    pub(crate) edges: u32,
    pub(crate) key: TyId,
    pub(crate) val: TyId,
}

/// One type.
#[derive(Debug, Clone)]
pub(crate) struct Ty {
    pub(crate) size: u64,
    pub(crate) shape: Shape,
    /// Its bytes are its value (a [`Shape::Plain`], or a struct or array of
    /// them with no padding): hashed in one run.
    pub(crate) plain: bool,
    /// The full name, for diagnostics and for hashing a `dyn` value's type.
    pub(crate) name: String,
}

/// One debugging information entry, as much of it as the walk needs.
#[derive(Debug, Default, Clone)]
struct Die {
    tag: u16,
    name: Option<String>,
    ty: Option<u64>,
    size: Option<u64>,
    loc: Option<u64>,
    discr: Option<u64>,
    discr_value: Option<u64>,
    count: Option<u64>,
    low_pc: Option<u64>,
    containing: Option<u64>,
    location_addr: Option<u64>,
    artificial: bool,
    parent: Option<u64>,
    children: Vec<u64>,
}

/// The executable's debugging information and the types built from it.
pub(crate) struct Types {
    dwarf: gimli::Dwarf<R>,
    /// Parsed units, by the offset of their header.
    units: HashMap<u64, UnitDies>,
    /// Unit header offsets, sorted.
    unit_starts: Vec<u64>,
    /// Shared, so that a walk holds a type while it recurses (the table
    /// grows when a `dyn` value's type is first looked up).
    pub(crate) tys: Vec<std::sync::Arc<Ty>>,
    by_die: HashMap<u64, TyId>,
    /// `vtable address (link-time) -> concrete type DIE`, once listed.
    vtables: Option<HashMap<u64, u64>>,
    /// Concrete types of `dyn` values met, by vtable address (run-time).
    pub(crate) dyn_types: HashMap<u64, Option<TyId>>,
}

struct UnitDies {
    dies: HashMap<u64, Die>,
}

impl std::fmt::Debug for Types {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Types")
            .field("tys", &self.tys.len())
            .finish()
    }
}

/// Maps the executable for reading; the mapping lives as long as the
/// process.
fn map_exe() -> Result<&'static [u8], String> {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open("/proc/self/exe").map_err(|e| format!("/proc/self/exe: {e}"))?;
    let len = file
        .metadata()
        .map_err(|e| format!("/proc/self/exe: {e}"))?
        .len() as usize;
    if len == 0 {
        return Err("the executable is empty".into());
    }
    // The executable is not written while it runs (ETXTBSY).
    let p = crate::sys::map_file(file.as_raw_fd(), len)
        .map_err(|e| format!("cannot map the executable: {e}"))?;
    // SAFETY: the mapping is `len` readable bytes and is never unmapped.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// The ELF sections of `file` by name.
fn sections(file: &'static [u8]) -> Result<HashMap<String, &'static [u8]>, String> {
    let u16_at = |o: usize| -> Option<u16> {
        Some(u16::from_le_bytes(file.get(o..o + 2)?.try_into().ok()?))
    };
    let u32_at = |o: usize| -> Option<u32> {
        Some(u32::from_le_bytes(file.get(o..o + 4)?.try_into().ok()?))
    };
    let u64_at = |o: usize| -> Option<usize> {
        Some(u64::from_le_bytes(file.get(o..o + 8)?.try_into().ok()?) as usize)
    };
    let bad = || "the executable is not a 64-bit little-endian ELF file cmc can read".to_string();
    if file.get(..6) != Some(b"\x7fELF\x02\x01") {
        return Err(bad());
    }
    let shoff = u64_at(0x28).ok_or_else(bad)?;
    let shentsize = u16_at(0x3a).ok_or_else(bad)? as usize;
    let shnum = u16_at(0x3c).ok_or_else(bad)? as usize;
    let shstrndx = u16_at(0x3e).ok_or_else(bad)? as usize;
    if shentsize < 0x40 || shstrndx >= shnum {
        return Err(bad());
    }
    let sh = |i: usize| shoff + i * shentsize;
    let strtab_off = u64_at(sh(shstrndx) + 0x18).ok_or_else(bad)?;
    let mut out = HashMap::new();
    for i in 0..shnum {
        let name_at = u32_at(sh(i)).ok_or_else(bad)? as usize;
        let kind = u32_at(sh(i) + 4).ok_or_else(bad)?;
        let flags = u64_at(sh(i) + 8).ok_or_else(bad)?;
        let (off, size) = (
            u64_at(sh(i) + 0x18).ok_or_else(bad)?,
            u64_at(sh(i) + 0x20).ok_or_else(bad)?,
        );
        let name = file
            .get(strtab_off + name_at..)
            .and_then(|s| std::ffi::CStr::from_bytes_until_nul(s).ok())
            .ok_or_else(bad)?
            .to_string_lossy()
            .into_owned();
        if !name.starts_with(".debug_") || kind == 8 {
            continue; // Not debugging information, or SHT_NOBITS.
        }
        if flags & 0x800 != 0 {
            return Err(format!(
                "the executable's section {name} is compressed, which cmc does not read"
            ));
        }
        let data = file.get(off..off + size).ok_or_else(bad)?;
        out.insert(name, data);
    }
    Ok(out)
}

const DW_TAG: fn(DwTag) -> u16 = |t| t.0;

fn tag(t: DwTag) -> u16 {
    DW_TAG(t)
}

impl Types {
    /// Loads the executable's debugging information.
    pub(crate) fn load() -> Result<Types, String> {
        let file = map_exe()?;
        let sections = sections(file)?;
        if !sections.contains_key(".debug_info") {
            return Err("the executable has no debugging information (.debug_info)".into());
        }
        let dwarf = gimli::Dwarf::load(|id| -> Result<R, String> {
            let data = sections.get(id.name()).copied().unwrap_or(&[]);
            Ok(EndianSlice::new(data, LittleEndian))
        })?;
        let mut unit_starts = Vec::new();
        let mut headers = dwarf.units();
        while let Some(h) = headers.next().map_err(|e| format!("DWARF: {e}"))? {
            unit_starts.push(h.offset().0 as u64);
        }
        unit_starts.sort_unstable();
        Ok(Types {
            dwarf,
            units: HashMap::new(),
            unit_starts,
            tys: Vec::new(),
            by_die: HashMap::new(),
            vtables: None,
            dyn_types: HashMap::new(),
        })
    }

    /// The unit containing the DIE at global offset `off`.
    fn unit_of(&self, off: u64) -> Option<u64> {
        let i = self.unit_starts.partition_point(|&s| s <= off);
        i.checked_sub(1).map(|i| self.unit_starts[i])
    }

    fn gimli_unit(&self, start: u64) -> Result<gimli::Unit<R>, String> {
        let header = self
            .dwarf
            .debug_info
            .header_from_offset(gimli::DebugInfoOffset(start as usize))
            .map_err(|e| format!("DWARF: {e}"))?;
        self.dwarf.unit(header).map_err(|e| format!("DWARF: {e}"))
    }

    /// Parses a whole unit into [`Die`]s (once).
    fn parse_unit(&mut self, start: u64) -> Result<(), String> {
        if self.units.contains_key(&start) {
            return Ok(());
        }
        let unit = self.gimli_unit(start)?;
        let base = start;
        let mut dies: HashMap<u64, Die> = HashMap::new();
        let mut stack: Vec<u64> = Vec::new();
        let mut cursor = unit.entries();
        let mut depth: isize = 0;
        let mut first = true;
        while let Some((delta, entry)) = next(&mut cursor)? {
            if first {
                first = false;
            } else {
                depth += delta;
            }
            let off = base + entry.offset().0 as u64;
            let d = depth.max(0) as usize;
            stack.truncate(d);
            let parent = stack.last().copied();
            let die = self.read_die(&unit, base, entry, parent)?;
            if let Some(p) = parent {
                if let Some(pd) = dies.get_mut(&p) {
                    pd.children.push(off);
                }
            }
            dies.insert(off, die);
            stack.push(off);
        }
        self.units.insert(start, UnitDies { dies });
        Ok(())
    }

    fn read_die(
        &self,
        unit: &gimli::Unit<R>,
        base: u64,
        entry: &gimli::DebuggingInformationEntry<R>,
        parent: Option<u64>,
    ) -> Result<Die, String> {
        let mut die = Die {
            tag: tag(entry.tag()),
            parent,
            ..Die::default()
        };
        let reference = |v: AttributeValue<R>| match v {
            AttributeValue::UnitRef(UnitOffset(o)) => Some(base + o as u64),
            AttributeValue::DebugInfoRef(o) => Some(o.0 as u64),
            _ => None,
        };
        for attr in entry.attrs() {
            let v = attr.value();
            match attr.name() {
                gimli::DW_AT_name => {
                    if let Ok(s) = self.dwarf.attr_string(unit, v) {
                        die.name = Some(s.to_string_lossy().into_owned());
                    }
                }
                gimli::DW_AT_type => die.ty = reference(v),
                gimli::DW_AT_containing_type => die.containing = reference(v),
                gimli::DW_AT_discr => die.discr = reference(v),
                gimli::DW_AT_byte_size => die.size = attr.udata_value(),
                gimli::DW_AT_data_member_location => die.loc = attr.udata_value(),
                gimli::DW_AT_discr_value => {
                    die.discr_value = match v {
                        AttributeValue::Sdata(s) => Some(s as u64),
                        _ => attr.udata_value(),
                    }
                }
                gimli::DW_AT_count => die.count = attr.udata_value(),
                gimli::DW_AT_upper_bound if die.count.is_none() => {
                    die.count = attr.udata_value().map(|u| u + 1);
                }
                gimli::DW_AT_low_pc => {
                    die.low_pc = match v {
                        AttributeValue::Addr(a) => Some(a),
                        AttributeValue::DebugAddrIndex(i) => self.dwarf.address(unit, i).ok(),
                        _ => None,
                    }
                }
                gimli::DW_AT_location => {
                    if let AttributeValue::Exprloc(e) = v {
                        let b = e.0.slice();
                        // DW_OP_addr <8 bytes>
                        if b.len() == 9 && b[0] == 0x03 {
                            die.location_addr =
                                Some(u64::from_le_bytes(b[1..9].try_into().unwrap_or_default()));
                        }
                    }
                }
                gimli::DW_AT_artificial => die.artificial = matches!(v, AttributeValue::Flag(true)),
                _ => {}
            }
        }
        let _: DwAt = gimli::DW_AT_name;
        Ok(die)
    }

    fn die(&mut self, off: u64) -> Result<Die, String> {
        let start = self
            .unit_of(off)
            .ok_or_else(|| format!("DWARF: no unit holds offset {off:#x}"))?;
        self.parse_unit(start)?;
        self.units[&start]
            .dies
            .get(&off)
            .cloned()
            .ok_or_else(|| format!("DWARF: no entry at offset {off:#x}"))
    }

    /// The type `T` of the anchor function whose code starts at `pc`
    /// (link-time address).
    pub(crate) fn anchor_type(&mut self, pc: u64) -> Result<TyId, String> {
        for start in self.unit_starts.clone() {
            let unit = self.gimli_unit(start)?;
            let mut ranges = match self.dwarf.unit_ranges(&unit) {
                Ok(r) => r,
                Err(_) => continue,
            };
            let mut inside = false;
            while let Ok(Some(r)) = ranges.next() {
                if r.begin <= pc && pc < r.end {
                    inside = true;
                    break;
                }
            }
            if !inside {
                continue;
            }
            self.parse_unit(start)?;
            let found = self.units[&start].dies.iter().find_map(|(_, d)| {
                (d.tag == tag(gimli::DW_TAG_subprogram) && d.low_pc == Some(pc))
                    .then(|| d.children.clone())
            });
            let Some(children) = found else { continue };
            for c in children {
                let d = self.die(c)?;
                if d.tag == tag(gimli::DW_TAG_template_type_parameter) {
                    let ty = d.ty.ok_or("DWARF: a type parameter without a type")?;
                    return self.ty(ty);
                }
            }
        }
        Err(
            "no debugging information describes the type (is the harness built with `debug = 2`?)"
                .into(),
        )
    }

    /// The qualified name of a DIE: its namespaces and enclosing types.
    fn qualified(&mut self, off: u64) -> Result<String, String> {
        let d = self.die(off)?;
        let mut parts = vec![d.name.clone().unwrap_or_default()];
        let mut p = d.parent;
        while let Some(o) = p {
            let pd = self.die(o)?;
            if pd.tag == tag(gimli::DW_TAG_compile_unit) {
                break;
            }
            if let Some(n) = &pd.name {
                parts.push(n.clone());
            }
            p = pd.parent;
        }
        parts.reverse();
        Ok(parts.join("::"))
    }

    fn push(&mut self, ty: Ty) -> TyId {
        self.tys.push(std::sync::Arc::new(ty));
        (self.tys.len() - 1) as TyId
    }

    fn skip(&mut self, name: &str) -> TyId {
        self.push(Ty {
            size: 0,
            shape: Shape::Skip,
            plain: false,
            name: name.into(),
        })
    }

    /// The type table entry for the type DIE at `off` (built once).
    pub(crate) fn ty(&mut self, off: u64) -> Result<TyId, String> {
        if let Some(&id) = self.by_die.get(&off) {
            return Ok(id);
        }
        // A placeholder first: recursive types refer to themselves.
        let id = self.skip("?");
        self.by_die.insert(off, id);
        let ty = self.build(off)?;
        self.tys[id as usize] = std::sync::Arc::new(ty);
        Ok(id)
    }

    fn members(&mut self, off: u64) -> Result<Vec<Die>, String> {
        let d = self.die(off)?;
        let mut out = Vec::new();
        for c in d.children {
            let cd = self.die(c)?;
            if cd.tag == tag(gimli::DW_TAG_member) {
                out.push(cd);
            }
        }
        Ok(out)
    }

    /// The template parameter `name` of the struct DIE at `off`.
    fn param(&mut self, off: u64, name: &str) -> Result<u64, String> {
        let d = self.die(off)?;
        for c in d.children {
            let cd = self.die(c)?;
            if cd.tag == tag(gimli::DW_TAG_template_type_parameter)
                && cd.name.as_deref() == Some(name)
            {
                return cd
                    .ty
                    .ok_or_else(|| "DWARF: type parameter without type".into());
            }
        }
        Err(format!("DWARF: type parameter {name} not found"))
    }

    /// The offset and type DIE of the member reached by the field names
    /// `path` from the struct DIE at `off`.
    fn field_path(&mut self, mut off: u64, path: &[&str]) -> Result<(u32, u64), String> {
        let mut at = 0u64;
        for name in path {
            let off_now = self.strip(off)?;
            let m = self
                .members(off_now)?
                .into_iter()
                .find(|m| m.name.as_deref() == Some(name))
                .ok_or_else(|| format!("DWARF: field `{name}` not found"))?;
            at += m.loc.unwrap_or(0);
            off = m.ty.ok_or("DWARF: member without a type")?;
        }
        Ok((at as u32, off))
    }

    /// Follows typedefs and qualifiers.
    fn strip(&mut self, mut off: u64) -> Result<u64, String> {
        for _ in 0..16 {
            let d = self.die(off)?;
            let t = d.tag;
            if t == tag(gimli::DW_TAG_typedef)
                || t == tag(gimli::DW_TAG_const_type)
                || t == tag(gimli::DW_TAG_volatile_type)
            {
                match d.ty {
                    Some(n) => off = n,
                    None => return Ok(off),
                }
            } else {
                return Ok(off);
            }
        }
        Ok(off)
    }

    fn build(&mut self, off: u64) -> Result<Ty, String> {
        let off = self.strip(off)?;
        let d = self.die(off)?;
        let size = d.size.unwrap_or(0);
        let t = d.tag;
        let name = if t == tag(gimli::DW_TAG_base_type) {
            d.name.clone().unwrap_or_default()
        } else {
            self.qualified(off)?
        };
        let mk = |shape: Shape, plain: bool, name: String| Ty {
            size,
            shape,
            plain,
            name,
        };
        if t == tag(gimli::DW_TAG_base_type) {
            if size == 0 {
                return Ok(mk(Shape::Skip, false, name));
            }
            if name == "usize" || name == "isize" {
                return Ok(mk(Shape::Word, false, name));
            }
            return Ok(mk(Shape::Plain, true, name));
        }
        if t == tag(gimli::DW_TAG_enumeration_type) {
            return Ok(mk(Shape::Plain, true, name));
        }
        if t == tag(gimli::DW_TAG_union_type) {
            return Ok(mk(
                if size == 0 {
                    Shape::Skip
                } else {
                    Shape::Opaque
                },
                false,
                name,
            ));
        }
        if t == tag(gimli::DW_TAG_pointer_type) || t == tag(gimli::DW_TAG_reference_type) {
            let size = 8;
            let Some(target) = d.ty else {
                return Ok(Ty {
                    size,
                    shape: Shape::Word,
                    plain: false,
                    name,
                });
            };
            let target = self.strip(target)?;
            let td = self.die(target)?;
            if td.tag == tag(gimli::DW_TAG_subroutine_type) {
                return Ok(Ty {
                    size,
                    shape: Shape::FnPtr,
                    plain: false,
                    name,
                });
            }
            let p = self.ty(target)?;
            return Ok(Ty {
                size,
                shape: Shape::Ptr(p),
                plain: false,
                name,
            });
        }
        if t == tag(gimli::DW_TAG_array_type) {
            let elem_off = d.ty.ok_or("DWARF: array without element type")?;
            let elem = self.ty(elem_off)?;
            let mut count = None;
            for c in d.children.clone() {
                let cd = self.die(c)?;
                if cd.tag == tag(gimli::DW_TAG_subrange_type) {
                    count = cd.count;
                }
            }
            let count = count.unwrap_or(0);
            let esize = self.tys[elem as usize].size;
            let size = if size == 0 { esize * count } else { size };
            let plain = self.tys[elem as usize].plain;
            return Ok(Ty {
                size,
                shape: if count == 0 || esize == 0 {
                    Shape::Skip
                } else {
                    Shape::Array { elem, count }
                },
                plain,
                name,
            });
        }
        if t != tag(gimli::DW_TAG_structure_type) {
            // Subroutine types and anything unforeseen: their bytes.
            return Ok(mk(
                if size == 0 {
                    Shape::Skip
                } else {
                    Shape::Opaque
                },
                false,
                name,
            ));
        }
        self.build_struct(off, &d, size, name)
    }

    fn build_struct(&mut self, off: u64, d: &Die, size: u64, name: String) -> Result<Ty, String> {
        let mk = |shape: Shape, name: String| Ty {
            size,
            shape,
            plain: false,
            name,
        };
        let base = name.split('<').next().unwrap_or("").to_string();
        // Known shapes first.
        match base.as_str() {
            "alloc::vec::Vec" => {
                let elem = self.param(off, "T")?;
                let elem = self.ty(elem)?;
                let (ptr, _) = self.field_path(off, &["buf", "inner", "ptr"])?;
                let (len, _) = self.field_path(off, &["len"])?;
                return Ok(mk(Shape::Vec { ptr, len, elem }, name));
            }
            "alloc::collections::vec_deque::VecDeque" => {
                let elem = self.param(off, "T")?;
                let elem = self.ty(elem)?;
                let (ptr, _) = self.field_path(off, &["buf", "inner", "ptr"])?;
                let (cap, _) = self.field_path(off, &["buf", "inner", "cap"])?;
                let (head, _) = self.field_path(off, &["head"])?;
                let (len, _) = self.field_path(off, &["len"])?;
                return Ok(mk(
                    Shape::Deque {
                        ptr,
                        cap,
                        head,
                        len,
                        elem,
                    },
                    name,
                ));
            }
            "hashbrown::raw::RawTable" => {
                let elem = self.param(off, "T")?;
                let elem = self.ty(elem)?;
                let (ctrl, _) = self.field_path(off, &["table", "ctrl"])?;
                let (mask, _) = self.field_path(off, &["table", "bucket_mask"])?;
                let (items, _) = self.field_path(off, &["table", "items"])?;
                return Ok(mk(
                    Shape::Table {
                        ctrl,
                        mask,
                        items,
                        elem,
                    },
                    name,
                ));
            }
            // A hash map's hasher (random keys): not part of its value.
            _ if base.ends_with("::RandomState") => {
                return Ok(Ty {
                    size,
                    shape: Shape::Skip,
                    plain: false,
                    name,
                });
            }
            "alloc::collections::btree::map::BTreeMap" => {
                return self.build_btree(off, size, name);
            }
            "alloc::rc::Weak" | "alloc::sync::Weak" => {
                let (ptr, inner_ptr) = self.field_path(off, &["ptr", "pointer"])?;
                let inner_ptr = self.strip(inner_ptr)?;
                let inner = self
                    .die(inner_ptr)?
                    .ty
                    .ok_or("DWARF: Weak's pointer without a type")?;
                let inner = self.strip(inner)?;
                let (strong, _) = self.field_path(inner, &["strong"])?;
                let value_name = if base == "alloc::rc::Weak" {
                    "value"
                } else {
                    "data"
                };
                let (value, vty) = self.field_path(inner, &[value_name])?;
                let ty = self.ty(vty)?;
                return Ok(mk(
                    Shape::Weak {
                        ptr,
                        strong,
                        value,
                        ty,
                    },
                    name,
                ));
            }
            "bytes::bytes::Bytes" | "bytes::bytes_mut::BytesMut" => {
                let (ptr, _) = self.field_path(off, &["ptr"])?;
                let (len, _) = self.field_path(off, &["len"])?;
                return Ok(mk(Shape::Bytes { ptr, len }, name));
            }
            "smallvec::SmallVec" => {
                return self.build_smallvec(off, size, name);
            }
            _ => {}
        }
        let members = self.members(off)?;
        // Enums.
        let mut part = None;
        for c in d.children.clone() {
            let cd = self.die(c)?;
            if cd.tag == tag(gimli::DW_TAG_variant_part) {
                part = Some(cd);
            }
        }
        if let Some(part) = part {
            let discr = match part.discr {
                Some(m) => {
                    let md = self.die(m)?;
                    let dt = md.ty.ok_or("DWARF: discriminant without a type")?;
                    let dt = self.strip(dt)?;
                    let dsize = self.die(dt)?.size.unwrap_or(0);
                    Some((md.loc.unwrap_or(0) as u32, dsize as u8))
                }
                None => None,
            };
            let mut variants = Vec::new();
            for c in part.children.clone() {
                let vd = self.die(c)?;
                if vd.tag != tag(gimli::DW_TAG_variant) {
                    continue;
                }
                for m in vd.children.clone() {
                    let md = self.die(m)?;
                    if md.tag == tag(gimli::DW_TAG_member) {
                        let vt = md.ty.ok_or("DWARF: variant without a type")?;
                        let vty = self.ty(vt)?;
                        variants.push((vd.discr_value, vty));
                    }
                }
            }
            return Ok(mk(Shape::Enum { discr, variants }, name));
        }
        // Fat pointers.
        let names: Vec<&str> = members
            .iter()
            .map(|m| m.name.as_deref().unwrap_or(""))
            .collect();
        if names == ["data_ptr", "length"] || names == ["pointer", "vtable"] {
            let p = members[0].ty.ok_or("DWARF: fat pointer without a type")?;
            let p = self.strip(p)?;
            let pointee = self.die(p)?.ty.ok_or("DWARF: fat pointer to nothing")?;
            let pointee = self.strip(pointee)?;
            let pd = self.die(pointee)?;
            let psize = pd.size.unwrap_or(0);
            // A struct whose last field lies at or past its size is the
            // unsized tail.
            let pmembers = if pd.tag == tag(gimli::DW_TAG_structure_type) {
                self.members(pointee)?
            } else {
                Vec::new()
            };
            let last = pmembers
                .iter()
                .filter(|m| !m.artificial)
                .max_by_key(|m| m.loc.unwrap_or(0))
                .cloned();
            if names[0] == "data_ptr" {
                if let Some(last) = last.filter(|m| {
                    let lt = m.ty.unwrap_or(0);
                    let lsize = self.die(lt).ok().and_then(|d| d.size).unwrap_or(0);
                    m.loc.unwrap_or(0) + lsize > psize
                }) {
                    let at = last.loc.unwrap_or(0) as u32;
                    let elem = self.ty(last.ty.ok_or("DWARF: tail without a type")?)?;
                    let head = self.sized_head(pointee, psize, at)?;
                    return Ok(mk(
                        Shape::Slice {
                            pointee: head,
                            tail: Some((at, elem)),
                        },
                        name,
                    ));
                }
                let elem = self.ty(pointee)?;
                return Ok(mk(
                    Shape::Slice {
                        pointee: elem,
                        tail: None,
                    },
                    name,
                ));
            }
            // dyn: the pointee is the trait object, or a struct ending in it.
            let is_dyn = |d: &Die| {
                d.name
                    .as_deref()
                    .is_some_and(|n| n.trim_start_matches('(').starts_with("dyn "))
            };
            if is_dyn(&pd) {
                return Ok(mk(
                    Shape::Dyn {
                        head: None,
                        tail: 0,
                    },
                    name,
                ));
            }
            if let Some(last) = last {
                let lt = last.ty.ok_or("DWARF: tail without a type")?;
                let lt = self.strip(lt)?;
                let ld = self.die(lt)?;
                if is_dyn(&ld) {
                    let at = last.loc.unwrap_or(0) as u32;
                    let head = self.sized_head(pointee, psize, at)?;
                    return Ok(mk(
                        Shape::Dyn {
                            head: Some(head),
                            tail: at,
                        },
                        name,
                    ));
                }
            }
            return Ok(mk(Shape::Opaque, name));
        }
        // Reference counts carry no meaning: the graph of the state says who
        // holds the value.
        let counted = matches!(
            base.as_str(),
            "alloc::rc::RcInner" | "alloc::sync::ArcInner"
        );
        let mut fields = Vec::new();
        let mut covered = 0u64;
        let mut plain = true;
        for m in &members {
            if m.artificial && d.children.is_empty() {
                continue;
            }
            let mname = m.name.as_deref().unwrap_or("");
            if counted && (mname == "strong" || mname == "weak") {
                plain = false;
                continue;
            }
            // A hash map's hasher (std's, hashbrown's, indexmap's all name
            // it so): its keys are random, not part of the value.
            if mname == "hash_builder" {
                plain = false;
                continue;
            }
            let mt = m.ty.ok_or("DWARF: member without a type")?;
            let id = self.ty(mt)?;
            let mt_ty = &self.tys[id as usize];
            if matches!(mt_ty.shape, Shape::Skip) && mt_ty.size == 0 {
                continue;
            }
            plain &= mt_ty.plain;
            covered += mt_ty.size;
            fields.push((m.loc.unwrap_or(0) as u32, id, mname.to_string()));
        }
        fields.sort_by_key(|f| f.0);
        let plain = plain && covered == size && size > 0;
        if fields.is_empty() {
            return Ok(Ty {
                size,
                shape: Shape::Skip,
                plain: false,
                name,
            });
        }
        Ok(Ty {
            size,
            shape: Shape::Struct(fields),
            plain,
            name,
        })
    }

    /// The sized part of an unsized struct: its fields before `tail`.
    fn sized_head(&mut self, off: u64, size: u64, tail: u32) -> Result<TyId, String> {
        let name = self.qualified(off)?;
        let base = name.split('<').next().unwrap_or("").to_string();
        let counted = matches!(
            base.as_str(),
            "alloc::rc::RcInner" | "alloc::sync::ArcInner"
        );
        let mut fields = Vec::new();
        for m in self.members(off)? {
            let at = m.loc.unwrap_or(0) as u32;
            let mname = m.name.as_deref().unwrap_or("");
            if at >= tail || (counted && (mname == "strong" || mname == "weak")) {
                continue;
            }
            let id = self.ty(m.ty.ok_or("DWARF: member without a type")?)?;
            fields.push((at, id, mname.to_string()));
        }
        let shape = if fields.is_empty() {
            Shape::Skip
        } else {
            Shape::Struct(fields)
        };
        Ok(self.push(Ty {
            size,
            shape,
            plain: false,
            name: format!("{name} (sized part)"),
        }))
    }

    /// The member named `name` of the variant `variant` of the enum DIE at
    /// `off`: its offset and type DIE.
    fn variant_field(&mut self, off: u64, variant: &str, name: &str) -> Result<(u32, u64), String> {
        let off = self.strip(off)?;
        for c in self.die(off)?.children {
            let part = self.die(c)?;
            if part.tag != tag(gimli::DW_TAG_variant_part) {
                continue;
            }
            for v in part.children {
                for m in self.die(v)?.children {
                    let md = self.die(m)?;
                    if md.name.as_deref() == Some(variant) {
                        let vt = md.ty.ok_or("DWARF: variant without a type")?;
                        return self.field_path(vt, &[name]);
                    }
                }
            }
        }
        Err(format!("DWARF: variant `{variant}` not found"))
    }

    /// smallvec's `SmallVec<[T; N]>`: `capacity` elements inline while it
    /// is at most `N`, else `len` elements behind the heap pointer (its
    /// data is a union with the `union` feature, an enum without).
    fn build_smallvec(&mut self, off: u64, size: u64, name: String) -> Result<Ty, String> {
        let array = self.param(off, "A")?;
        let array = self.strip(array)?;
        let ad = self.die(array)?;
        let elem = ad
            .ty
            .ok_or("DWARF: SmallVec's array without an element type")?;
        let mut inline_cap = None;
        for c in ad.children {
            let cd = self.die(c)?;
            if cd.tag == tag(gimli::DW_TAG_subrange_type) {
                inline_cap = cd.count;
            }
        }
        let inline_cap = inline_cap.ok_or("DWARF: SmallVec's array without a length")?;
        let (capacity, _) = self.field_path(off, &["capacity"])?;
        let (data, data_ty) = self.field_path(off, &["data"])?;
        let data_ty = self.strip(data_ty)?;
        let (inline, heap_ptr, heap_len) =
            if self.die(data_ty)?.tag == tag(gimli::DW_TAG_union_type) {
                let (inline, _) = self.field_path(data_ty, &["inline"])?;
                let (heap, heap_ty) = self.field_path(data_ty, &["heap"])?;
                let (p, _) = self.field_path(heap_ty, &["__0"])?;
                let (l, _) = self.field_path(heap_ty, &["__1"])?;
                (inline, heap + p, heap + l)
            } else {
                let (inline, _) = self.variant_field(data_ty, "Inline", "__0")?;
                let (p, _) = self.variant_field(data_ty, "Heap", "ptr")?;
                let (l, _) = self.variant_field(data_ty, "Heap", "len")?;
                (inline, p, l)
            };
        let elem = self.ty(elem)?;
        Ok(Ty {
            size,
            shape: Shape::SmallVec {
                capacity,
                inline: data + inline,
                inline_cap,
                ptr: data + heap_ptr,
                len: data + heap_len,
                elem,
            },
            plain: false,
            name,
        })
    }

    fn build_btree(&mut self, off: u64, size: u64, name: String) -> Result<Ty, String> {
        let key = self.param(off, "K")?;
        let val = self.param(off, "V")?;
        let (root, root_ty) = self.field_path(off, &["root"])?;
        // root: Option<NodeRef>; the Some variant's payload is the NodeRef.
        let root_ty = self.strip(root_ty)?;
        let mut node_ref = None;
        for c in self.die(root_ty)?.children {
            let part = self.die(c)?;
            if part.tag != tag(gimli::DW_TAG_variant_part) {
                continue;
            }
            for v in part.children {
                let vd = self.die(v)?;
                for m in vd.children {
                    let md = self.die(m)?;
                    if md.name.as_deref() == Some("Some") {
                        let some = md.ty.ok_or("DWARF: Some without a type")?;
                        let (at, nr) = self.field_path(some, &["__0"])?;
                        node_ref = Some((at, nr));
                    }
                }
            }
        }
        let (nr_at, nr) = node_ref.ok_or("DWARF: BTreeMap's root is not an Option of a NodeRef")?;
        let (node, leaf_ptr) = self.field_path(nr, &["node", "pointer"])?;
        let (height, _) = self.field_path(nr, &["height"])?;
        let leaf_ptr = self.strip(leaf_ptr)?;
        let leaf = self
            .die(leaf_ptr)?
            .ty
            .ok_or("DWARF: node pointer without a type")?;
        let leaf = self.strip(leaf)?;
        let leaf_size = self.die(leaf)?.size.unwrap_or(0);
        let (len, _) = self.field_path(leaf, &["len"])?;
        let (keys, _) = self.field_path(leaf, &["keys"])?;
        let (vals, _) = self.field_path(leaf, &["vals"])?;
        // InternalNode is #[repr(C)] { data: LeafNode, edges: [..; 12] }.
        let edges = leaf_size.div_ceil(8) * 8;
        let key = self.ty(key)?;
        let val = self.ty(val)?;
        Ok(Ty {
            size,
            shape: Shape::BTree(Box::new(BTreeShape {
                node: root + nr_at + node,
                height: root + nr_at + height,
                len,
                keys,
                vals,
                edges: edges as u32,
                key,
                val,
            })),
            plain: false,
            name,
        })
    }

    /// The concrete type behind vtable `vtable` (a link-time address), if
    /// the debugging information describes it.
    pub(crate) fn vtable_type(&mut self, vtable: u64) -> Result<Option<TyId>, String> {
        if self.vtables.is_none() {
            self.vtables = Some(self.list_vtables()?);
        }
        let Some(&ty) = self.vtables.as_ref().and_then(|v| v.get(&vtable)) else {
            return Ok(None);
        };
        Ok(Some(self.ty(ty)?))
    }

    /// The concrete types of the program's `dyn` values whose names
    /// mention `needle` (a type they hold, such as a generic argument),
    /// built: where a type that only a `dyn` value holds is found.
    pub(crate) fn dyn_types_naming(&mut self, needle: &str) -> Result<Vec<TyId>, String> {
        if self.vtables.is_none() {
            self.vtables = Some(self.list_vtables()?);
        }
        let mut dies: Vec<u64> = self
            .vtables
            .as_ref()
            .map(|v| v.values().copied().collect())
            .unwrap_or_default();
        dies.sort_unstable();
        dies.dedup();
        let mut out = Vec::new();
        for die in dies {
            if self.qualified(die)?.contains(needle) {
                out.push(self.ty(die)?);
            }
        }
        Ok(out)
    }

    /// Every `<T as Trait>::{vtable}` variable of the program: its address
    /// and `T`'s DIE. Reads the top level of every unit, once.
    fn list_vtables(&mut self) -> Result<HashMap<u64, u64>, String> {
        let mut out = HashMap::new();
        for start in self.unit_starts.clone() {
            let unit = self.gimli_unit(start)?;
            let base = start;
            let mut cursor = unit.entries();
            let mut pending: Vec<(u64, u64)> = Vec::new(); // (address, vtable type DIE)
            let mut vtable_types: HashMap<u64, u64> = HashMap::new(); // type DIE -> containing
            let mut depth: isize = 0;
            let mut first = true;
            while let Some((delta, entry)) = next(&mut cursor)? {
                if first {
                    first = false;
                } else {
                    depth += delta;
                }
                if depth > 2 {
                    continue;
                }
                let t = entry.tag();
                if t == gimli::DW_TAG_variable {
                    let (mut addr, mut ty) = (None, None);
                    let mut is_vtable = false;
                    for attr in entry.attrs() {
                        match attr.name() {
                            gimli::DW_AT_name => {
                                if let Ok(s) = self.dwarf.attr_string(&unit, attr.value()) {
                                    is_vtable = s.slice().ends_with(b"::{vtable}");
                                }
                            }
                            gimli::DW_AT_location => {
                                if let AttributeValue::Exprloc(e) = attr.value() {
                                    let b = e.0.slice();
                                    if b.len() == 9 && b[0] == 0x03 {
                                        addr = Some(u64::from_le_bytes(
                                            b[1..9].try_into().unwrap_or_default(),
                                        ));
                                    }
                                }
                            }
                            gimli::DW_AT_type => {
                                ty = match attr.value() {
                                    AttributeValue::UnitRef(UnitOffset(o)) => Some(base + o as u64),
                                    AttributeValue::DebugInfoRef(o) => Some(o.0 as u64),
                                    _ => None,
                                }
                            }
                            _ => {}
                        }
                    }
                    if let (true, Some(a), Some(t)) = (is_vtable, addr, ty) {
                        pending.push((a, t));
                    }
                } else if t == gimli::DW_TAG_structure_type {
                    if let Some(AttributeValue::UnitRef(UnitOffset(o))) =
                        entry.attr_value(gimli::DW_AT_containing_type)
                    {
                        vtable_types.insert(base + entry.offset().0 as u64, base + o as u64);
                    } else if let Some(AttributeValue::DebugInfoRef(o)) =
                        entry.attr_value(gimli::DW_AT_containing_type)
                    {
                        vtable_types.insert(base + entry.offset().0 as u64, o.0 as u64);
                    }
                }
            }
            for (a, t) in pending {
                if let Some(&c) = vtable_types.get(&t) {
                    out.insert(a, c);
                }
            }
        }
        Ok(out)
    }
}

/// The next entry of a depth-first walk and its depth change.
fn next<'a>(
    cursor: &'a mut gimli::EntriesCursor<'_, R>,
) -> Result<Option<(isize, &'a gimli::DebuggingInformationEntry<R>)>, String> {
    let before = cursor.depth();
    match cursor.next_dfs().map_err(|e| format!("DWARF: {e}"))? {
        Some(_) => {
            let after = cursor.depth();
            Ok(cursor.current().map(|e| (after - before, e)))
        }
        None => Ok(None),
    }
}

#[allow(dead_code)]
fn _assert_reader(r: R) -> usize {
    r.len()
}
