// Which field of a union is live is not known.
#[derive(cmc::StateHash)]
union Word {
    int: u64,
    float: f64,
}

fn main() {}
