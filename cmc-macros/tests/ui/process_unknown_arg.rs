// A misspelt argument of #[cmc::process].
struct Counter {
    value: u8,
}

#[cmc::process(message = u8, shared = ())]
impl Counter {
    #[handler]
    fn inc(&mut self) {
        self.value = (self.value + 1) % 3;
    }
}

fn main() {}
