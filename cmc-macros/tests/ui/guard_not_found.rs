// A guard path that names nothing: the compiler's error is at the path.
struct Counter {
    value: u8,
}

#[cmc::process]
impl Counter {
    #[handler(guard = below_thre)]
    fn inc(&mut self) {
        self.value += 1;
    }

    fn below_three(&self) -> bool {
        self.value < 3
    }
}

fn main() {}
