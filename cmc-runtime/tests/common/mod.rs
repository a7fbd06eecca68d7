pub mod auto;
