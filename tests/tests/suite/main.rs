//! The end-to-end tests, in one binary (a test binary each cost the build
//! a link with full debugging information). `roles.rs` stays a binary of
//! its own: the full suite runs it again with the tutorial's seeded bug.

#[global_allocator]
static ALLOC: cmc::Allocator = cmc::Allocator;

mod layers;
mod macros_models;
mod macros_registry;
mod mutex_pages;
mod shared_buffers;
mod start_handlers;
mod typed;
mod without_invariant;

/// The name the test harness gives the test at `path` (a `module_path!()`
/// and a function name): without the crate's name, as `--exact` wants it
/// when a test runs itself again in a child process.
pub fn exact(path: &str) -> &str {
    path.split_once("::").map_or(path, |(_, rest)| rest)
}
