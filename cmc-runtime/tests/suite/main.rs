//! The runtime's integration tests, in one binary: a test binary each cost
//! the build a link of the runtime with full debugging information and a
//! second instantiation of its generic code (about 12 s of CPU each). Three
//! stay binaries of their own: `no_allocator.rs`, the one without cmc's
//! allocator, and `hook_installers.rs` and `panic_hook.rs`, which install
//! process-wide panic hooks that would see the other tests' panics.

#[global_allocator]
static ALLOC: cmc::Allocator = cmc::Allocator;

mod common;

mod allocator;
mod canon;
mod checker_failures;
mod clock;
mod depth_bound;
mod env_misfit;
mod first_engine;
mod globals;
mod guided_walks;
mod identity;
mod layout;
mod long_traces;
mod memory;
mod memory_budget;
mod misbehaving;
mod models;
mod parallel;
mod por;
mod properties;
mod random;
mod registry;
mod reproducible;
mod signals;
mod spill;
mod symmetry;
mod thread_start;
mod threads;
mod violations;
mod walk_shortening;

/// The name the test harness gives the test at `path` (a `module_path!()`
/// and a function name): without the crate's name, as `--exact` wants it
/// when a test runs itself again in a child process.
pub fn exact(path: &str) -> &str {
    path.split_once("::").map_or(path, |(_, rest)| rest)
}
