//! End-to-end tests of cmc live in `tests/`; this library is empty.
