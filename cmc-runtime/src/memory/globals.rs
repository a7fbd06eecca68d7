//! Globals that user code initializes lazily inside a handler.
//!
//! A `static` behind `OnceLock`, `LazyLock`, `lazy_static!` or
//! `once_cell::Lazy`, or a `thread_local!` value, is initialized the first
//! time code touches it. When that first time is inside a handler, what the
//! initializer allocates lands in the process's arena, while the global
//! itself lives in the program's data (or the thread's TLS block), outside
//! every state. The next restore would roll the arena back under the
//! global's feet: a dangling pointer, false violations, corrupted memory.
//!
//! cmc's rule: **a global is part of no state.** After every transition
//! that allocated in an arena (and after the processes are built), the
//! program's writable data and this thread's TLS block are scanned for
//! words that point into an arena. What such a word reaches in the arena
//! (the blocks reachable from it through pointer-sized words, as the
//! canonical heap finds pointers) is *moved out*: copied into the system
//! heap, with every pointer into the moved blocks rewritten, and freed from
//! the arena, before the successor state is captured. The global then
//! behaves as if it had been initialized before the check, which is what
//! lazy initialization means to the program.
//!
//! What cannot be moved is a clear error that names the global and the
//! handler: a block the process's own state also reaches (the global and
//! the state share an object), or a moved block that still points into an
//! arena after the move. Not covered: a global whose memory was allocated
//! before the check (in the system heap) and into which a handler later
//! stores memory it allocated; cmc cannot see into the system heap.

use std::collections::HashSet;

use crate::memory::{ArenaId, Memory};

/// The program's writable data and this thread's TLS block, and the words
/// in them that pointed into an arena before any user code ran.
#[derive(Debug)]
pub(crate) struct Globals {
    /// `[start, end)` address ranges to scan, 8-byte aligned.
    ranges: Vec<(usize, usize)>,
    /// Where the executable is loaded (symbol values are relative to it),
    /// and its TLS block in this thread, for naming globals.
    load_bias: usize,
    tls_block: Option<(usize, usize)>,
    /// Word addresses that pointed into an arena at setup: cmc's own
    /// bookkeeping (the arena registry), never the user's.
    baseline: HashSet<usize>,
    /// The words of `ranges` as the last scan read them.
    copy: Vec<usize>,
    /// The arena allocation count at the last scan.
    allocations: u64,
    /// The globals moved out of arenas so far, by name.
    pub(crate) moved: Vec<String>,
    /// How many times blocks were moved out so far.
    pub(crate) moves: u64,
}

/// `ranges` without `holes` (both `[start, end)`; `holes` sorted), each
/// piece 8-byte aligned.
fn subtract(ranges: &[(usize, usize)], holes: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for &(start, end) in ranges {
        let mut at = start;
        for &(hs, he) in holes.iter().filter(|&&(hs, he)| he > start && hs < end) {
            if hs > at {
                out.push((at, hs));
            }
            at = at.max(he);
        }
        if at < end {
            out.push((at, end));
        }
    }
    out.into_iter()
        .map(|(s, e)| (s.next_multiple_of(8), e & !7))
        .filter(|(s, e)| s < e)
        .collect()
}

/// A global word that points into an arena.
#[derive(Debug, Clone, Copy)]
struct Hit {
    word: usize,
    value: usize,
}

impl Globals {
    /// Finds the ranges to scan and takes the baseline. Call after the
    /// arenas exist and before user code runs in them.
    pub(crate) fn new() -> Globals {
        let mut g = Globals {
            ranges: Vec::new(),
            load_bias: 0,
            tls_block: None,
            baseline: HashSet::new(),
            copy: Vec::new(),
            allocations: crate::memory::alloc::arena_allocations(),
            moved: Vec::new(),
            moves: 0,
        };
        g.find_ranges();
        g.copy = vec![0; g.ranges.iter().map(|&(s, e)| (e - s) / 8).sum()];
        g.baseline = g.scan(false).into_iter().map(|h| h.word).collect();
        g
    }

    fn find_ranges(&mut self) {
        let (ranges, bias) = exe_writable();
        let mut found = Found {
            ranges: ranges.clone(),
            bias: *bias,
        };
        let tls = crate::sys::layout::exe_tls_block();
        if let Some((s, e)) = tls {
            found.ranges.push((s.next_multiple_of(8), e & !7));
        }
        // Not cmc's own globals (`symbols::own_globals`).
        let mut own: Vec<(usize, usize)> = crate::sys::symbols::own_globals()
            .iter()
            .filter_map(|&(in_tls, value, size)| {
                let base = if in_tls { tls?.0 } else { found.bias };
                Some((base + value, base + value + size))
            })
            .collect();
        // Nor the coverage counters, which change with every transition
        // and never hold a pointer (`coverage`).
        own.extend(crate::sys::coverage::counters_range());
        own.sort_unstable();
        self.ranges = subtract(&found.ranges, &own);
        self.load_bias = found.bias;
        self.tls_block = tls;
    }

