//! The frontier's overflow on disk (TLC's disk queue is the model): the
//! states of a breadth-first frontier beyond what it keeps in memory are
//! written to files in segments of consecutive entries, in large
//! sequential writes, and read back whole, in order, when the search
//! reaches them. A state is written as the pages in which it differs from
//! the entry before it (`Memory::export`): siblings differ in a few bytes
//! of a few pages, so an entry costs tens to hundreds of bytes on disk and
//! nothing in memory.
//!
//! The files live in a directory of their own under `CMC_SPILL_DIR`
//! (`cargo cmc` sets it to `target/cmc/spill`; the system's temporary
//! directory otherwise), removed with the frontier. A file that cannot be
//! written or read is cmc's own failure, never the checked code's.

use crate::engine::erased::Erased as P;
use std::collections::VecDeque;
use std::path::PathBuf;

use crate::engine::Engine;
use crate::memory::StateId;

/// An entry of the frontier: its node of the search tree, its depth and
/// its state.
pub(super) type Entry = (u32, usize, StateId);

/// What the frontier needs of the engine to write and read states.
pub(crate) trait StateIo {
    /// Appends `state` to `out`, against `prev` (see `Memory::export`).
    fn export_state(&self, state: StateId, prev: Option<StateId>, out: &mut Vec<u8>);
    /// Reads a state written by `export_state` (see `Memory::import`).
    fn import_state(&mut self, prev: Option<StateId>, data: &[u8], at: &mut usize) -> StateId;
    /// Drops a reference to `state`.
    fn release_state(&mut self, state: StateId);
}

impl StateIo for Engine<'_, P> {
    fn export_state(&self, state: StateId, prev: Option<StateId>, out: &mut Vec<u8>) {
        self.export(state, prev, out);
    }

    fn import_state(&mut self, prev: Option<StateId>, data: &[u8], at: &mut usize) -> StateId {
        self.import(prev, data, at)
    }

    fn release_state(&mut self, state: StateId) {
        self.release(state);
    }
}

/// A segment on disk: its file, its entries and its size.
struct Segment {
    path: PathBuf,
    items: usize,
    bytes: u64,
}

/// The segments of a frontier on disk, oldest first.
pub(super) struct Spill {
    dir: Option<PathBuf>,
    segments: VecDeque<Segment>,
    next: u64,
    /// Entries on disk now.
    pub(super) items: usize,
    /// Bytes on disk now, and the most there ever were.
    pub(super) bytes: u64,
    pub(super) peak_bytes: u64,
    /// Entries written in all.
    pub(super) written: u64,
}

fn put(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn get(data: &[u8], at: &mut usize) -> u64 {
    let mut n = 0u64;
    let mut shift = 0;
    loop {
        let byte = data[*at];
        *at += 1;
        n |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return n;
        }
        shift += 7;
        assert!(shift < 64, "a frontier segment holds a malformed number");
    }
}

/// A number for each spill directory of this process.
static DIRS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Spill {
    pub(super) fn new() -> Self {
        Spill {
            dir: None,
            segments: VecDeque::new(),
            next: 0,
            items: 0,
            bytes: 0,
            peak_bytes: 0,
            written: 0,
        }
    }

    /// Whether no entry is on disk.
    pub(super) fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// The directory, made at the first write.
    fn dir(&mut self) -> PathBuf {
        if let Some(d) = &self.dir {
            return d.clone();
        }
        let root = std::env::var_os("CMC_SPILL_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| std::env::temp_dir().join("cmc-spill"));
        let n = DIRS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = root.join(format!("frontier-{}-{n}", std::process::id()));
        if let Err(e) = std::fs::create_dir_all(&dir) {
            crate::sys::process::checker_failure(&format!(
                "cannot make the directory {} for the frontier on disk: {e}",
                dir.display()
            ));
        }
        self.dir = Some(dir.clone());
        dir
    }

    /// Writes `items` (consecutive entries of the frontier, oldest first)
    /// as the newest segment, releasing their states.
    pub(super) fn write(&mut self, io: &mut dyn StateIo, items: impl Iterator<Item = Entry>) {
        let mut data = Vec::new();
        let mut prev: Option<StateId> = None;
        let mut count = 0;
        for (node, depth, state) in items {
            put(&mut data, u64::from(node));
            put(&mut data, depth as u64);
            io.export_state(state, prev, &mut data);
            // The previous state is needed until its successor is written.
            if let Some(p) = prev.replace(state) {
                io.release_state(p);
            }
            count += 1;
        }
        if let Some(p) = prev {
            io.release_state(p);
        }
        if count == 0 {
            return;
        }
        let path = self.dir().join(format!("segment-{}", self.next));
        self.next += 1;
        if let Err(e) = std::fs::write(&path, &data) {
            crate::sys::process::checker_failure(&format!(
                "cannot write the frontier to {}: {e}",
                path.display()
            ));
        }
        let bytes = data.len() as u64;
        self.items += count;
        self.written += count as u64;
        self.bytes += bytes;
        self.peak_bytes = self.peak_bytes.max(self.bytes);
        self.segments.push_back(Segment {
            path,
            items: count,
            bytes,
        });
    }

    /// Reads the oldest segment back (`newest`: the newest one), oldest
    /// entry first, and removes its file.
    pub(super) fn read(&mut self, io: &mut dyn StateIo, newest: bool) -> Vec<Entry> {
        let segment = if newest {
            self.segments.pop_back()
        } else {
            self.segments.pop_front()
        };
        let Some(segment) = segment else {
            return Vec::new();
        };
        let data = std::fs::read(&segment.path).unwrap_or_else(|e| {
            crate::sys::process::checker_failure(&format!(
                "cannot read the frontier back from {}: {e}",
                segment.path.display()
            ))
        });
        let _ = std::fs::remove_file(&segment.path);
        assert_eq!(
            data.len() as u64,
            segment.bytes,
            "a frontier segment changed size on disk"
        );
        let mut items = Vec::with_capacity(segment.items);
        let mut at = 0;
        let mut prev = None;
        while at < data.len() {
            let node = get(&data, &mut at) as u32;
            let depth = get(&data, &mut at) as usize;
            let state = io.import_state(prev, &data, &mut at);
            prev = Some(state);
            items.push((node, depth, state));
        }
        assert_eq!(
            items.len(),
            segment.items,
            "a frontier segment read back with another number of entries"
        );
        self.items -= segment.items;
        self.bytes -= segment.bytes;
        items
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        for s in &self.segments {
            let _ = std::fs::remove_file(&s.path);
        }
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir(d);
        }
    }
}
