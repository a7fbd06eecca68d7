// An invariant that returns nothing and takes an argument.
struct Counter {
    value: u8,
}

#[cmc::process]
impl Counter {
    #[handler]
    fn inc(&mut self) {
        self.value = (self.value + 1) % 3;
    }

    #[invariant]
    fn check(&self, _limit: u8) {
        assert!(self.value < 3);
    }
}

fn main() {}
