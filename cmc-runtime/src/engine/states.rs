//! The states the engine holds, as the search and replay see them: the
//! engine owns the memory, and every state is loaded, captured, kept and
//! dropped through it (so that a layer above cannot bypass what the engine
//! keeps in step with the memory: the node its guards run at, the seed base
//! of the state it expands, the fingerprint tags it computed). Also the
//! few settings the search makes around an expansion.

use crate::engine::erased::Erased as P;
use crate::identity::TypeSource;
use crate::memory::arena::ArenaExhausted;
use crate::memory::{ArenaId, MemoryStats, StateId, TableId};
use crate::model::{FingerprintMode, Handler, Model};

use super::properties::PropertyFn;
use super::setup::Engine;

impl<'m> Engine<'m, P> {
    /// Loads `state` into the arenas (only the pages that differ are
    /// written) and arms write tracking for the next transition.
    pub(crate) fn load(&mut self, state: StateId) {
        self.mem.restore(state);
    }

    /// Captures the arenas as a new state, which becomes the loaded one;
    /// the caller owns one reference to it.
    pub(crate) fn capture(&mut self) -> StateId {
        self.mem.capture()
    }

    /// Appends `state` to `out` as the pages in which it differs from
    /// `prev` (see `Memory::export`).
    pub(crate) fn export(&self, state: StateId, prev: Option<StateId>, out: &mut Vec<u8>) {
        self.mem.export(state, prev, out);
    }

    /// Reads a state [`Engine::export`] wrote (see `Memory::import`); the
    /// caller owns one reference.
    pub(crate) fn import(&mut self, prev: Option<StateId>, data: &[u8], at: &mut usize) -> StateId {
        self.mem.import(prev, data, at)
    }

    /// Adds a reference to `state`.
    pub(crate) fn retain(&mut self, state: StateId) {
        self.mem.retain(state);
    }

    /// Drops a reference to `state`; the last one frees it.
    pub(crate) fn release(&mut self, state: StateId) {
        self.mem.release(state);
    }

    /// The arena that ran out of its reservation in the last transition,
    /// if any (taking the record).
    pub(crate) fn take_exhaustion(&self) -> Option<ArenaExhausted> {
        self.mem.take_exhaustion()
    }

    /// What the memory holds (pages, tables, states, bytes).
    pub(crate) fn memory_stats(&self) -> MemoryStats {
        self.mem.stats()
    }

    /// The number of arenas (processes and the environment).
    pub(crate) fn arena_count(&self) -> usize {
        self.mem.arena_count()
    }

    /// A hash naming `arena`'s contents in `state` (see
    /// `Memory::arena_key`): the transition cache's key of an arena.
    pub(crate) fn arena_key(&self, state: StateId, arena: ArenaId) -> u128 {
        self.mem.arena_key(state, arena)
    }

    /// The table of `arena` in `state`, without a reference: equal tables,
    /// equal contents.
    pub(crate) fn table_of(&self, state: StateId, arena: ArenaId) -> TableId {
        self.mem.table_of(state, arena)
    }

    /// Keeps `table`'s pages stored until [`Engine::drop_table`].
    pub(crate) fn keep_table(&mut self, table: TableId) {
        self.mem.keep_table(table);
    }

    /// Gives back a reference taken by [`Engine::keep_table`].
    pub(crate) fn drop_table(&mut self, table: TableId) {
        self.mem.drop_table(table);
    }

    /// A new state equal to `pre` except in the arenas of `replace` (the
    /// transition cache's successor built without running the transition);
    /// the caller owns one reference.
    pub(crate) fn derive(&mut self, pre: StateId, replace: &[(ArenaId, TableId)]) -> StateId {
        self.mem.derive(pre, replace)
    }

    /// The fingerprint sum tagged on `state`, if any.
    pub(crate) fn state_tag(&self, state: StateId) -> Option<u128> {
        self.mem.state_tag(state)
    }

    /// Tags `state` with the sum its fingerprint was finished from.
    pub(crate) fn set_state_tag(&mut self, state: StateId, sum: u128) {
        self.mem.set_state_tag(state, sum);
    }

    /// Whether no arena of `state` points into another (see
    /// `Memory::isolated`).
    pub(crate) fn isolated(&self, state: StateId) -> bool {
        self.mem.isolated(state)
    }

