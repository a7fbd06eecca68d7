// A model function with arguments.
use cmc::Model;

struct Counter {
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
fn counters(count: usize) -> Model<Counter> {
    Model::new("counters", count, |_| Counter { value: 0 })
}

fn main() {
    let _ = counters(2);
}
