//! The closed vocabularies of the wire, each written as its text (`in-progress`,
//! `item.created`) and checked by serde.

use super::*;

string_enum!(
    /// A member's role in a workspace.
    Role { Owner = "owner", Editor = "editor", Viewer = "viewer" }
);
string_enum!(
    /// `done` and `cancelled` are terminal.
    Status { Open = "open", InProgress = "in-progress", Done = "done", Cancelled = "cancelled" }
);
string_enum!(
    /// Ordered: `Low < Medium < High < Critical`.
    Priority { Low = "low", Medium = "medium", High = "high", Critical = "critical" }
);

string_enum!(
    /// L18: how a lease ended (docs/leases.md L18).
    LeaseEnd {
        Expired = "expired",
        Released = "released",
        Broken = "broken",
        Failed = "failed",
        Completed = "completed",
    }
);
string_enum!(
    /// The kinds of event the log records (docs/api.md, events).
    EventKind {
        ItemCreated = "item.created",
        ItemUpdated = "item.updated",
        ItemDeleted = "item.deleted",
        ItemRestored = "item.restored",
        CommentCreated = "comment.created",
        LeaseClaimed = "lease.claimed",
        LeaseReleased = "lease.released",
        LeaseBroken = "lease.broken",
        LeaseExpired = "lease.expired",
        LeaseFailed = "lease.failed",
        ItemQuarantined = "item.quarantined",
    }
);

#[allow(clippy::derivable_impls)] // the macro-made enum cannot take `#[default]`
impl Default for Priority {
    fn default() -> Self {
        Priority::Medium
    }
}

impl Status {
    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Done | Status::Cancelled)
    }
}

impl Priority {
    /// A rank for ordering in SQL: higher is more urgent.
    pub fn rank(self) -> i64 {
        self as i64
    }
    pub fn from_rank(rank: i64) -> Option<Self> {
        Self::ALL.get(usize::try_from(rank).ok()?).copied()
    }
}
