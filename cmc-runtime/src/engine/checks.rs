//! Checking a state: per-process and global invariants, properties,
//! deadlock, leaks.

use super::setup::Engine;
use crate::engine::erased::Erased as P;

use crate::engine::isolate::{self};
use crate::engine::trace::{ViolationKind, ViolationRecord};
use crate::memory::ArenaId;
use crate::model::ctx::user_code;
use crate::sys::scope::system_scope;

impl<'m> Engine<'m, P> {
    /// The invariants the loaded state violates (per-process ones first,
    /// then global ones, in declaration order); only the first when
    /// `first_only`.
    pub(crate) fn invariant_violations(&self, first_only: bool) -> Vec<ViolationRecord> {
        let _sys = system_scope();
        let mut found = Vec::new();
        let record = |property: &str, message: String, panic: Option<String>| ViolationRecord {
            kind: if panic.is_some() {
                ViolationKind::Panic
            } else {
                ViolationKind::Invariant
            },
            property: property.into(),
            message,
            location: panic,
        };
        // A per-process invariant reads its process's state, which in an
        // isolated state is its arena's contents: where every one held on
        // contents with the same key, they hold again (remembered only
        // when the search allows it, only for the first violation, and only
        // while the arenas hold the loaded state exactly).
        let loaded = self.mem.loaded_exactly();
        let remember = self
            .passed
            .as_ref()
            .filter(|_| first_only && !self.invariants.is_empty())
            .zip(loaded.filter(|&s| self.mem.isolated(s)));
        for (p, &root) in self.roots.iter().enumerate() {
            // SAFETY: a live root of the loaded state.
            let proc = unsafe { &*root };
            let key = remember.map(|(passed, state)| {
                let key = self.mem.arena_key(state, self.arenas[p]);
                (&passed[key as usize & (passed.len() - 1)], key)
            });
            if key.is_some_and(|(slot, key)| slot.get() == key) {
                continue;
            }
            let before = found.len();
            for (k, inv) in self.invariants.iter().enumerate() {
                isolate::phase(isolate::IN_INVARIANT, self.at, p as u64, k as u64, 0);
                match user_code(false, || (inv.check)(proc)) {
                    Ok(Ok(())) => continue,
                    Ok(Err(message)) => {
                        found.push(record(inv.name, format!("process {p}: {message}"), None))
                    }
                    Err((message, location)) => found.push(record(
                        inv.name,
                        format!("process {p}: {message}"),
                        Some(location),
                    )),
                }
                if first_only {
                    return found;
                }
            }
            if let (Some((slot, key)), true) = (key, found.len() == before) {
                slot.set(key);
            }
        }
        let world = self.world();
        let own = self
            .model
            .invariants
            .iter()
            .map(|inv| (inv.name, Ok(inv.check)));
        let registered = self
            .registered
            .iter()
            .map(|&(name, check)| (name, Err(check)));
        for (k, (name, check)) in own.chain(registered).enumerate() {
            isolate::phase(
                isolate::IN_INVARIANT,
                self.at,
                u64::MAX,
                (self.invariants.len() + k) as u64,
                0,
            );
            let result = user_code(false, || match check {
                Ok(f) => f(&world),
                Err(erased) => crate::model::registered::run_erased(erased, &world),
            });
            match result {
                Ok(Ok(())) => continue,
                Ok(Err(message)) => found.push(record(name, message, None)),
                Err((message, location)) => found.push(record(name, message, Some(location))),
            }
            if first_only {
                return found;
            }
        }
        found
    }

    /// Whether property `k` (of [`Engine::properties`]) holds in the loaded
    /// state; a panic in it is a violation.
    pub(crate) fn property_holds(&self, k: usize) -> Result<bool, ViolationRecord> {
        let _sys = system_scope();
        let world = self.world();
        let prop = &self.properties[k];
        let first = self.invariants.len() + self.model.invariants.len() + self.registered.len();
        isolate::phase(
            isolate::IN_INVARIANT,
            self.at,
            u64::MAX,
            (first + k) as u64,
            0,
        );
        let result = user_code(false, || match prop.check {
            Ok(f) => {
                if f(&world) {
                    Ok(())
                } else {
                    Err(String::new())
                }
            }
            Err(erased) => crate::model::registered::run_erased(erased, &world),
        });
        match result {
            Ok(Ok(())) => Ok(true),
            Ok(Err(_)) => Ok(false),
            Err((message, location)) => Err(ViolationRecord {
                kind: ViolationKind::Panic,
                property: prop.name.into(),
                message,
                location: Some(location),
            }),
        }
    }

    /// Checks the properties of the loaded state: per-process and global
    /// invariants, and leaks when enabled.
    pub(crate) fn check_state(&self) -> Option<ViolationRecord> {
        let _sys = system_scope();
        if let Some(record) = self.invariant_violations(true).pop() {
            return Some(record);
        }
        if self.model.detect_leaks {
            for (p, &arena) in self.arenas.iter().enumerate() {
                if let Some((count, bytes)) = self.leaked(arena, self.roots[p] as *const u8) {
                    return Some(ViolationRecord {
                        kind: ViolationKind::Leak,
                        property: format!("process {p}'s heap"),
                        message: format!(
                            "{count} object(s), {bytes} bytes, in process {p}'s arena are unreachable from its root"
                        ),
                        location: None,
                    });
                }
            }
        }
        None
    }

    /// Marks the arena's blocks reachable from `root` through aligned words
    /// that point into live blocks (interior pointers included); returns the
    /// number and bytes of the others, if any.
    pub(crate) fn leaked(&self, arena: ArenaId, root: *const u8) -> Option<(usize, usize)> {
        let blocks = self.mem.live_blocks(arena);
        let find = |addr: usize| -> Option<usize> {
            let i = blocks.partition_point(|&(start, _)| start as usize <= addr);
            (i > 0 && addr < blocks[i - 1].0 as usize + blocks[i - 1].1).then(|| i - 1)
        };
        let mut marked = vec![false; blocks.len()];
        let mut stack = Vec::new();
        if let Some(i) = find(root as usize) {
            marked[i] = true;
            stack.push(i);
        }
        while let Some(i) = stack.pop() {
            let (start, len) = blocks[i];
            for off in (0..len.saturating_sub(7)).step_by(8) {
                // SAFETY: the word lies inside a live block of the arena
                // (blocks are 16-aligned), which is mapped and readable.
                let word = unsafe { std::ptr::read_volatile(start.add(off) as *const usize) };
                if let Some(j) = find(word) {
                    if !marked[j] {
                        marked[j] = true;
                        stack.push(j);
                    }
                }
            }
        }
        let (count, bytes) = blocks
            .iter()
            .zip(&marked)
            .filter(|(_, &m)| !m)
            .fold((0, 0), |(c, b), (&(_, len), _)| (c + 1, b + len));
        (count > 0).then_some((count, bytes))
    }
}
