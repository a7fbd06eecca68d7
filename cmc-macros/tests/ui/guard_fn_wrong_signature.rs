// Free-function guards of neither accepted form: reported at the guard
// paths by type checking.
struct Counter {
    value: u8,
}

#[cmc::process]
impl Counter {
    #[handler(guard = returns_a_number)]
    fn inc(&mut self) {
        self.value += 1;
    }

    #[handler(guard = takes_a_number)]
    fn dec(&mut self) {
        self.value -= 1;
    }
}

fn returns_a_number(counter: &Counter) -> u8 {
    counter.value
}

fn takes_a_number(value: u8) -> bool {
    value > 0
}

fn main() {}
