// Invariants that return neither `bool` nor `Result<(), E: Display>`:
// reported at the return types.
struct Counter {
    value: u8,
}

struct NotDisplay;

#[cmc::process]
impl Counter {
    #[handler]
    fn inc(&mut self) {
        self.value = (self.value + 1) % 3;
    }

    #[invariant]
    fn a_number(&self) -> u8 {
        self.value
    }

    #[invariant]
    fn an_error_without_display(&self) -> Result<(), NotDisplay> {
        Ok(())
    }
}

fn main() {}
