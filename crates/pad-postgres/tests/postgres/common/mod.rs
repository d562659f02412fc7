//! Scratch databases for the PostgreSQL tests: pad-test-support's, the one
//! home of every crate's (`pad_test_support::pg`); and the claim their
//! lease tests make.

#![allow(unused_imports)]

pub use pad_test_support::pg::{ENV, ScratchDb};

use pad_store::{Actor, ClaimRequest};

/// A claim by `holder` for five minutes, refreshing when `refresh`.
pub fn claim(actor: Actor, holder: &str, refresh: bool) -> ClaimRequest {
    ClaimRequest {
        actor,
        holder: holder.into(),
        session_id: None,
        ttl_seconds: Some(300),
        note: None,
        refresh,
        max_hold_seconds: None,
    }
}
