//! Row mapping: SQLite rows to the domain types.

use pad_core::lease::{self, LastLease, LeaseEnd, LeaseSlot};
use pad_core::{
    Item, ItemRef, Lease, Principal, Priority, Role, Status, Timestamp, TokenInfo, TokenScope, User, Workspace,
    WorkspaceSettings,
};
use pad_store::{StoreError, StoreResult};
use sqlx::Row;
use sqlx::sqlite::{SqliteConnection, SqliteRow};

pub fn micros(t: Timestamp) -> i64 {
    t.timestamp_micros()
}

pub fn ts(m: i64) -> StoreResult<Timestamp> {
    Timestamp::from_timestamp_micros(m).ok_or_else(|| StoreError::Internal(format!("timestamp out of range: {m}")))
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(format!("unreadable {what} in the database: {e}"))
}

/// Every item read goes through this one SELECT, so get and list agree.
pub const ITEM_SELECT: &str =
    "SELECT i.id, i.prefix, i.number, i.kind, i.title, i.body, i.status, i.priority, i.labels,
        i.created_at, i.updated_at, i.deleted_at,
        i.lease_holder, i.lease_user_id, i.lease_session_id, i.lease_epoch, i.lease_acquired_at, i.lease_renewed_at,
        i.lease_expires_at, i.lease_ttl_seconds, i.lease_id, i.lease_note, i.lease_note_lease_id,
        i.not_before, i.failures, i.retry_at, i.last_failure_note,
        i.broken_lease_id, i.broken_reason, i.broken_by,
        i.last_lease_id, i.last_lease_epoch, i.last_lease_holder, i.last_lease_session_id, i.last_lease_acquired_at,
        i.last_lease_ended_at, i.last_lease_ended, i.last_lease_note,
        p.prefix AS parent_prefix, p.number AS parent_number, a.email AS assignee_email, c.email AS creator_email,
        (SELECT COUNT(*) FROM comments cm WHERE cm.item_id = i.id) AS comments_count,
        (SELECT json_group_array(b.prefix || '-' || b.number) FROM item_blockers ib JOIN items b ON b.id = ib.blocker_id
          WHERE ib.item_id = i.id) AS blocked_by,
        (SELECT json_group_array(b.prefix || '-' || b.number) FROM item_blockers ib JOIN items b ON b.id = ib.blocker_id
          WHERE ib.item_id = i.id AND b.deleted_at IS NULL AND b.status NOT IN ('done', 'cancelled')) AS blocked_by_open
    FROM items i
    LEFT JOIN items p ON p.id = i.parent_id
    LEFT JOIN users a ON a.id = i.assignee_id
    JOIN users c ON c.id = i.created_by";

pub fn lease_slot(row: &SqliteRow) -> StoreResult<LeaseSlot> {
    let last_epoch: i64 = row.get("lease_epoch");
    let holder: Option<String> = row.get("lease_holder");
    let current = match holder {
        None => None,
        Some(holder) => Some(Lease {
            // Leases granted before handles existed have none: 0 matches no request.
            lease_id: row.get::<Option<i64>, _>("lease_id").unwrap_or(0),
            holder,
            session_id: row.get("lease_session_id"),
            epoch: last_epoch,
            acquired_at: ts(row.get("lease_acquired_at"))?,
            renewed_at: ts(row.get("lease_renewed_at"))?,
            expires_at: ts(row.get("lease_expires_at"))?,
            ttl_seconds: u32::try_from(row.get::<i64, _>("lease_ttl_seconds")).map_err(|e| corrupt("ttl", e))?,
            user_id: row.get("lease_user_id"),
        }),
    };
    Ok(LeaseSlot { current, last_epoch })
}

fn refs(row: &SqliteRow, column: &str) -> StoreResult<Vec<ItemRef>> {
    let refs: Vec<String> = serde_json::from_str(row.get(column)).map_err(|e| corrupt("blockers", e))?;
    let mut refs = refs
        .iter()
        .map(|b| b.parse::<ItemRef>().map_err(|e| corrupt("blocker ref", e)))
        .collect::<StoreResult<Vec<_>>>()?;
    refs.sort_by(|a, b| (&a.prefix, a.number).cmp(&(&b.prefix, b.number)));
    Ok(refs)
}

fn opt_ts(row: &SqliteRow, column: &str) -> StoreResult<Option<Timestamp>> {
    row.get::<Option<i64>, _>(column).map(ts).transpose()
}

/// L12: the note written under the lease now in the slot (live or not).
fn current_note(row: &SqliteRow, slot: &LeaseSlot) -> Option<String> {
    let note_lease: Option<i64> = row.get("lease_note_lease_id");
    match (&slot.current, note_lease) {
        (Some(l), Some(id)) if l.lease_id == id => row.get::<Option<String>, _>("lease_note"),
        _ => None,
    }
}

/// L18: the recorded last lease, or the lease itself once it has expired.
fn last_lease(
    row: &SqliteRow,
    slot: &LeaseSlot,
    current_note: Option<&str>,
    now: Timestamp,
) -> StoreResult<Option<LastLease>> {
    let recorded = match row.get::<Option<String>, _>("last_lease_ended") {
        None => None,
        Some(ended) => Some(LastLease {
            lease_id: row.get::<Option<i64>, _>("last_lease_id").unwrap_or(0),
            epoch: row.get("last_lease_epoch"),
            holder: row.get("last_lease_holder"),
            session_id: row.get("last_lease_session_id"),
            acquired_at: ts(row.get("last_lease_acquired_at"))?,
            ended_at: ts(row.get("last_lease_ended_at"))?,
            ended: ended.parse::<LeaseEnd>().map_err(|e| corrupt("last lease", e))?,
            note: row.get("last_lease_note"),
            reason: None,
            broken_by: None,
        }),
    };
    // L7: the break's reason and breaker belong to the lease they name.
    let recorded = recorded.map(|mut l| {
        if l.ended == LeaseEnd::Broken && row.get::<Option<i64>, _>("broken_lease_id") == Some(l.lease_id) {
            l.reason = row.get("broken_reason");
            l.broken_by = row.get("broken_by");
        }
        l
    });
    Ok(lease::last_lease(slot, current_note, recorded, now))
}

