//! Rows as plain columns, and their one reading into domain types. Each
//! backend's `rows.rs` only moves its driver's values into these structs
//! (SQLite's microseconds and JSON arrays, PostgreSQL's timestamps and
//! arrays); what the columns *mean* — which lease is live, whose note shows,
//! how a lease ended (docs/leases.md L5, L12, L18) — is decided here once.

use pad_core::lease::{self, LastLease, LeaseEnd, LeaseSlot};
use pad_core::{
    Item, ItemRef, Lease, Principal, Priority, Role, Status, Timestamp, TokenScope, User, WorkspaceSettings,
};

use crate::{StoreError, StoreResult};

/// A value the database holds that pad cannot read: a bug or a hand edit.
pub fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(format!("unreadable {what} in the database: {e}"))
}

/// The `lease_*` columns of an item (or a statement's `new_*` ones).
#[derive(Debug, Default)]
pub struct LeaseColumns {
    pub holder: Option<String>,
    pub lease_id: Option<i64>,
    pub user_id: Option<i64>,
    pub session_id: Option<String>,
    /// The epoch counter: the current lease's epoch, or the last one's.
    pub epoch: i64,
    pub acquired_at: Option<Timestamp>,
    pub renewed_at: Option<Timestamp>,
    pub expires_at: Option<Timestamp>,
    pub ttl_seconds: Option<i64>,
    /// L19: the lease's cap, if it has one.
    pub hold_until: Option<Timestamp>,
}

impl LeaseColumns {
    /// The recorded lease, live or not; `None` without a holder.
    pub fn lease(self) -> StoreResult<Option<Lease>> {
        let Some(holder) = self.holder else { return Ok(None) };
        let need = |what: &str| corrupt("lease", format!("a lease without {what}"));
        Ok(Some(Lease {
            // Leases granted before handles existed have none: 0 matches no request.
            lease_id: self.lease_id.unwrap_or(0),
            holder,
            session_id: self.session_id,
            epoch: self.epoch,
            acquired_at: self.acquired_at.ok_or_else(|| need("acquired_at"))?,
            renewed_at: self.renewed_at.ok_or_else(|| need("renewed_at"))?,
            expires_at: self.expires_at.ok_or_else(|| need("expires_at"))?,
            ttl_seconds: u32::try_from(self.ttl_seconds.ok_or_else(|| need("ttl"))?).map_err(|e| corrupt("ttl", e))?,
            hold_until: self.hold_until,
            user_id: self.user_id.ok_or_else(|| need("user"))?,
        }))
    }

    /// The lease slot as the rules in `pad_core::lease` want it.
    pub fn slot(self) -> StoreResult<LeaseSlot> {
        let last_epoch = self.epoch;
        Ok(LeaseSlot { current: self.lease()?, last_epoch })
    }
}

/// The `last_lease_*` columns (L18).
#[derive(Debug, Default)]
pub struct LastLeaseColumns {
    pub ended: Option<String>,
    pub lease_id: Option<i64>,
    pub epoch: Option<i64>,
    pub holder: Option<String>,
    pub session_id: Option<String>,
    pub acquired_at: Option<Timestamp>,
    pub ended_at: Option<Timestamp>,
    pub note: Option<String>,
    /// The `broken_*` columns: a break's reason and breaker, for the lease
    /// they name (L7).
    pub broken_lease_id: Option<i64>,
    pub broken_reason: Option<String>,
    pub broken_by: Option<String>,
}

