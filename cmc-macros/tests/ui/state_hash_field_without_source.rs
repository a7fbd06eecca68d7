// A field whose type has no StateHash, Hash or Debug.
struct Opaque;

#[derive(cmc::StateHash)]
struct Node {
    routes: Vec<u32>,
    handle: Opaque,
}

fn main() {}