    /// Every global word that points into an arena (the baseline's
    /// excepted); with `changed`, only the words that changed since the
    /// last scan (a range equal to its copy is skipped after one `memcmp`).
    /// Updates the copy.
    fn scan(&mut self, changed: bool) -> Vec<Hit> {
        let (low, high) = crate::memory::arena::bounds();
        let span = high.saturating_sub(low);
        let mut hits = Vec::new();
        let mut k = 0;
        for &(start, end) in &self.ranges {
            let n = (end - start) / 8;
            let copy = &mut self.copy[k..k + n];
            k += n;
            // SAFETY: `start..end` is mapped, readable data of this program
            // and `copy` holds `n` words; memcmp reads both as bytes (other
            // threads may write the globals meanwhile: its answer is only a
            // hint, and a word that changes later is seen by a later scan).
            let same = changed
                && unsafe {
                    crate::sys::same_bytes(start as *const u8, copy.as_ptr().cast(), n * 8)
                };
            if same {
                continue;
            }
            for (i, old) in copy.iter_mut().enumerate() {
                let w = start + 8 * i;
                // SAFETY: an 8-byte aligned word of the range above; the read
                // is volatile since other threads may write it.
                let value = unsafe { std::ptr::read_volatile(w as *const usize) };
                if changed && value == *old {
                    continue;
                }
                *old = value;
                if value.wrapping_sub(low) < span
                    && crate::memory::arena::find(value).is_some()
                    && !self.baseline.contains(&w)
                    && !crate::memory::arena::is_registry(w)
                {
                    hits.push(Hit { word: w, value });
                }
            }
        }
        hits
    }

    /// After user code ran: moves out of the arenas what globals initialized
    /// meanwhile reach. `roots` gives each arena's root objects; `what`
    /// names the code (a handler of a process) for errors. Must run before
    /// the successor is captured, with no arena entered.
    pub(crate) fn after_user_code(
        &mut self,
        mem: &Memory,
        roots: &dyn Fn() -> Vec<(ArenaId, usize)>,
        what: &dyn Fn() -> String,
    ) -> Result<(), String> {
        let now = crate::memory::alloc::arena_allocations();
        if now == self.allocations {
            return Ok(());
        }
        self.allocations = now;
        let hits = self.scan(true);
        if hits.is_empty() {
            return Ok(());
        }
        let _sys = crate::sys::scope::system_scope();
        let result = self.move_out(mem, &roots(), &hits, what);
        // The moved globals were rewritten: take them into the copy.
        self.scan(true);
        // Freeing the moved blocks allocated nothing in an arena.
        self.allocations = crate::memory::alloc::arena_allocations();
        result
    }

