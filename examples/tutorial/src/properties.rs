//! Properties: invariants over one process and over the whole system, and
//! what cmc checks without being asked.

use crate::lossy::Endpoint;

// ANCHOR: global
/// What the receiver logged is a prefix of what the sender sent: checked in
/// every state, over every process.
#[cmc::invariant]
fn delivered_in_order(world: &cmc::World<'_, Endpoint>) -> Result<(), String> {
    let receiver = world.process(1);
    if receiver.log_len() <= world.process(0).sent_len() {
        Ok(())
    } else {
        Err(format!("the receiver logged {} values", receiver.log_len()))
    }
}
// ANCHOR_END: global

// ANCHOR: leak
/// A process that forgets to free what it allocates.
#[derive(Debug, Default)]
pub struct Leaky {
    steps: u8,
}

#[cmc::process]
impl Leaky {
    #[handler(guard = Self::more)]
    fn step(&mut self) {
        self.steps += 1;
        // `black_box` keeps the compiler from removing the unused allocation.
        std::mem::forget(std::hint::black_box(Box::new([0u64; 4])));
    }

    fn more(&self) -> bool {
        self.steps < 2
    }
}

/// With `detect_leaks`, objects unreachable from a process's root are a
/// violation.
#[cmc::model]
pub fn leaky() -> cmc::Model<Leaky> {
    cmc::Model::new("leaky", 1, |_| Leaky::default())
        .detect_leaks(true)
        .quiescence_ok(true)
}
// ANCHOR_END: leak
