//! Row mapping: SQLite rows to the domain types.

use pad_core::lease::LeaseSlot;
use pad_core::{Item, Principal, Role, Timestamp, TokenInfo, User, Workspace, WorkspaceSettings};
use pad_store::StoreResult;
use pad_store::rows::{self as shared_rows, ItemColumns, LastLeaseColumns, LeaseColumns, corrupt};
use rusqlite::Row;

use crate::sql::{Col, Db, micros};

/// Every item read goes through this one SELECT, so get and list agree.
pub const ITEM_SELECT: &str =
    "SELECT i.id, i.prefix, i.number, i.kind, i.title, i.body, i.status, i.priority, i.labels,
        i.created_at, i.updated_at, i.deleted_at,
        i.lease_holder, i.lease_user_id, i.lease_session_id, i.lease_epoch, i.lease_acquired_at, i.lease_renewed_at,
        i.lease_expires_at, i.lease_ttl_seconds, i.lease_hold_until, i.lease_id, i.lease_note, i.lease_note_lease_id,
        i.not_before, i.failures, i.retry_at, i.last_failure_note, i.last_failure_at, i.last_success_at,
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

/// The `lease_*` columns.
pub fn lease_columns(row: &Row<'_>) -> StoreResult<LeaseColumns> {
    Ok(LeaseColumns {
        holder: row.col("lease_holder")?,
        lease_id: row.col("lease_id")?,
        user_id: row.col("lease_user_id")?,
        session_id: row.col("lease_session_id")?,
        epoch: row.col("lease_epoch")?,
        acquired_at: row.opt_ts("lease_acquired_at")?,
        renewed_at: row.opt_ts("lease_renewed_at")?,
        expires_at: row.opt_ts("lease_expires_at")?,
        ttl_seconds: row.col("lease_ttl_seconds")?,
        hold_until: row.opt_ts("lease_hold_until")?,
    })
}

pub fn lease_slot(row: &Row<'_>) -> StoreResult<LeaseSlot> {
    lease_columns(row)?.slot()
}

/// A row of [`ITEM_SELECT`], read at `now`.
pub fn item_from_row(row: &Row<'_>, now: Timestamp) -> StoreResult<Item> {
    ItemColumns {
        prefix: row.col("prefix")?,
        number: row.col("number")?,
        kind: row.col("kind")?,
        title: row.col("title")?,
        body: row.col("body")?,
        status: row.col("status")?,
        priority: row.col("priority")?,
        labels: row.json("labels")?,
        parent_prefix: row.col("parent_prefix")?,
        parent_number: row.col("parent_number")?,
        blocked_by: row.json("blocked_by")?,
        blocked_by_open: row.json("blocked_by_open")?,
        assignee: row.col("assignee_email")?,
        created_by: row.col("creator_email")?,
        created_at: row.ts("created_at")?,
        updated_at: row.ts("updated_at")?,
        deleted_at: row.opt_ts("deleted_at")?,
        comments_count: row.col("comments_count")?,
        lease: lease_columns(row)?,
        lease_note: row.col("lease_note")?,
        lease_note_lease_id: row.col("lease_note_lease_id")?,
        not_before: row.opt_ts("not_before")?,
        failures: row.col("failures")?,
        retry_at: row.opt_ts("retry_at")?,
        last_failure_note: row.col("last_failure_note")?,
        last_failure_at: row.opt_ts("last_failure_at")?,
        last_success_at: row.opt_ts("last_success_at")?,
        last_lease: LastLeaseColumns {
            ended: row.col("last_lease_ended")?,
            lease_id: row.col("last_lease_id")?,
            epoch: row.col("last_lease_epoch")?,
            holder: row.col("last_lease_holder")?,
            session_id: row.col("last_lease_session_id")?,
            acquired_at: row.opt_ts("last_lease_acquired_at")?,
            ended_at: row.opt_ts("last_lease_ended_at")?,
            note: row.col("last_lease_note")?,
            broken_lease_id: row.col("broken_lease_id")?,
            broken_reason: row.col("broken_reason")?,
            broken_by: row.col("broken_by")?,
        },
    }
    .into_item(now)
}

pub fn role(row: &Row<'_>) -> StoreResult<Role> {
    shared_rows::role(&row.col::<String>("role")?)
}

pub fn workspace_from_row(row: &Row<'_>) -> StoreResult<Workspace> {
    let n = |c: &str| u32::try_from(row.col::<i64>(c)?).map_err(|e| corrupt(c, e));
    Ok(Workspace {
        id: row.col("id")?,
        slug: row.col("slug")?,
        name: row.col("name")?,
        created_at: row.ts("created_at")?,
        settings: WorkspaceSettings {
            default_ttl_seconds: n("default_ttl_seconds")?,
            max_ttl_seconds: n("max_ttl_seconds")?,
            quarantine_after_expiries: n("quarantine_after_expiries")?,
            retry_backoff_base_seconds: n("retry_backoff_base_seconds")?,
            retry_backoff_max_seconds: n("retry_backoff_max_seconds")?,
            quarantine_after_failures: n("quarantine_after_failures")?,
            max_hold_seconds: row
                .col::<Option<i64>>("max_hold_seconds")?
                .map(|s| u32::try_from(s).map_err(|e| corrupt("max_hold_seconds", e)))
                .transpose()?,
        },
    })
}

/// A token as listed, with its scope's workspace slug (NULL when unscoped).
pub const TOKEN_SELECT: &str =
    "SELECT t.id, t.name, u.email, w.slug AS scope_slug, t.role AS scope_role, t.created_at, t.last_used_at,
        mb.email AS minted_by_email
     FROM tokens t JOIN users u ON u.id = t.user_id LEFT JOIN workspaces w ON w.id = t.workspace_id
     LEFT JOIN users mb ON mb.id = t.minted_by";

pub fn token_from_row(row: &Row<'_>) -> StoreResult<TokenInfo> {
    Ok(TokenInfo {
        id: row.col("id")?,
        name: row.col("name")?,
        email: row.col("email")?,
        workspace: row.col("scope_slug")?,
        role: shared_rows::scope_role(row.col("scope_role")?)?,
        created_at: row.ts("created_at")?,
        last_used_at: row.opt_ts("last_used_at")?,
        minted_by: row.col("minted_by_email")?,
    })
}

/// Columns `token_id`, `workspace_id`, `scope_role`, `user_id`, `email`.
pub fn principal_from_row(row: &Row<'_>) -> StoreResult<Principal> {
    let user = User { id: row.col("user_id")?, email: row.col("email")? };
    shared_rows::principal(
        row.col("token_id")?,
        row.col("workspace_id")?,
        row.col("scope_role")?,
        user,
        row.col("minted_by")?,
    )
}

/// Emails are identities: compared and stored lower-case.
pub fn ensure_user(conn: &rusqlite::Connection, email: &str, now: Timestamp) -> StoreResult<User> {
    let email = email.to_lowercase();
    conn.exec(
        "INSERT INTO users (email, created_at) VALUES (?, ?) ON CONFLICT (email) DO NOTHING",
        (&email, micros(now)),
    )?;
    let id = conn.scalar("SELECT id FROM users WHERE email = ?", [&email])?;
    Ok(User { id, email })
}
