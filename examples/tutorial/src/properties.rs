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

// ANCHOR: sometimes
/// The receiver can log both values: a witness is reported, and a complete
/// search that never gets there fails.
#[cmc::sometimes]
fn both_values_logged(world: &cmc::World<'_, Endpoint>) -> bool {
    world.process(1).log_len() == 2
}
// ANCHOR_END: sometimes

// ANCHOR: eventually
/// Whatever happens, the receiver eventually logs both values?
fn all_delivered(world: &cmc::World<'_, Endpoint>) -> bool {
    world.process(1).log_len() == 2
}

/// Over a lossy link: no. The network may lose every retransmission, and
/// the check shows a lasso that does just that.
#[cmc::model]
pub fn lossy_link_delivers() -> cmc::Model<Endpoint> {
    crate::lossy::lossy_link().eventually("all_delivered", all_delivered)
}

/// Over a reliable link: yes, because `receive` is fair. (Without
/// `fair`, the sender could retransmit forever while the receiver never
/// reads its mail: a lasso too.)
#[cmc::model]
pub fn reliable_link_delivers() -> cmc::Model<Endpoint> {
    cmc::Model::new("reliable_link", 2, |_| Endpoint::default())
        .network(cmc::NetworkConfig::new().capacity(2))
        .quiescence_ok(true)
        .eventually("all_delivered", all_delivered)
}
// ANCHOR_END: eventually

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
