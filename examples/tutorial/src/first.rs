//! Getting started: the first model.

// ANCHOR: first
/// A counter that wraps at 3.
#[derive(Debug)]
pub struct Counter {
    value: u8,
}

#[cmc::process]
impl Counter {
    #[handler]
    fn inc(&mut self) {
        self.value = (self.value + 1) % 3;
    }
}

#[cmc::model]
pub fn two_counters() -> cmc::Model<Counter> {
    cmc::Model::new("two_counters", 2, |_| Counter { value: 0 })
}
// ANCHOR_END: first
