// Only `#[cmc(skip)]` is known.
#[derive(cmc::StateHash)]
struct Node {
    #[cmc(ignore)]
    cache: Vec<u32>,
    #[cmc(skip, skip)]
    stats: u64,
}

fn main() {}
