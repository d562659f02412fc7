use pad_core::lease::InvalidTtl;
use pad_core::{Lease, Timestamp, ValidationError};

pub type StoreResult<T> = Result<T, StoreError>;

/// Everything a store operation can refuse or fail with. Each variant maps to
/// one API error code at the server boundary.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Validation(#[from] ValidationError),
    #[error("{0}")]
    InvalidTtl(#[from] InvalidTtl),
    /// `what` names the missing thing: `item TASK-9`, `workspace acme`.
    #[error("{what} not found")]
    NotFound { what: String },
    /// L2/L7: another worker's live lease. `now` is the store's clock at the
    /// decision, so `expires_in_seconds` is computed on the same clock.
    #[error("{} holds the lease (epoch {}) until {}", lease.holder, lease.epoch, lease.expires_at.to_rfc3339())]
    LeaseHeld { lease: Box<Lease>, now: Timestamp },
    /// L4/L6/L10: the caller's lease is gone; `current` is the live one, if any.
    #[error("{}", lease_lost_message(current.as_deref()))]
    LeaseLost { current: Option<Box<Lease>>, now: Timestamp },
    #[error("the item changed since {} (now {})", expected.to_rfc3339(), actual.to_rfc3339())]
    UpdateConflict { expected: Timestamp, actual: Timestamp },
    /// The database cannot be reached or is overloaded; retrying may help.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    #[error("internal store error: {0}")]
    Internal(String),
}

fn lease_lost_message(current: Option<&Lease>) -> String {
    match current {
        Some(l) => format!("the lease was lost: {} now holds it (epoch {})", l.holder, l.epoch),
        None => "the lease was lost: it expired or was released".to_string(),
    }
}

impl StoreError {
    pub fn not_found(what: impl Into<String>) -> Self {
        StoreError::NotFound { what: what.into() }
    }
    pub fn held(lease: Lease, now: Timestamp) -> Self {
        StoreError::LeaseHeld { lease: Box::new(lease), now }
    }
    pub fn lost(current: Option<Lease>, now: Timestamp) -> Self {
        StoreError::LeaseLost { current: current.map(Box::new), now }
    }
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        StoreError::Validation(ValidationError::new(field, message))
    }
}
