//! Determinism: what user code draws from the host (clocks, randomness,
//! the kernel's entropy, the process id) made a function of the state and the event, so
//! that the same state and handler always give the same successor.

pub mod clock;
pub mod entropy;
pub mod process_id;
pub mod random;
