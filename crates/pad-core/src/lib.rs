//! pad's domain: the types every other crate speaks, their validation, and the
//! lease rules of docs/leases.md as pure functions.
//!
//! This crate does no I/O and reads no clock: every rule takes `now` as an
//! argument, so the store decides what time it is and the rules stay testable.

pub mod api;
pub mod authz;
pub mod flag;
pub mod lease;
pub mod model;
pub mod settings;
pub mod stop;
pub mod validate;
pub mod webhook;

pub use authz::{Action, Principal, TokenScope, permits};
pub use lease::{ClaimDecision, Claimant, Lease, ReleaseDecision, RenewDecision, Ttl};
pub use model::*;
pub use validate::ValidationError;

/// Timestamps are UTC everywhere; the wire format is RFC 3339.
pub type Timestamp = chrono::DateTime<chrono::Utc>;
