//! Row mapping: SQLite rows to the domain types.

use pad_core::lease::LeaseSlot;
use pad_core::{Item, Principal, Role, Timestamp, TokenInfo, User, Workspace};
use pad_store::StoreResult;
use pad_store::rows::{self as shared_rows, ItemColumns, LastLeaseColumns, LeaseColumns};
use pad_store::steps::Locked;
use rusqlite::Row;

use crate::sql::{Col, Db, micros};

/// Every item read goes through this one SELECT, so get and list agree.
pub const ITEM_SELECT: &str = concat!(
    "SELECT ",
    pad_store::item_own_columns!(),
    ",
        p.prefix AS parent_prefix, p.number AS parent_number, a.email AS assignee_email, c.email AS creator_email,
        (SELECT COUNT(*) FROM comments cm WHERE cm.item_id = i.id) AS comments_count,
        (SELECT json_group_array(b.prefix || '-' || b.number) FROM item_blockers ib JOIN items b ON b.id = ib.blocker_id
          WHERE ib.item_id = i.id) AS blocked_by,
        (SELECT json_group_array(b.prefix || '-' || b.number) FROM item_blockers ib JOIN items b ON b.id = ib.blocker_id
          WHERE ib.item_id = i.id AND b.deleted_at IS NULL AND b.status NOT IN ('done', 'cancelled')) AS blocked_by_open
    FROM items i
    LEFT JOIN items p ON p.id = i.parent_id
    LEFT JOIN users a ON a.id = i.assignee_id
    JOIN users c ON c.id = i.created_by"
);

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

/// An item's row under the write flow's lock: its id, whether it is
/// deleted, and its lease (the columns of `i.id, i.deleted_at` and the
/// `lease_*` ones, [`lease_slot`]'s).
pub fn locked_from_row(row: &Row<'_>, now: Timestamp) -> StoreResult<Locked> {
    Ok(Locked {
        id: row.col("id")?,
        deleted: row.col::<Option<i64>>("deleted_at")?.is_some(),
        slot: lease_slot(row)?,
        now,
    })
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
    Ok(Workspace {
        id: row.col("id")?,
        slug: row.col("slug")?,
        name: row.col("name")?,
        created_at: row.ts("created_at")?,
        settings: shared_rows::workspace_settings(|c| row.col(c), row.col("max_hold_seconds")?)?,
    })
}

pub use shared_rows::TOKEN_SELECT;

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
        row.col("charged_to")?,
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
