// One method marked both #[handler] and #[invariant].
struct Counter {
    value: u8,
}

#[cmc::process]
impl Counter {
    #[handler]
    #[invariant]
    fn inc(&mut self) {
        self.value = (self.value + 1) % 3;
    }
}

fn main() {}
