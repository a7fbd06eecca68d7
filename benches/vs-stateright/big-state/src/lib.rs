//! A process whose state is one large table, of which each transition
//! changes a single cell: the cmc side of the `big` mode of
//! `benches/vs-stateright`, which measures how the cost of one transition
//! grows with the size of a process's state.
//!
//! [`Table`] holds `cells: Vec<u64>`; its one handler, `bump`,
//! chooses one of [`SLOTS`] cells spread evenly across the vector and
//! increments it modulo 3. Every other cell stays 0, so whatever the size
//! there are 3^6 = 729 states and 729 × 6 = 4374 transitions; only the bytes
//! each state carries change between the models.

use cmc::Model;

/// How many cells the handler may bump.
pub const SLOTS: usize = 6;

/// The values a bumped cell cycles through (`0..MODULUS`).
pub const MODULUS: u64 = 3;

/// The one process: a table of counters, most of which never change. Its
/// identity is its derived `cmc::StateHash`; `Hash` and `Debug` are there
/// for the bench's `--fingerprint hash` and `--fingerprint debug` runs.
#[derive(Debug, Hash, PartialEq, Eq, cmc::StateHash)]
pub struct Table {
    cells: Vec<u64>,
}

impl Table {
    /// A table of `len` zeroed cells.
    ///
    /// # Panics
    /// When `len` is below [`SLOTS`]: the slots would not be distinct cells.
    pub fn new(len: usize) -> Self {
        assert!(
            len >= SLOTS,
            "a table needs at least {SLOTS} cells for its slots, not {len}"
        );
        Table {
            cells: vec![0; len],
        }
    }

    /// The index of slot `slot`: the middle of the `slot`-th of [`SLOTS`]
    /// equal parts of the table, so that in a large table each slot lies on
    /// its own page.
    pub fn slot_index(&self, slot: usize) -> usize {
        (2 * slot + 1) * self.cells.len() / (2 * SLOTS)
    }
}

#[cmc::process]
impl Table {
    /// Increments one of the [`SLOTS`] cells modulo [`MODULUS`]; each slot is
    /// a separate transition.
    #[handler]
    fn bump(&mut self) {
        let i = self.slot_index(cmc::choose(SLOTS));
        self.cells[i] = (self.cells[i] + 1) % MODULUS;
    }

    /// Every slot holds a value below [`MODULUS`]. It reads the six slots
    /// only, so that checking it costs the same whatever the size (the
    /// stateright peer checks the same property).
    #[invariant]
    fn slots_below_modulus(&self) -> bool {
        (0..SLOTS).all(|slot| self.cells[self.slot_index(slot)] < MODULUS)
    }
}

/// The model of one table of `len` cells.
pub fn big_state(name: &str, len: usize) -> Model<Table> {
    // `bump` is enabled in every state, so a state without a successor
    // would be a fault of cmc, not of the model: report it.
    Model::new(name, 1, move |_| Table::new(len)).quiescence_ok(false)
}

/// 512 cells: 4 KiB of state.
#[cmc::model]
pub fn big_state_4k() -> Model<Table> {
    big_state("big_state_4k", 512)
}

/// 8192 cells: 64 KiB of state.
#[cmc::model]
pub fn big_state_64k() -> Model<Table> {
    big_state("big_state_64k", 8192)
}

/// 131072 cells: 1 MiB of state.
#[cmc::model]
pub fn big_state_1m() -> Model<Table> {
    big_state("big_state_1m", 131_072)
}
