// `#[cmc::process]` on a struct.
#[cmc::process]
struct Counter {
    value: u8,
}

fn main() {
    let _ = Counter { value: 0 }.value;
}
