pub mod auto;
pub mod probe;
