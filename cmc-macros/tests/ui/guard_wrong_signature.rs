// A guard of the same impl block that takes `&mut self`: reported at the
// guard's signature.
struct Counter {
    value: u8,
}

#[cmc::process]
impl Counter {
    #[handler(guard = below_three)]
    fn inc(&mut self) {
        self.value += 1;
    }

    fn below_three(&mut self) -> bool {
        self.value < 3
    }
}

fn main() {}