impl LastLeaseColumns {
    fn recorded(self) -> StoreResult<Option<LastLease>> {
        let Some(ended) = self.ended else { return Ok(None) };
        let need = |what: &str| corrupt("last lease", format!("an ended lease without {what}"));
        let ended = ended.parse::<LeaseEnd>().map_err(|e| corrupt("last lease", e))?;
        let lease_id = self.lease_id.unwrap_or(0);
        // L7: the break's reason and breaker belong to the lease they name.
        let broken = ended == LeaseEnd::Broken && self.broken_lease_id == Some(lease_id);
        Ok(Some(LastLease {
            lease_id,
            epoch: self.epoch.ok_or_else(|| need("epoch"))?,
            holder: self.holder.ok_or_else(|| need("holder"))?,
            session_id: self.session_id,
            acquired_at: self.acquired_at.ok_or_else(|| need("acquired_at"))?,
            ended_at: self.ended_at.ok_or_else(|| need("ended_at"))?,
            ended,
            note: self.note,
            reason: if broken { self.broken_reason } else { None },
            broken_by: if broken { self.broken_by } else { None },
        }))
    }
}

/// One row of the backend's item SELECT.
#[derive(Debug)]
pub struct ItemColumns {
    pub prefix: String,
    pub number: i64,
    pub kind: String,
    pub title: String,
    pub body: String,
    pub status: String,
    pub priority: i64,
    pub labels: Vec<String>,
    pub parent_prefix: Option<String>,
    pub parent_number: Option<i64>,
    /// Blocker refs as `PREFIX-N` text, in any order.
    pub blocked_by: Vec<String>,
    pub blocked_by_open: Vec<String>,
    pub assignee: Option<String>,
    pub created_by: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub deleted_at: Option<Timestamp>,
    pub comments_count: i64,
    pub lease: LeaseColumns,
    pub lease_note: Option<String>,
    pub lease_note_lease_id: Option<i64>,
    pub not_before: Option<Timestamp>,
    pub failures: i64,
    pub retry_at: Option<Timestamp>,
    pub last_failure_note: Option<String>,
    pub last_failure_at: Option<Timestamp>,
    pub last_success_at: Option<Timestamp>,
    pub last_lease: LastLeaseColumns,
}

fn refs(refs: &[String]) -> StoreResult<Vec<ItemRef>> {
    let mut refs = refs
        .iter()
        .map(|b| b.parse::<ItemRef>().map_err(|e| corrupt("blocker ref", e)))
        .collect::<StoreResult<Vec<_>>>()?;
    refs.sort_by(|a, b| (&a.prefix, a.number).cmp(&(&b.prefix, b.number)));
    Ok(refs)
}

impl ItemColumns {
    /// The item as read at `now`, the store's clock.
    pub fn into_item(self, now: Timestamp) -> StoreResult<Item> {
        let slot = self.lease.slot()?;
        // L12: the note written under the lease now in the slot (live or not).
        let note = match (&slot.current, self.lease_note_lease_id) {
            (Some(l), Some(id)) if l.lease_id == id => self.lease_note,
            _ => None,
        };
        let parent = match (self.parent_prefix, self.parent_number) {
            (Some(prefix), Some(number)) => Some(ItemRef { prefix, number }),
            _ => None,
        };
        let live = slot.live(now).cloned();
        // L18: the recorded last lease, or the lease itself once it has expired.
        let last_lease = lease::last_lease(&slot, note.as_deref(), self.last_lease.recorded()?, now);
        Ok(Item {
            item_ref: ItemRef { prefix: self.prefix, number: self.number },
            kind: self.kind,
            title: self.title,
            body: self.body,
            status: self.status.parse::<Status>().map_err(|e| corrupt("status", e))?,
            priority: Priority::from_rank(self.priority).ok_or_else(|| corrupt("priority", "out of range"))?,
            labels: self.labels,
            parent,
            blocked_by: refs(&self.blocked_by)?,
            blocked_by_open: refs(&self.blocked_by_open)?,
            assignee: self.assignee,
            created_by: self.created_by,
            created_at: self.created_at,
            updated_at: self.updated_at,
            deleted_at: self.deleted_at,
            comments_count: self.comments_count,
            // L5: an expired lease reads as absent.
            lease_note: live.as_ref().and(note),
            lease: live,
            not_before: self.not_before,
            failures: self.failures,
            retry_at: self.retry_at,
            last_failure_note: self.last_failure_note,
            last_failure_at: self.last_failure_at,
            last_success_at: self.last_success_at,
            last_lease,
        })
    }
}

