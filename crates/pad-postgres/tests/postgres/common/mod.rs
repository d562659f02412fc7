//! Scratch databases for the PostgreSQL tests: pad-test-support's, the one
//! home of every crate's (`pad_test_support::pg`).

#![allow(unused_imports)]

pub use pad_test_support::pg::{ENV, ScratchDb};
