//! The runtime's integration tests, in one binary: a test binary each cost
//! the build a link of the runtime with full debugging information and a
//! second instantiation of its generic code (about 12 s of CPU each, 25
//! of them). `no_allocator.rs` stays a binary of its own: it is the one
//! without cmc's allocator.

#[global_allocator]
static ALLOC: cmc::Allocator = cmc::Allocator;

mod common;

mod allocator;
mod canon;
mod clock;
mod depth_bound;
mod env_misfit;
mod first_engine;
mod globals;
mod hook_installers;
mod identity;
mod layout;
mod memory;
mod misbehaving;
mod models;
mod panic_hook;
mod parallel;
mod por;
mod properties;
mod random;
mod registry;
mod reproducible;
mod signals;
mod thread_start;
mod threads;
mod transition_cache;
mod violations;
