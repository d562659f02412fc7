//! Row mapping: PostgreSQL rows to the domain types.

use pad_core::lease::LeaseSlot;
use pad_core::{Item, ItemRef, Lease, Principal, Role, Timestamp, TokenInfo, User, Workspace};
use pad_store::rows::{self as shared_rows, ItemColumns, LastLeaseColumns, LeaseColumns};
use pad_store::steps::Locked;
use pad_store::{StoreError, StoreResult};
use sqlx::Row;
use sqlx::postgres::{PgConnection, PgRow};

use crate::db;

/// Every item read goes through this one SELECT, so get and list agree.
/// `db_now` is the statement's clock, which reads use to tell live leases
/// from expired ones (L5) on the same clock as their `leased` filter.
pub const ITEM_SELECT: &str = concat!(
    "SELECT ",
    pad_store::item_own_columns!(),
    ", ",
    item_joined_columns!("i"),
    ",
        now() AS db_now
    FROM items i"
);

/// A lease's columns: the stored `lease_*` ones (`p = "lease_"`, id in
/// `lease_id`), or what a lease statement wrote (`p = "new_"`, id in
/// `new_lease_id`).
fn lease_columns(row: &PgRow, p: &str, id: &str) -> LeaseColumns {
    let c = |name: &str| format!("{p}{name}");
    LeaseColumns {
        holder: row.get(c("holder").as_str()),
        lease_id: row.get(id),
        user_id: row.get(c("user_id").as_str()),
        session_id: row.get(c("session_id").as_str()),
        // NULL only in a statement's `new_*` when it wrote nothing.
        epoch: row.get::<Option<i64>, _>(c("epoch").as_str()).unwrap_or(0),
        acquired_at: row.get(c("acquired_at").as_str()),
        renewed_at: row.get(c("renewed_at").as_str()),
        expires_at: row.get(c("expires_at").as_str()),
        ttl_seconds: row.get::<Option<i32>, _>(c("ttl_seconds").as_str()).map(i64::from),
        hold_until: row.get(c("hold_until").as_str()),
    }
}

/// The lease slot as stored in the `lease_*` columns.
pub fn lease_slot(row: &PgRow) -> StoreResult<LeaseSlot> {
    lease_columns(row, "lease_", "lease_id").slot()
}

/// The lease a lease statement wrote, from its `new_*` columns; `None` when
/// its predicate let nothing through.
pub fn written_lease(row: &PgRow) -> StoreResult<Option<Lease>> {
    lease_columns(row, "new_", "new_lease_id").lease()
}

/// A row of [`LOCK_ITEM`](crate::items) or a lease statement: the item
/// under this transaction's lock, with `db_now` read after taking it.
pub fn locked(row: Option<&PgRow>, r: &ItemRef) -> StoreResult<Locked> {
    locked_as(row, r, "")
}

/// [`locked`] from columns named with the prefix `p` (`prev_id`,
/// `prev_lease_holder`, …), for statements that also return the row as
/// they left it under the plain names; `db_now` keeps its name.
pub fn locked_as(row: Option<&PgRow>, r: &ItemRef, p: &str) -> StoreResult<Locked> {
    let row = row.ok_or_else(|| StoreError::not_found(format!("item {r}")))?;
    let c = |name: &str| format!("{p}{name}");
    Ok(Locked {
        id: row.get(c("id").as_str()),
        deleted: row.get::<Option<Timestamp>, _>(c("deleted_at").as_str()).is_some(),
        slot: lease_columns(row, &c("lease_"), &c("lease_id")).slot()?,
        now: row.get("db_now"),
    })
}

/// A row of [`ITEM_SELECT`], read at `now`.
pub fn item_from_row(row: &PgRow, now: Timestamp) -> StoreResult<Item> {
    ItemColumns {
        prefix: row.get("prefix"),
        number: row.get("number"),
        kind: row.get("kind"),
        title: row.get("title"),
        body: row.get("body"),
        status: row.get("status"),
        priority: row.get("priority"),
        labels: row.get("labels"),
        parent_prefix: row.get("parent_prefix"),
        parent_number: row.get("parent_number"),
        blocked_by: row.get("blocked_by"),
        blocked_by_open: row.get("blocked_by_open"),
        assignee: row.get("assignee_email"),
        created_by: row.get("creator_email"),
        created_at: row.get("created_at"),
        updated_at: row.get("updated_at"),
        deleted_at: row.get("deleted_at"),
        comments_count: row.get("comments_count"),
        lease: lease_columns(row, "lease_", "lease_id"),
        lease_note: row.get("lease_note"),
        lease_note_lease_id: row.get("lease_note_lease_id"),
        not_before: row.get("not_before"),
        failures: row.get("failures"),
        retry_at: row.get("retry_at"),
        last_failure_note: row.get("last_failure_note"),
        last_failure_at: row.get("last_failure_at"),
        last_success_at: row.get("last_success_at"),
        last_lease: LastLeaseColumns {
            ended: row.get("last_lease_ended"),
            lease_id: row.get("last_lease_id"),
            epoch: row.get("last_lease_epoch"),
            holder: row.get("last_lease_holder"),
            session_id: row.get("last_lease_session_id"),
            acquired_at: row.get("last_lease_acquired_at"),
            ended_at: row.get("last_lease_ended_at"),
            note: row.get("last_lease_note"),
            broken_lease_id: row.get("broken_lease_id"),
            broken_reason: row.get("broken_reason"),
            broken_by: row.get("broken_by"),
        },
    }
    .into_item(now)
}

