//! Peterson's mutual exclusion for two processes, and "check, then set", a
//! plausible-looking variant that lets both processes into the critical
//! section. `cargo cmc check` proves the first (20 states) and finds the
//! shortest path into the second's bug (4 steps with `--strategy bfs`).

// ANCHOR: shared
/// The variables both processes share.
#[derive(Debug, Default)]
pub struct Flags {
    /// Each process's "I want to enter".
    pub flag: [bool; 2],
    /// Whose turn it is to wait.
    pub turn: usize,
}

// ANCHOR_END: shared

// ANCHOR: process
/// One process: its program counter (0 idle, 1 flag raised, 2 turn given,
/// 3 critical section) and which algorithm it runs.
#[derive(Debug)]
pub struct Proc {
    pc: u8,
    check_then_set: bool,
}

#[cmc::process(shared = Flags)]
impl Proc {
    /// Takes the next step of the algorithm.
    #[handler(guard = Self::can_step)]
    fn step(&mut self, ctx: &mut cmc::Ctx<'_, Self>) {
        let (me, other) = (ctx.me(), 1 - ctx.me());
        self.pc = match (self.check_then_set, self.pc) {
            // Peterson: raise the flag, give the turn away, enter.
            (false, 0) => {
                ctx.with_shared(|s| s.flag[me] = true);
                1
            }
            (false, 1) => {
                ctx.with_shared(|s| s.turn = other);
                2
            }
            (false, 2) => 3,
            // Check, then set: (the guard checked the other's flag) raise
            // ours, enter.
            (true, 0) => 1,
            (true, 1) => {
                ctx.with_shared(|s| s.flag[me] = true);
                3
            }
            // Leave the critical section.
            _ => {
                ctx.with_shared(|s| s.flag[me] = false);
                0
            }
        };
    }

    /// Peterson waits while the other wants in and it is the other's turn;
    /// the broken variant only checks the other's flag, before raising its
    /// own.
    fn can_step(&self, view: &cmc::View<'_, Self>) -> bool {
        let (s, other) = (view.shared(), 1 - view.me());
        match (self.check_then_set, self.pc) {
            (false, 2) => !(s.flag[other] && s.turn == other),
            (true, 0) => !s.flag[other],
            _ => true,
        }
    }
}

// ANCHOR_END: process

// ANCHOR: invariant
/// At most one process in the critical section.
#[cmc::invariant]
fn mutual_exclusion(world: &cmc::World<'_, Proc>) -> Result<(), String> {
    if world.processes().all(|p| p.pc == 3) {
        Err("both processes are in the critical section".into())
    } else {
        Ok(())
    }
}

// ANCHOR_END: invariant

// ANCHOR: models
/// Peterson's algorithm: mutually exclusive.
#[cmc::model]
pub fn peterson() -> cmc::Model<Proc> {
    cmc::Model::new("peterson", 2, |_| Proc {
        pc: 0,
        check_then_set: false,
    })
    .debug_states()
}

/// "Check, then set": not mutually exclusive.
#[cmc::model]
pub fn check_then_set() -> cmc::Model<Proc> {
    cmc::Model::new("check_then_set", 2, |_| Proc {
        pc: 0,
        check_then_set: true,
    })
    .debug_states()
}
// ANCHOR_END: models
