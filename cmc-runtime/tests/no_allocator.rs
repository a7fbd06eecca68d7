//! A program that checks a model without installing `cmc::Allocator` as
//! its global allocator gets an error that says so, not a search over
//! memory cmc cannot see (which found one state where there are many).

use cmc::{CheckError, Model};

#[derive(Debug, Hash)]
pub struct Tally {
    n: u8,
}

#[cmc::process]
impl Tally {
    #[handler(guard = below_three)]
    fn bump(&mut self) {
        self.n += 1;
    }

    fn below_three(&self) -> bool {
        self.n < 3
    }
}

#[test]
fn checking_without_cmcs_allocator_is_an_error() {
    let result = Model::new("tallies", 2, |_| Tally { n: 0 })
        .quiescence_ok(true)
        .check();
    match result {
        Err(CheckError::Model(m)) => assert!(m.contains("#[global_allocator]"), "{m}"),
        other => panic!("expected an error about the allocator, got {other:?}"),
    }
}