pub fn item_from_row(row: &SqliteRow, now: Timestamp) -> StoreResult<Item> {
    let parent = row
        .get::<Option<String>, _>("parent_prefix")
        .map(|prefix| ItemRef { prefix, number: row.get("parent_number") });
    let slot = lease_slot(row)?;
    let note = current_note(row, &slot);
    Ok(Item {
        item_ref: ItemRef { prefix: row.get("prefix"), number: row.get("number") },
        kind: row.get("kind"),
        title: row.get("title"),
        body: row.get("body"),
        status: row.get::<String, _>("status").parse::<Status>().map_err(|e| corrupt("status", e))?,
        priority: Priority::from_rank(row.get("priority")).ok_or_else(|| corrupt("priority", "out of range"))?,
        labels: serde_json::from_str(row.get("labels")).map_err(|e| corrupt("labels", e))?,
        parent,
        blocked_by: refs(row, "blocked_by")?,
        blocked_by_open: refs(row, "blocked_by_open")?,
        assignee: row.get("assignee_email"),
        created_by: row.get("creator_email"),
        created_at: ts(row.get("created_at"))?,
        updated_at: ts(row.get("updated_at"))?,
        deleted_at: row.get::<Option<i64>, _>("deleted_at").map(ts).transpose()?,
        comments_count: row.get("comments_count"),
        // L5: an expired lease reads as absent.
        lease: slot.live(now).cloned(),
        lease_note: slot.live(now).and(note.clone()),
        not_before: opt_ts(row, "not_before")?,
        failures: row.get("failures"),
        retry_at: opt_ts(row, "retry_at")?,
        last_failure_note: row.get("last_failure_note"),
        last_lease: last_lease(row, &slot, note.as_deref(), now)?,
    })
}

pub fn role(row: &SqliteRow) -> StoreResult<Role> {
    row.get::<String, _>("role").parse().map_err(|e| corrupt("role", e))
}

pub fn workspace_from_row(row: &SqliteRow) -> StoreResult<Workspace> {
    let n = |c: &str| u32::try_from(row.get::<i64, _>(c)).map_err(|e| corrupt(c, e));
    Ok(Workspace {
        id: row.get("id"),
        slug: row.get("slug"),
        name: row.get("name"),
        created_at: ts(row.get("created_at"))?,
        settings: WorkspaceSettings {
            default_ttl_seconds: n("default_ttl_seconds")?,
            max_ttl_seconds: n("max_ttl_seconds")?,
            quarantine_after_expiries: n("quarantine_after_expiries")?,
            retry_backoff_base_seconds: n("retry_backoff_base_seconds")?,
            retry_backoff_max_seconds: n("retry_backoff_max_seconds")?,
            quarantine_after_failures: n("quarantine_after_failures")?,
        },
    })
}

/// A token as listed, with its scope's workspace slug (NULL when unscoped).
pub const TOKEN_SELECT: &str =
    "SELECT t.id, t.name, u.email, w.slug AS scope_slug, t.role AS scope_role, t.created_at, t.last_used_at
     FROM tokens t JOIN users u ON u.id = t.user_id LEFT JOIN workspaces w ON w.id = t.workspace_id";

pub fn token_from_row(row: &SqliteRow) -> StoreResult<TokenInfo> {
    Ok(TokenInfo {
        id: row.get("id"),
        name: row.get("name"),
        email: row.get("email"),
        workspace: row.get("scope_slug"),
        role: scope_role(row)?,
        created_at: ts(row.get("created_at"))?,
        last_used_at: row.get::<Option<i64>, _>("last_used_at").map(ts).transpose()?,
    })
}

fn scope_role(row: &SqliteRow) -> StoreResult<Option<Role>> {
    row.get::<Option<String>, _>("scope_role").map(|r| r.parse().map_err(|e| corrupt("role", e))).transpose()
}

/// Columns `token_id`, `workspace_id`, `scope_role`, `user_id`, `email`.
pub fn principal_from_row(row: &SqliteRow) -> StoreResult<Principal> {
    let scope = match (row.get::<Option<i64>, _>("workspace_id"), scope_role(row)?) {
        (Some(workspace_id), Some(role)) => Some(TokenScope { workspace_id, role }),
        (None, None) => None,
        _ => return Err(corrupt("tokens.role", "a scope needs both a workspace and a role")),
    };
    Ok(Principal {
        user: User { id: row.get("user_id"), email: row.get("email") },
        token_id: row.get("token_id"),
        scope,
    })
}

/// Emails are identities: compared and stored lower-case.
pub async fn ensure_user(conn: &mut SqliteConnection, email: &str, now: Timestamp) -> StoreResult<User> {
    let email = email.to_lowercase();
    sqlx::query("INSERT INTO users (email, created_at) VALUES (?, ?) ON CONFLICT (email) DO NOTHING")
        .bind(&email)
        .bind(micros(now))
        .execute(&mut *conn)
        .await
        .map_err(super::db)?;
    let id: i64 = sqlx::query_scalar("SELECT id FROM users WHERE email = ?")
        .bind(&email)
        .fetch_one(&mut *conn)
        .await
        .map_err(super::db)?;
    Ok(User { id, email })
}
