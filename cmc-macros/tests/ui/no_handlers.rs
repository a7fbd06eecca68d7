// A process without handlers (the attributes were forgotten).
struct Counter {
    value: u8,
}

#[cmc::process]
impl Counter {
    fn inc(&mut self) {
        self.value = (self.value + 1) % 3;
    }
}

fn main() {}
