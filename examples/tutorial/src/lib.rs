//! The models of the cmc book. Each is included into a chapter through the
//! `ANCHOR` comments, and `tests/book.rs` pins what cmc finds in each.

pub mod first;
pub mod lossy;
pub mod properties;
pub mod roles;
