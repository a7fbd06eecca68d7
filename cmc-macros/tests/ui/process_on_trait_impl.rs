// `#[cmc::process]` on a trait impl.
use cmc::{Handler, Process};

struct Counter;

#[cmc::process]
impl Process for Counter {
    type Msg = ();
    type Shared = ();
    fn handlers() -> Vec<Handler<Self>> {
        Vec::new()
    }
}

fn main() {}
