//! The end-to-end tests, in one binary (a test binary each cost the build
//! a link with full debugging information), and the tests of the typed
//! walk and of what rests on it (the transition cache): they read the type
//! descriptions of the crate that defines a type, and this package is the
//! one built with full debugging information. `roles.rs` stays a binary of
//! its own: the full suite runs it again with the tutorial's seeded bug.

#[global_allocator]
static ALLOC: cmc::Allocator = cmc::Allocator;

// The runtime's test models (generated models, probes, the librarian),
// shared by path: the tests here that use them need the full debugging
// information this package is built with.
#[path = "../../../cmc-runtime/tests/suite/common/mod.rs"]
mod common;

mod layers;
mod macros_models;
mod macros_registry;
mod mutex_pages;
mod shared_buffers;
mod start_handlers;
mod transition_cache;
mod typed;
mod typed_symmetry;
mod typed_values;
mod without_invariant;

/// The name the test harness gives the test at `path` (a `module_path!()`
/// and a function name): without the crate's name, as `--exact` wants it
/// when a test runs itself again in a child process.
pub fn exact(path: &str) -> &str {
    path.split_once("::").map_or(path, |(_, rest)| rest)
}
