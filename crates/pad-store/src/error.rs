use pad_core::lease::{InvalidTtl, LastLease, LeaseEnd, LeaseHandle};
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
    /// L4/L6/L10: the caller's lease is gone; `current` is the live one, if
    /// any; `ended` is the caller's own lease as it ended, when the store
    /// still knows it (L7: a break's reason and breaker).
    #[error("{}", lease_lost_message(current.as_deref(), ended.as_deref()))]
    LeaseLost { current: Option<Box<Lease>>, now: Timestamp, ended: Option<Box<LastLease>> },
    #[error("the item changed since {} (now {})", expected.to_rfc3339(), actual.to_rfc3339())]
    UpdateConflict { expected: Timestamp, actual: Timestamp },
    /// The caller's role no longer allows this, checked again in the
    /// write's transaction: an owner demoted while minting a token for
    /// another member (docs/api.md, "Tokens").
    #[error("{0}")]
    Forbidden(String),
    /// The database cannot be reached or is overloaded; retrying may help.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    #[error("internal store error: {0}")]
    Internal(String),
}

fn lease_lost_message(current: Option<&Lease>, ended: Option<&LastLease>) -> String {
    let how = match ended {
        Some(e @ LastLease { ended: LeaseEnd::Broken, .. }) => format!(
            "the lease was broken by {}: {}",
            e.broken_by.as_deref().unwrap_or("an owner"),
            e.reason.as_deref().unwrap_or("no reason given")
        ),
        Some(e) if e.ended == LeaseEnd::Expired => {
            format!("the lease was lost: it expired at {}", e.ended_at.to_rfc3339())
        }
        Some(e) => format!("the lease was lost: it was {} at {}", e.ended, e.ended_at.to_rfc3339()),
        None if current.is_some() => "the lease was lost".to_string(),
        None => "the lease was lost: it expired or was released".to_string(),
    };
    match current {
        Some(l) => format!("{how}; {} now holds it (epoch {})", l.holder, l.epoch),
        None => how,
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
        StoreError::LeaseLost { current: current.map(Box::new), now, ended: None }
    }
    /// A `lease_lost` refusal told how the caller's lease ended, when
    /// `last` (the item's last lease) is the one `handle` named (L7, L18).
    pub fn with_ended(self, last: Option<LastLease>, handle: LeaseHandle) -> Self {
        match self {
            StoreError::LeaseLost { current, now, .. } => {
                StoreError::LeaseLost { current, now, ended: last.filter(|l| l.is_named_by(handle)).map(Box::new) }
            }
            other => other,
        }
    }
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        StoreError::Validation(ValidationError::new(field, message))
    }
}
