// A handler that takes `&self` and returns a value: both mistakes are
// reported at once, and the rest of the impl still compiles.
use cmc::Ctx;

struct Counter {
    value: u8,
}

#[cmc::process]
impl Counter {
    #[handler]
    fn inc(&self, _ctx: &mut Ctx<'_, Self>) -> u8 {
        self.value + 1
    }

    #[handler]
    fn reset(&mut self, _ctx: &Ctx<'_, Self>, _extra: u8) {
        self.value = 0;
    }
}

fn main() {}
