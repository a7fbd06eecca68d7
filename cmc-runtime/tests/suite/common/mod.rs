pub mod auto;
pub mod librarian;
pub mod probe;
