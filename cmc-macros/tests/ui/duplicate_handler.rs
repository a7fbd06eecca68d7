// The same method marked #[handler] twice: its two entries would have the
// same name, so traces could not tell them apart.
struct Counter {
    value: u8,
}

#[cmc::process]
impl Counter {
    #[handler]
    #[handler(guard = below_three)]
    fn inc(&mut self) {
        self.value += 1;
    }

    fn below_three(&self) -> bool {
        self.value < 3
    }
}

fn main() {}
