//! The model layer: what the user writes against — processes, handlers,
//! guards and properties ([`spec`]), the handler's context ([`ctx`]: sends,
//! receives, timers, `choose`), the environment (network and timers), the
//! world that global properties see, several roles in one model, and the
//! footprints partial-order reduction reads.
//!
//! This file only declares the layer's modules and re-exports its API.

pub(crate) mod ctx;
pub(crate) mod env;
pub(crate) mod por;
mod process;
pub(crate) mod registered;
pub(crate) mod roles;
mod spec;
pub(crate) mod world;

pub use self::env::{Message, NetworkConfig, OnFull};
pub use self::process::*;
pub use self::spec::*;
