// A global invariant that returns a number: reported at the return type.
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
fn total(world: &World<'_, Counter>) -> u8 {
    world.processes().map(|c| c.value).sum()
}

fn main() {}