pub fn role(s: &str) -> StoreResult<Role> {
    s.parse().map_err(|e| corrupt("role", e))
}

/// A token's scope role column (NULL when unscoped).
pub fn scope_role(s: Option<String>) -> StoreResult<Option<Role>> {
    s.as_deref().map(role).transpose()
}

/// Columns `token_id`, `workspace_id`, `scope_role`, `user_id`, `email`,
/// `charged_to`.
pub fn principal(
    token_id: i64, workspace_id: Option<i64>, scope_role: Option<String>, user: User, charged_to: Option<i64>,
) -> StoreResult<Principal> {
    let scope = match (workspace_id, self::scope_role(scope_role)?) {
        (Some(workspace_id), Some(role)) => Some(TokenScope { workspace_id, role }),
        (None, None) => None,
        _ => return Err(corrupt("tokens.role", "a scope needs both a workspace and a role")),
    };
    // A chain that starts with one's own token charges no one else.
    let charged_to = charged_to.filter(|m| *m != user.id);
    Ok(Principal { user, token_id, scope, charged_to })
}

/// The item row's own columns, in every dialect's item SELECT (`i` is the
/// item); a macro so each dialect can `concat!` its joins and clock onto it.
#[macro_export]
macro_rules! item_own_columns {
    () => {
        "i.id, i.prefix, i.number, i.kind, i.title, i.body, i.status, i.priority, i.labels,
        i.created_at, i.updated_at, i.deleted_at,
        i.lease_holder, i.lease_user_id, i.lease_session_id, i.lease_epoch, i.lease_acquired_at, i.lease_renewed_at,
        i.lease_expires_at, i.lease_ttl_seconds, i.lease_hold_until, i.lease_id, i.lease_note, i.lease_note_lease_id,
        i.not_before, i.failures, i.retry_at, i.last_failure_note, i.last_failure_at, i.last_success_at,
        i.broken_lease_id, i.broken_reason, i.broken_by,
        i.last_lease_id, i.last_lease_epoch, i.last_lease_holder, i.last_lease_session_id, i.last_lease_acquired_at,
        i.last_lease_ended_at, i.last_lease_ended, i.last_lease_note"
    };
}

/// A token as listed, with its scope's workspace slug (NULL when unscoped):
/// the same SQL in every dialect.
pub const TOKEN_SELECT: &str =
    "SELECT t.id, t.name, u.email, w.slug AS scope_slug, t.role AS scope_role, t.created_at, t.last_used_at,
        mb.email AS minted_by_email
     FROM tokens t JOIN users u ON u.id = t.user_id LEFT JOIN workspaces w ON w.id = t.workspace_id
     LEFT JOIN users mb ON mb.id = t.minted_by";

/// A workspace's settings from its row: `n` reads a whole-number column,
/// `max_hold` is `max_hold_seconds` (NULL: no cap).
pub fn workspace_settings(
    n: impl Fn(&str) -> StoreResult<i64>, max_hold: Option<i64>,
) -> StoreResult<WorkspaceSettings> {
    let u = |c: &str| u32::try_from(n(c)?).map_err(|e| corrupt(c, e));
    Ok(WorkspaceSettings {
        default_ttl_seconds: u("default_ttl_seconds")?,
        max_ttl_seconds: u("max_ttl_seconds")?,
        quarantine_after_expiries: u("quarantine_after_expiries")?,
        retry_backoff_base_seconds: u("retry_backoff_base_seconds")?,
        retry_backoff_max_seconds: u("retry_backoff_max_seconds")?,
        quarantine_after_failures: u("quarantine_after_failures")?,
        max_hold_seconds: max_hold.map(|s| u32::try_from(s).map_err(|e| corrupt("max_hold_seconds", e))).transpose()?,
    })
}

/// An event row's `type`.
pub fn event_kind(s: &str) -> StoreResult<pad_core::EventKind> {
    s.parse().map_err(|e| corrupt("type", e))
}