    /// Runs the next guards and invariants at search-tree node `node` (a
    /// crash there is attributed to that state).
    pub(crate) fn set_node(&mut self, node: u32) {
        self.at = node;
    }

    /// Starts the expansion of `state`, whose seed base (see
    /// [`Engine::seed_key`]) is `base`, exact or provisional.
    pub(crate) fn begin_expansion(&mut self, state: StateId, base: u128, exact: bool) {
        self.seed_base = Some((state, base, exact));
        self.orbit_seed = None;
    }

    /// Ends the expansion begun by [`Engine::begin_expansion`].
    pub(crate) fn end_expansion(&mut self) {
        self.seed_base = None;
        self.orbit_seed = None;
    }

    /// The generator state that picks a run's choices beyond its script
    /// (a random walk's), or `None`: they are 0.
    pub(crate) fn set_pick(&mut self, pick: Option<u64>) {
        self.pick = pick;
    }

    /// Lets the engine remember `slots` contents of process arenas on which
    /// every per-process invariant held (see
    /// [`Engine::invariant_violations`]); `0`: remember none.
    pub(crate) fn remember_passed(&mut self, slots: usize) {
        self.passed = (slots > 0).then(|| (0..slots).map(|_| std::cell::Cell::new(0)).collect());
    }

    /// The model this engine runs.
    pub(crate) fn model(&self) -> &'m Model<P> {
        self.model
    }

    /// The initial state.
    pub(crate) fn initial(&self) -> StateId {
        self.initial
    }

    /// The number of processes.
    pub(crate) fn process_count(&self) -> usize {
        self.roots.len()
    }

    /// The handler table, indexed by an event's handler.
    pub(crate) fn handlers(&self) -> &[Handler<P>] {
        &self.handlers
    }

    /// The model's `sometimes` and `eventually` properties, then the
    /// registered ones.
    pub(crate) fn properties(&self) -> &[PropertyFn<P>] {
        &self.properties
    }

    /// Each process's arena, by process index.
    pub(crate) fn arenas(&self) -> &[ArenaId] {
        &self.arenas
    }

    /// The environment's arena.
    pub(crate) fn env_arena(&self) -> ArenaId {
        self.env_arena
    }

    /// The source of identity each type of the model uses.
    pub(crate) fn sources(&self) -> &[TypeSource] {
        &self.fp.sources
    }

    /// How the process type is fingerprinted.
    pub(crate) fn process_mode(&self) -> Option<FingerprintMode> {
        self.fp.process.mode()
    }

    /// The search-tree node the next guards and invariants run at.
    pub(crate) fn node(&self) -> u32 {
        self.at
    }

    /// The sum of components [`Engine::pending_fingerprint`] found last.
    pub(crate) fn pending_sum(&self) -> u128 {
        self.pending_sum
    }

    /// Whether the search tree has no room left.
    pub(crate) fn tree_full(&self) -> bool {
        self.tree.full()
    }

    /// Bytes of the search tree written so far.
    pub(crate) fn tree_bytes(&self) -> usize {
        self.tree.bytes()
    }

    /// How many more nodes the search tree can hold.
    pub(crate) fn tree_room(&self) -> usize {
        self.tree.room()
    }

    /// Cuts the search tree back to its first `len` nodes (a depth-first
    /// search's finished subtrees).
    pub(crate) fn truncate_tree(&mut self, len: usize) {
        self.tree.truncate(len);
    }

    /// The words of the program's globals now (for the determinism check).
    pub(crate) fn globals_snapshot(&self) -> Vec<usize> {
        self.globals.snapshot()
    }

    /// The words of globals that differ from `before`, except those the
    /// runtime controls (see `determinism::random`).
    pub(crate) fn globals_written_since(&self, before: &[usize]) -> Vec<usize> {
        let controlled = crate::determinism::random::controlled_words();
        self.globals.words_written_since(before, &controlled)
    }

    /// The globals that `words` belong to, by name.
    pub(crate) fn globals_named(&self, words: &[usize]) -> Vec<String> {
        self.globals.names(words)
    }

    /// [`Engine::globals_written_since`], by name.
    pub(crate) fn globals_written_names(&self, before: &[usize]) -> Vec<String> {
        let controlled = crate::determinism::random::controlled_words();
        self.globals.written_since(before, &controlled)
    }
}
