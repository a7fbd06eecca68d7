// Global invariants that do not take `&World<P>`, and one that is a method.
use cmc::World;

struct Counter {
    value: u8,
}

#[cmc::process]
impl Counter {
    #[handler]
    fn inc(&mut self) {
        self.value = (self.value + 1) % 3;
    }
}

#[cmc::invariant]
fn takes_a_process(counter: &Counter) -> bool {
    counter.value < 3
}

#[cmc::invariant]
fn returns_nothing(_world: &World<'_, Counter>) {}

impl Counter {
    #[cmc::invariant]
    fn small(&self) -> bool {
        self.value < 3
    }
}

fn main() {}
