// A misspelt key inside #[handler(..)], and a guard and a timer on one
// handler.
struct Counter {
    value: u8,
}

#[cmc::process]
impl Counter {
    #[handler(gaurd = below_three)]
    fn inc(&mut self) {
        self.value += 1;
    }

    #[handler(guard = below_three, timer = "tick")]
    fn tick(&mut self) {
        self.value += 1;
    }

    fn below_three(&self) -> bool {
        self.value < 3
    }
}

fn main() {}
