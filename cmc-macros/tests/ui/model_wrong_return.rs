// A model function that returns something other than a model.
#[cmc::model]
fn counters() -> u8 {
    2
}

fn main() {
    let _ = counters();
}