    fn move_out(
        &mut self,
        mem: &Memory,
        roots: &[(ArenaId, usize)],
        hits: &[Hit],
        what: &dyn Fn() -> String,
    ) -> Result<(), String> {
        let arena_of = |addr: usize| {
            (0..mem.arena_count()).map(ArenaId).find(|&a| {
                let (base, len) = mem.range(a);
                addr >= base && addr < base + len
            })
        };
        // Only this memory's arenas are ours to move (another engine of the
        // process, on another thread, keeps its own).
        let hits: Vec<Hit> = hits
            .iter()
            .copied()
            .filter(|h| arena_of(h.value).is_some())
            .collect();
        if hits.is_empty() {
            return Ok(());
        }
        let hits = &hits[..];
        let mut unique_names: Vec<String> = hits.iter().map(|h| self.name(h.word)).collect();
        unique_names.dedup();
        let blame = |why: String| {
            format!(
                "{} initialized the global {} inside a handler, and cmc cannot move it out of the \
                 process's arena: {why}. Globals are part of no state; initialize it before the \
                 check (touch it in the model function, which runs outside every arena), or keep \
                 it out of the state",
                what(),
                unique_names.join(", ")
            )
        };
        // Group the hits by arena; each arena's reachable blocks move.
        let mut arenas: Vec<ArenaId> = hits.iter().filter_map(|h| arena_of(h.value)).collect();
        arenas.sort();
        arenas.dedup();
        let mut relocation: Vec<(usize, usize, usize)> = Vec::new(); // (old, len, new)
        for arena in arenas {
            let blocks: Vec<(usize, usize)> = mem
                .live_blocks(arena)
                .into_iter()
                .map(|(p, l)| (p as usize, l))
                .collect();
            let find = |addr: usize| -> Option<usize> {
                let i = blocks.partition_point(|&(start, _)| start <= addr);
                (i > 0 && addr <= blocks[i - 1].0 + blocks[i - 1].1).then(|| i - 1)
            };
            let mark = |from: &mut Vec<usize>, marked: &mut Vec<bool>| {
                while let Some(i) = from.pop() {
                    let (start, len) = blocks[i];
                    for off in (0..len.saturating_sub(7)).step_by(8) {
                        // SAFETY: a word inside a live block of the arena.
                        let word =
                            unsafe { std::ptr::read_volatile((start + off) as *const usize) };
                        if let Some(j) = find(word) {
                            if !marked[j] {
                                marked[j] = true;
                                from.push(j);
                            }
                        }
                    }
                }
            };
            let mut global = vec![false; blocks.len()];
            let mut stack: Vec<usize> = Vec::new();
            for h in hits.iter().filter(|h| arena_of(h.value) == Some(arena)) {
                // A word that points at no live object is no reference: a
                // dead byte (the payload of a `None`, a value moved out).
                if let Some(i) = find(h.value) {
                    if !global[i] {
                        global[i] = true;
                        stack.push(i);
                    }
                }
            }
            mark(&mut stack, &mut global);
            // The state's own objects must not be among them.
            let mut state = vec![false; blocks.len()];
            for &(a, root) in roots.iter().filter(|(a, _)| *a == arena) {
                debug_assert_eq!(a, arena);
                if let Some(i) = find(root) {
                    state[i] = true;
                    stack.push(i);
                }
            }
            mark(&mut stack, &mut state);
            if let Some(i) = (0..blocks.len()).find(|&i| global[i] && state[i]) {
                return Err(blame(format!(
                    "the process's state reaches the same object ({} bytes at offset {})",
                    blocks[i].1,
                    blocks[i].0 - mem.range(arena).0
                )));
            }
            for (i, &(start, len)) in blocks.iter().enumerate().filter(|(i, _)| global[*i]) {
                let _ = i;
                // The block's own alignment bounds whatever alignment its
                // type needed.
                let align = (1usize << start.trailing_zeros()).clamp(16, 4096);
                let layout = std::alloc::Layout::from_size_align(len.max(1), align)
                    .expect("a block's size and alignment form a layout");
                // SAFETY: a non-zero size; the system allocator, since no
                // arena is entered.
                let new =
                    unsafe { std::alloc::GlobalAlloc::alloc(&std::alloc::System, layout) } as usize;
                if new == 0 {
                    return Err(blame("the system allocator is out of memory".into()));
                }
                // SAFETY: both ranges are `len` bytes, valid and disjoint.
                unsafe { std::ptr::copy_nonoverlapping(start as *const u8, new as *mut u8, len) };
                relocation.push((start, len, new));
            }
        }
        relocation.sort_unstable();
        let relocate = |value: usize| -> Option<usize> {
            let i = relocation.partition_point(|&(old, _, _)| old <= value);
            let (old, len, new) = *relocation.get(i.checked_sub(1)?)?;
            (value <= old + len).then(|| new + (value - old))
        };
        // Rewrite the copies, then the globals.
        for &(_, len, new) in &relocation {
            for off in (0..len.saturating_sub(7)).step_by(8) {
                let p = (new + off) as *mut usize;
                // SAFETY: a word of a block we just allocated and filled.
                unsafe {
                    if let Some(v) = relocate(p.read_unaligned()) {
                        p.write_unaligned(v);
                    }
                }
            }
        }
        for h in hits {
            let p = h.word as *mut usize;
            // SAFETY: a writable, aligned word of the program's data or TLS
            // block, found by the scan; no handler runs now.
            unsafe {
                if let Some(v) = relocate(p.read_volatile()) {
                    p.write_volatile(v);
                }
            }
        }
        // What moved must not point back into an arena.
        for &(old, len, new) in &relocation {
            for off in (0..len.saturating_sub(7)).step_by(8) {
                // SAFETY: as above.
                let v = unsafe { ((new + off) as *const usize).read_unaligned() };
                if crate::memory::arena::find(v).is_some() {
                    return Err(blame(format!(
                        "an object it reaches ({len} bytes, moved from {old:#x}) holds a pointer \
                         into an arena ({v:#x})"
                    )));
                }
            }
        }
        // Free the originals: they are no longer part of the state.
        for &(old, len, _) in &relocation {
            let layout = std::alloc::Layout::from_size_align(len.max(1), 1)
                .expect("a block's size forms a layout");
            // SAFETY: a live block of an arena, now unreferenced (every
            // pointer to it was rewritten); frees are routed by address.
            unsafe {
                std::alloc::GlobalAlloc::dealloc(
                    &crate::memory::alloc::Allocator,
                    old as *mut u8,
                    layout,
                )
            };
        }
        if !relocation.is_empty() {
            self.moves += 1;
        }
        for n in unique_names {
            if !self.moved.contains(&n) {
                self.moved.push(n);
            }
        }
        Ok(())
    }

