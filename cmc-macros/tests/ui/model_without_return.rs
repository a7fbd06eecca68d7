// A model function that returns nothing.
#[cmc::model]
fn counters() {}

fn main() {
    counters();
}
