//! Row mapping: SQLite rows to the domain types.

use pad_core::lease::LeaseSlot;
use pad_core::{Item, Principal, Role, Timestamp, TokenInfo, User, Workspace, WorkspaceSettings};
use pad_store::rows::{self as shared_rows, ItemColumns, LastLeaseColumns, LeaseColumns, corrupt};
use pad_store::{StoreError, StoreResult};
use sqlx::Row;
use sqlx::sqlite::{SqliteConnection, SqliteRow};

use crate::db;

pub fn micros(t: Timestamp) -> i64 {
    t.timestamp_micros()
}

pub fn ts(m: i64) -> StoreResult<Timestamp> {
    Timestamp::from_timestamp_micros(m).ok_or_else(|| StoreError::Internal(format!("timestamp out of range: {m}")))
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

fn opt_ts(row: &SqliteRow, column: &str) -> StoreResult<Option<Timestamp>> {
    row.get::<Option<i64>, _>(column).map(ts).transpose()
}

fn json_list(row: &SqliteRow, column: &str) -> StoreResult<Vec<String>> {
    serde_json::from_str(row.get(column)).map_err(|e| corrupt(column, e))
}

/// The `lease_*` columns.
pub fn lease_columns(row: &SqliteRow) -> StoreResult<LeaseColumns> {
    Ok(LeaseColumns {
        holder: row.get("lease_holder"),
        lease_id: row.get("lease_id"),
        user_id: row.get("lease_user_id"),
        session_id: row.get("lease_session_id"),
        epoch: row.get("lease_epoch"),
        acquired_at: opt_ts(row, "lease_acquired_at")?,
        renewed_at: opt_ts(row, "lease_renewed_at")?,
        expires_at: opt_ts(row, "lease_expires_at")?,
        ttl_seconds: row.get("lease_ttl_seconds"),
    })
}

pub fn lease_slot(row: &SqliteRow) -> StoreResult<LeaseSlot> {
    lease_columns(row)?.slot()
}

/// A row of [`ITEM_SELECT`], read at `now`.
pub fn item_from_row(row: &SqliteRow, now: Timestamp) -> StoreResult<Item> {
    ItemColumns {
        prefix: row.get("prefix"),
        number: row.get("number"),
        kind: row.get("kind"),
        title: row.get("title"),
        body: row.get("body"),
        status: row.get("status"),
        priority: row.get("priority"),
        labels: json_list(row, "labels")?,
        parent_prefix: row.get("parent_prefix"),
        parent_number: row.get("parent_number"),
        blocked_by: json_list(row, "blocked_by")?,
        blocked_by_open: json_list(row, "blocked_by_open")?,
        assignee: row.get("assignee_email"),
        created_by: row.get("creator_email"),
        created_at: ts(row.get("created_at"))?,
        updated_at: ts(row.get("updated_at"))?,
        deleted_at: opt_ts(row, "deleted_at")?,
        comments_count: row.get("comments_count"),
        lease: lease_columns(row)?,
        lease_note: row.get("lease_note"),
        lease_note_lease_id: row.get("lease_note_lease_id"),
        not_before: opt_ts(row, "not_before")?,
        failures: row.get("failures"),
        retry_at: opt_ts(row, "retry_at")?,
        last_failure_note: row.get("last_failure_note"),
        last_lease: LastLeaseColumns {
            ended: row.get("last_lease_ended"),
            lease_id: row.get("last_lease_id"),
            epoch: row.get("last_lease_epoch"),
            holder: row.get("last_lease_holder"),
            session_id: row.get("last_lease_session_id"),
            acquired_at: opt_ts(row, "last_lease_acquired_at")?,
            ended_at: opt_ts(row, "last_lease_ended_at")?,
            note: row.get("last_lease_note"),
            broken_lease_id: row.get("broken_lease_id"),
            broken_reason: row.get("broken_reason"),
            broken_by: row.get("broken_by"),
        },
    }
    .into_item(now)
}

pub fn role(row: &SqliteRow) -> StoreResult<Role> {
    shared_rows::role(row.get("role"))
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
        role: shared_rows::scope_role(row.get("scope_role"))?,
        created_at: ts(row.get("created_at"))?,
        last_used_at: row.get::<Option<i64>, _>("last_used_at").map(ts).transpose()?,
    })
}

/// Columns `token_id`, `workspace_id`, `scope_role`, `user_id`, `email`.
pub fn principal_from_row(row: &SqliteRow) -> StoreResult<Principal> {
    let user = User { id: row.get("user_id"), email: row.get("email") };
    shared_rows::principal(row.get("token_id"), row.get("workspace_id"), row.get("scope_role"), user)
}

/// Emails are identities: compared and stored lower-case.
pub async fn ensure_user(conn: &mut SqliteConnection, email: &str, now: Timestamp) -> StoreResult<User> {
    let email = email.to_lowercase();
    sqlx::query("INSERT INTO users (email, created_at) VALUES (?, ?) ON CONFLICT (email) DO NOTHING")
        .bind(&email)
        .bind(micros(now))
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    let id: i64 = sqlx::query_scalar("SELECT id FROM users WHERE email = ?")
        .bind(&email)
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?;
    Ok(User { id, email })
}