    /// The name of the global (or thread-local) holding `word`, from the
    /// executable's symbol table, or its address.
    /// The words of the program's writable data and this thread's TLS
    /// block (cmc's own globals excepted), to tell which globals a run of
    /// user code wrote.
    pub(crate) fn snapshot(&self) -> Vec<usize> {
        let mut words = Vec::new();
        for &(start, end) in &self.ranges {
            for w in (start..end).step_by(8) {
                // SAFETY: the range is mapped, readable data of this program,
                // 8-byte aligned (see `scan`).
                words.push(unsafe { std::ptr::read_volatile(w as *const usize) });
            }
        }
        words
    }

    /// The globals whose words differ from `before` (a [`Self::snapshot`]),
    /// by name, except the words cmc itself sets before each transition
    /// (`controlled`: the determinism layer's, which this layer below it
    /// is given rather than asks for).
    pub(crate) fn written_since(&self, before: &[usize], controlled: &[usize]) -> Vec<String> {
        self.names(&self.words_written_since(before, controlled))
    }

    /// The addresses of the words [`Self::written_since`] names: cheap, for
    /// a check that names them only when it reports (naming reads the
    /// symbol table).
    pub(crate) fn words_written_since(&self, before: &[usize], controlled: &[usize]) -> Vec<usize> {
        let mut words = Vec::new();
        let mut k = 0;
        for &(start, end) in &self.ranges {
            for w in (start..end).step_by(8) {
                // SAFETY: as in `snapshot`.
                let now = unsafe { std::ptr::read_volatile(w as *const usize) };
                if before.get(k).is_some_and(|&b| b != now) && !controlled.contains(&w) {
                    words.push(w);
                }
                k += 1;
            }
        }
        words
    }

    /// The globals `words` belong to, by name, each once.
    pub(crate) fn names(&self, words: &[usize]) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for &w in words {
            let name = self.name(w);
            let name = match name.find("` (+") {
                Some(i) => name[..=i].to_string(),
                None => name,
            };
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    fn name(&self, word: usize) -> String {
        let (value, tls) = match self.tls_block {
            Some((s, e)) if word >= s && word < e => (word - s, true),
            _ => (word - self.load_bias, false),
        };
        crate::sys::symbols::symbol_at(value, tls).map_or_else(
            || format!("at {word:#x}"),
            |(name, off)| {
                if off == 0 {
                    format!("`{name}`")
                } else {
                    format!("`{name}` (+{off})")
                }
            },
        )
    }
}

/// The executable's writable data (past its relocated read-only part) and
/// its load bias, found once: `dl_iterate_phdr` takes the dynamic loader's
/// lock, which a forked child must never wait for (another thread may have
/// held it at the fork), so the child uses what the parent found.
pub(crate) fn exe_writable() -> &'static (Vec<(usize, usize)>, usize) {
    static FOUND: std::sync::OnceLock<(Vec<(usize, usize)>, usize)> = std::sync::OnceLock::new();
    FOUND.get_or_init(|| {
        let _sys = crate::sys::scope::system_scope();
        let mut found = Found {
            ranges: Vec::new(),
            bias: 0,
        };
        crate::sys::layout::each_module(|bias, phdrs| {
            // The first object is the executable, which holds all Rust code
            // (std included): the only module whose globals Rust code
            // initializes.
            let relro = phdrs
                .iter()
                .find(|p| p.p_type == libc::PT_GNU_RELRO)
                .map(|p| {
                    (
                        bias + p.p_vaddr as usize,
                        bias + (p.p_vaddr + p.p_memsz) as usize,
                    )
                });
            for p in phdrs {
                if p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_W != 0 {
                    let mut start = bias + p.p_vaddr as usize;
                    let end = bias + (p.p_vaddr + p.p_memsz) as usize;
                    // Relocated read-only data holds no lazily set words.
                    if let Some((rs, re)) = relro {
                        if rs <= start && re > start {
                            start = re;
                        }
                    }
                    if start < end {
                        found.ranges.push((start.next_multiple_of(8), end & !7));
                    }
                }
            }
            found.bias = bias;
            false // Stop: only the executable.
        });
        (found.ranges, found.bias)
    })
}

/// The executable's writable ranges and load bias, as found.
struct Found {
    ranges: Vec<(usize, usize)>,
    bias: usize,
}