pub fn role(row: &PgRow) -> StoreResult<Role> {
    shared_rows::role(row.get("role"))
}

pub fn workspace_from_row(row: &PgRow) -> StoreResult<Workspace> {
    Ok(Workspace {
        id: row.get("id"),
        slug: row.get("slug"),
        name: row.get("name"),
        created_at: row.get("created_at"),
        settings: shared_rows::workspace_settings(
            |c| Ok(i64::from(row.get::<i32, _>(c))),
            row.get::<Option<i32>, _>("max_hold_seconds").map(i64::from),
        )?,
    })
}

pub use shared_rows::TOKEN_SELECT;

pub fn token_from_row(row: &PgRow) -> StoreResult<TokenInfo> {
    Ok(TokenInfo {
        id: row.get("id"),
        name: row.get("name"),
        email: row.get("email"),
        workspace: row.get("scope_slug"),
        role: shared_rows::scope_role(row.get("scope_role"))?,
        created_at: row.get("created_at"),
        last_used_at: row.get("last_used_at"),
        minted_by: row.get("minted_by_email"),
    })
}

/// Columns `token_id`, `workspace_id`, `scope_role`, `user_id`, `email`.
pub fn principal_from_row(row: &PgRow) -> StoreResult<Principal> {
    let user = User { id: row.get("user_id"), email: row.get("email") };
    shared_rows::principal(
        row.get("token_id"),
        row.get("workspace_id"),
        row.get("scope_role"),
        user,
        row.get("charged_to"),
    )
}

/// Emails are identities: compared and stored lower-case. Safe against a
/// concurrent insert of the same email: `DO NOTHING` waits for it, and the
/// SELECT, a new statement under READ COMMITTED, then sees it.
pub async fn ensure_user(conn: &mut PgConnection, email: &str) -> StoreResult<User> {
    let email = email.to_lowercase();
    sqlx::query("INSERT INTO users (email, created_at) VALUES ($1, now()) ON CONFLICT (email) DO NOTHING")
        .bind(&email)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    let id: i64 = sqlx::query_scalar("SELECT id FROM users WHERE email = $1")
        .bind(&email)
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?;
    Ok(User { id, email })
}

#[cfg(test)]
mod tests {
    use pad_test_support::pg::{ENV, ScratchDb};
    use sqlx::{Connection, Row};

    /// docs/operations.md, "Plans on a new database": an item read, planned
    /// as a connection caches it (a generic plan) on a database whose tables
    /// were never analyzed, finds every row by a key: no step reads all of
    /// `items`, so the read costs the same at the 10th item and the
    /// 100 000th, before autovacuum's first analyze as after.
    #[tokio::test]
    async fn an_item_read_never_scans_the_items_on_a_new_database() {
        let Some(db) = ScratchDb::create().await else {
            return eprintln!("SKIPPED an_item_read_never_scans_the_items_on_a_new_database: {ENV} is not set");
        };
        // Opening the store migrates the scratch database.
        drop(crate::PgStore::open_with(&db.url, 2).await.unwrap());
        let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
        sqlx::raw_sql("SET plan_cache_mode = force_generic_plan").execute(&mut conn).await.unwrap();
        let prepare = format!("PREPARE item_read(bigint) AS {} WHERE i.id = $1", super::ITEM_SELECT);
        sqlx::raw_sql(sqlx::AssertSqlSafe(prepare)).execute(&mut conn).await.unwrap();
        let plan: Vec<String> = sqlx::query("EXPLAIN EXECUTE item_read(1)")
            .fetch_all(&mut conn)
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<String, _>(0))
            .collect();
        let text = plan.join("\n");
        assert!(!text.contains("Seq Scan on items"), "{text}");
        assert!(text.contains("Index Scan using items_pkey on items b"), "blockers looked up by key:\n{text}");
    }
}
