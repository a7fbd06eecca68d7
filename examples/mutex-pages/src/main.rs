//! Prints the state counts of both variants, from pages and from the
//! reference search.

use cmc::memory::MemoryConfig;
use cmc::ArenaConfig;
use mutex_pages::{page_search, reference_search, Variant};

#[global_allocator]
static ALLOC: cmc::Allocator = cmc::Allocator;

fn main() -> std::io::Result<()> {
    for variant in [Variant::Peterson, Variant::CheckThenSet] {
        let pages = page_search(variant, MemoryConfig::default(), ArenaConfig::default())?;
        let reference = reference_search(variant);
        println!(
            "{variant:?}: unique={} transitions={} (reference unique={} transitions={}) mutual exclusion: {}",
            pages.unique,
            pages.transitions,
            reference.unique,
            reference.transitions,
            match &pages.violation {
                None => "holds".to_string(),
                Some(path) => format!("violated after steps {path:?}"),
            }
        );
    }
    Ok(())
}
