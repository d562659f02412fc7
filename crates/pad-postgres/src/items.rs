//! Items: their reads, and the item steps of the shared write flows
//! (`pad_store::steps`), with their comments and history.

use async_trait::async_trait;
use pad_core::{Comment, Item, ItemFilter, ItemRef, Page, Status, Timestamp, Version, Workspace};
use pad_store::steps::{ItemSteps, Locked, NewRow};
use pad_store::{Actor, ItemOps, StoreError, StoreResult, shared};
use serde_json::{Map, Value};
use sqlx::{Postgres, QueryBuilder, Row};

use crate::rows::{self, ITEM_SELECT, item_from_row};
use crate::{PgStore, Tx, db};

/// Locks an item for a write (and its L10 fence check).
const LOCK_ITEM: &str = concat!(locked_item!(), " SELECT * FROM cur");

/// The class of the per-workspace advisory lock that blocker changes take
/// (two-key form, which does not overlap the one-key space).
const BLOCKERS_LOCK_CLASS: i32 = 0x7061_6462; // "padb"

#[async_trait]
impl ItemOps for PgStore {
    async fn get_item(&self, ws: &Workspace, r: &ItemRef) -> StoreResult<Item> {
        let sql = format!("{ITEM_SELECT} WHERE i.workspace_id = $1 AND i.prefix = $2 AND i.number = $3");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(ws.id)
            .bind(&r.prefix)
            .bind(r.number)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?
            .ok_or_else(|| StoreError::not_found(format!("item {r}")))?;
        item_from_row(&row, row.get("db_now"))
    }

    async fn list_items(
        &self, ws: &Workspace, filter: &ItemFilter, limit: u32, cursor: Option<&str>,
    ) -> StoreResult<Page<Item>> {
        let (after, limit) = shared::list_window(filter, limit, cursor)?;
        let mut qb: QueryBuilder<Postgres> = QueryBuilder::new(ITEM_SELECT);
        qb.push(" WHERE i.workspace_id = ").push_bind(ws.id).push(" AND i.id > ").push_bind(after);
        if !filter.include_deleted {
            qb.push(" AND i.deleted_at IS NULL");
        }
        if !filter.status.is_empty() {
            let status: Vec<&str> = filter.status.iter().map(|s| s.as_str()).collect();
            qb.push(" AND i.status = ANY(").push_bind(status).push(")");
        }
        if !filter.kind.is_empty() {
            let kinds: Vec<String> = filter.kind.iter().map(|k| k.to_ascii_lowercase()).collect();
            qb.push(" AND i.kind = ANY(").push_bind(kinds).push(")");
        }
        if !filter.priority.is_empty() {
            let ranks: Vec<i64> = filter.priority.iter().map(|p| p.rank()).collect();
            qb.push(" AND i.priority = ANY(").push_bind(ranks).push(")");
        }
        if !filter.labels.is_empty() {
            qb.push(" AND i.labels @> ").push_bind(filter.labels.clone());
        }
        if let Some(a) = &filter.assignee {
            qb.push(" AND i.assignee_id = (SELECT u.id FROM users u WHERE u.email = ")
                .push_bind(a.to_lowercase())
                .push(")");
        }
        if let Some(p) = &filter.parent {
            push_parent(&mut qb, ws, p);
        }
        // The same statement's now() as `db_now`, so the filter and each
        // item's `lease` agree (L5).
        match filter.leased {
            Some(true) => {
                qb.push(" AND i.lease_holder IS NOT NULL AND i.lease_expires_at > now()");
            }
            Some(false) => {
                qb.push(" AND (i.lease_holder IS NULL OR i.lease_expires_at <= now())");
            }
            None => {}
        }
        if let Some(q) = &filter.q {
            let q = q.to_lowercase();
            qb.push(" AND (strpos(lower(i.title), ")
                .push_bind(q.clone())
                .push(") > 0 OR strpos(lower(i.body), ")
                .push_bind(q)
                .push(") > 0)");
        }
        qb.push(" ORDER BY i.id LIMIT ").push_bind(i64::from(limit) + 1);
        let rows = qb.build().fetch_all(&self.pool).await.map_err(db)?;
        shared::page(&rows, limit, |row| Ok((row.get("id"), item_from_row(row, row.get("db_now"))?)))
    }

    async fn versions(&self, ws: &Workspace, r: &ItemRef, before: Option<i64>, n: u32) -> StoreResult<Vec<Version>> {
        let id = find_id(self, ws, r).await?;
        let rows = sqlx::query(
            "SELECT v.version, u.email, v.at, v.changes FROM item_versions v JOIN users u ON u.id = v.actor_id
             WHERE v.item_id = $1 AND v.version < $2 ORDER BY v.version DESC LIMIT $3",
        )
        .bind(id)
        .bind(before.unwrap_or(i64::MAX))
        .bind(i64::from(n))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        Ok(rows
            .iter()
            .map(|row| Version {
                version: row.get("version"),
                actor: row.get("email"),
                at: row.get("at"),
                changes: row.get("changes"),
            })
            .collect())
    }

    async fn comments(&self, ws: &Workspace, r: &ItemRef, after: i64, n: u32) -> StoreResult<Vec<Comment>> {
        let id = find_id(self, ws, r).await?;
        let rows = sqlx::query(
            "SELECT c.id, u.email, c.body, c.created_at FROM comments c JOIN users u ON u.id = c.author_id
             WHERE c.item_id = $1 AND c.id > $2 ORDER BY c.id LIMIT $3",
        )
        .bind(id)
        .bind(after)
        .bind(i64::from(n))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        Ok(rows
            .iter()
            .map(|row| Comment {
                id: row.get("id"),
                author: row.get("email"),
                body: row.get("body"),
                created_at: row.get("created_at"),
            })
            .collect())
    }
}
async fn find_id(s: &PgStore, ws: &Workspace, r: &ItemRef) -> StoreResult<i64> {
    sqlx::query_scalar("SELECT id FROM items WHERE workspace_id = $1 AND prefix = $2 AND number = $3")
        .bind(ws.id)
        .bind(&r.prefix)
        .bind(r.number)
        .fetch_optional(&s.pool)
        .await
        .map_err(db)?
        .ok_or_else(|| StoreError::not_found(format!("item {r}")))
}

#[async_trait]
impl ItemSteps for Tx {
    async fn lock_item(&mut self, ws: &Workspace, r: &ItemRef) -> StoreResult<Locked> {
        let row = sqlx::query(LOCK_ITEM)
            .bind(ws.id)
            .bind(&r.prefix)
            .bind(r.number)
            .fetch_optional(&mut *self.conn)
            .await
            .map_err(db)?;
        let locked = rows::locked(row.as_ref(), r)?;
        self.hold(r);
        Ok(locked)
    }

    async fn lock_blockers(&mut self, ws: &Workspace) -> StoreResult<()> {
        // Two updates locking different rows could each add one half of a
        // cycle, so blocker changes in a workspace take turns. The turn is
        // taken before the row lock: a blocker link takes a key-share lock
        // on the blocker's row, and waiting for the turn while holding a
        // row another turn-holder links to would deadlock.
        sqlx::query("SELECT pg_advisory_xact_lock($1, $2)")
            .bind(BLOCKERS_LOCK_CLASS)
            .bind(ws.id as i32)
            .execute(&mut *self.conn)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn load_item(&mut self, id: i64, now: Timestamp) -> StoreResult<Item> {
        let sql = format!("{ITEM_SELECT} WHERE i.id = $1");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_one(&mut *self.conn).await.map_err(db)?;
        item_from_row(&row, now)
    }

    async fn next_number(&mut self, ws: &Workspace, kind: &str) -> StoreResult<Option<(String, i64, Timestamp)>> {
        // The kind's row lock serializes creates per prefix until commit.
        let row = sqlx::query(
            "UPDATE kinds SET next_number = next_number + 1 WHERE workspace_id = $1 AND name = $2
             RETURNING prefix, next_number - 1 AS number, clock_timestamp() AS db_now",
        )
        .bind(ws.id)
        .bind(kind)
        .fetch_optional(&mut *self.conn)
        .await
        .map_err(db)?;
        Ok(row.map(|row| (row.get("prefix"), row.get("number"), row.get("db_now"))))
    }

    async fn insert_item(&mut self, ws: &Workspace, n: &NewRow<'_>) -> StoreResult<i64> {
        let v = n.v;
        sqlx::query_scalar(
            "INSERT INTO items (workspace_id, prefix, number, kind, title, body, status, priority, labels, parent_id, assignee_id, created_by, created_at, updated_at, not_before)
             VALUES ($1, $2, $3, $4, $5, $6, 'open', $7, $8, $9, $10, $11, $12, $12, $13) RETURNING id",
        )
        .bind(ws.id)
        .bind(n.prefix)
        .bind(n.number)
        .bind(&v.kind)
        .bind(&v.title)
        .bind(&v.body)
        .bind(v.priority.rank())
        .bind(&v.labels)
        .bind(n.parent)
        .bind(n.assignee)
        .bind(n.actor.user_id)
        .bind(n.now)
        .bind(v.not_before)
        .fetch_one(&mut *self.conn)
        .await
        .map_err(db)
    }

    async fn kind_exists(&mut self, ws: &Workspace, kind: &str) -> StoreResult<bool> {
        let known: Option<String> = sqlx::query_scalar("SELECT name FROM kinds WHERE workspace_id = $1 AND name = $2")
            .bind(ws.id)
            .bind(kind)
            .fetch_optional(&mut *self.conn)
            .await
            .map_err(db)?;
        Ok(known.is_some())
    }

    async fn item_id(&mut self, ws: &Workspace, field: &str, r: &ItemRef) -> StoreResult<i64> {
        sqlx::query_scalar(
            "SELECT id FROM items WHERE workspace_id = $1 AND prefix = $2 AND number = $3 AND deleted_at IS NULL",
        )
        .bind(ws.id)
        .bind(&r.prefix)
        .bind(r.number)
        .fetch_optional(&mut *self.conn)
        .await
        .map_err(db)?
        .ok_or_else(|| StoreError::invalid(field, format!("{r} does not exist in this workspace")))
    }

    async fn member_id(&mut self, ws: &Workspace, field: &str, email: &str) -> StoreResult<i64> {
        sqlx::query_scalar(
            "SELECT u.id FROM users u JOIN members m ON m.user_id = u.id WHERE m.workspace_id = $1 AND u.email = $2",
        )
        .bind(ws.id)
        .bind(email.to_lowercase())
        .fetch_optional(&mut *self.conn)
        .await
        .map_err(db)?
        .ok_or_else(|| StoreError::invalid(field, format!("{email} is not a member of this workspace")))
    }

    async fn is_ancestor(&mut self, item: i64, parent: i64) -> StoreResult<bool> {
        // Walk up from the new parent.
        sqlx::query_scalar(
            "WITH RECURSIVE up(id) AS (SELECT $1::bigint UNION SELECT i.parent_id FROM items i JOIN up ON i.id = up.id WHERE i.parent_id IS NOT NULL)
             SELECT EXISTS (SELECT 1 FROM up WHERE id = $2)",
        )
        .bind(parent)
        .bind(item)
        .fetch_one(&mut *self.conn)
        .await
        .map_err(db)
    }

    async fn replace_blockers(&mut self, item: i64, blockers: &[i64]) -> StoreResult<()> {
        sqlx::query("DELETE FROM item_blockers WHERE item_id = $1")
            .bind(item)
            .execute(&mut *self.conn)
            .await
            .map_err(db)?;
        if blockers.is_empty() {
            return Ok(());
        }
        // One statement for all of them: an import links thousands of items,
        // and a round trip each made its links most of its time.
        sqlx::query("INSERT INTO item_blockers (item_id, blocker_id) SELECT $1, b FROM unnest($2::bigint[]) AS b")
            .bind(item)
            .bind(blockers)
            .execute(&mut *self.conn)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn blocker_edges(&mut self, item: i64) -> StoreResult<Vec<(ItemRef, ItemRef)>> {
        let rows = sqlx::query(
            "WITH RECURSIVE reach(id) AS (SELECT $1::bigint UNION SELECT b.blocker_id FROM item_blockers b JOIN reach r ON b.item_id = r.id)
             SELECT i.prefix AS ip, i.number AS inum, j.prefix AS bp, j.number AS bnum
             FROM reach r JOIN item_blockers b ON b.item_id = r.id JOIN items i ON i.id = b.item_id JOIN items j ON j.id = b.blocker_id",
        )
        .bind(item)
        .fetch_all(&mut *self.conn)
        .await
        .map_err(db)?;
        Ok(rows
            .iter()
            .map(|row| {
                (
                    ItemRef { prefix: row.get("ip"), number: row.get("inum") },
                    ItemRef { prefix: row.get("bp"), number: row.get("bnum") },
                )
            })
            .collect())
    }

    // `updated_at` strictly increases per item even if two writes read the
    // same microsecond or the database clock steps back: each content write
    // below takes GREATEST(now, updated_at + 1µs).

    async fn write_content(
        &mut self, id: i64, new: &Item, parent: Option<i64>, assignee: Option<i64>, now: Timestamp,
    ) -> StoreResult<Timestamp> {
        sqlx::query_scalar(
            "UPDATE items SET title = $2, body = $3, kind = $4, status = $5, priority = $6, labels = $7,
                    parent_id = $8, assignee_id = $9, not_before = $11,
                    updated_at = GREATEST($10, updated_at + interval '1 microsecond'), version = version + 1
             WHERE id = $1 RETURNING updated_at",
        )
        .bind(id)
        .bind(&new.title)
        .bind(&new.body)
        .bind(&new.kind)
        .bind(new.status.as_str())
        .bind(new.priority.rank())
        .bind(&new.labels)
        .bind(parent)
        .bind(assignee)
        .bind(now)
        .bind(new.not_before)
        .fetch_one(&mut *self.conn)
        .await
        .map_err(db)
    }

    async fn write_status(&mut self, id: i64, status: Status, now: Timestamp) -> StoreResult<Timestamp> {
        sqlx::query_scalar(
            "UPDATE items SET status = $2, updated_at = GREATEST($3, updated_at + interval '1 microsecond'),
                    version = version + 1
             WHERE id = $1 RETURNING updated_at",
        )
        .bind(id)
        .bind(status.as_str())
        .bind(now)
        .fetch_one(&mut *self.conn)
        .await
        .map_err(db)
    }

    async fn write_deleted(&mut self, id: i64, deleted: bool, now: Timestamp) -> StoreResult<Timestamp> {
        sqlx::query_scalar(
            "UPDATE items SET deleted_at = CASE WHEN $2 THEN $3 END,
                    updated_at = GREATEST($3, updated_at + interval '1 microsecond'), version = version + 1
             WHERE id = $1 RETURNING updated_at",
        )
        .bind(id)
        .bind(deleted)
        .bind(now)
        .fetch_one(&mut *self.conn)
        .await
        .map_err(db)
    }

    async fn lease_expiries(&mut self, id: i64) -> StoreResult<i64> {
        sqlx::query_scalar("SELECT lease_expiries FROM items WHERE id = $1")
            .bind(id)
            .fetch_one(&mut *self.conn)
            .await
            .map_err(db)
    }

    async fn write_requeue(&mut self, id: i64, labels: &[String], now: Timestamp) -> StoreResult<Timestamp> {
        sqlx::query_scalar(
            "UPDATE items SET labels = $2, lease_expiries = 0, failures = 0, retry_at = NULL,
                    updated_at = GREATEST($3, updated_at + interval '1 microsecond'), version = version + 1
             WHERE id = $1 RETURNING updated_at",
        )
        .bind(id)
        .bind(labels)
        .bind(now)
        .fetch_one(&mut *self.conn)
        .await
        .map_err(db)
    }

    async fn add_label(&mut self, id: i64, label: &str) -> StoreResult<()> {
        sqlx::query("UPDATE items SET labels = array_append(labels, $2) WHERE id = $1")
            .bind(id)
            .bind(label)
            .execute(&mut *self.conn)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn add_version(
        &mut self, id: i64, actor: Actor, changes: Map<String, Value>, at: Timestamp,
    ) -> StoreResult<()> {
        // The item's row is locked (or just inserted), so `MAX(version) + 1` cannot race.
        sqlx::query(
            "INSERT INTO item_versions (item_id, version, actor_id, at, changes)
             VALUES ($1, (SELECT COALESCE(MAX(version), 0) + 1 FROM item_versions WHERE item_id = $1), $2, $3, $4)",
        )
        .bind(id)
        .bind(actor.user_id)
        .bind(at)
        .bind(Value::Object(changes))
        .execute(&mut *self.conn)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn insert_comment(
        &mut self, item: i64, actor: Actor, body: &str, at: Timestamp,
    ) -> StoreResult<(i64, String)> {
        let row = sqlx::query(
            "INSERT INTO comments (item_id, author_id, body, created_at) VALUES ($1, $2, $3, $4)
             RETURNING id, (SELECT email FROM users WHERE id = $2) AS author",
        )
        .bind(item)
        .bind(actor.user_id)
        .bind(body)
        .bind(at)
        .fetch_one(&mut *self.conn)
        .await
        .map_err(db)?;
        Ok((row.get("id"), row.get("author")))
    }
}

/// ` AND` the item is a child of `p`.
pub(crate) fn push_parent(qb: &mut QueryBuilder<Postgres>, ws: &Workspace, p: &ItemRef) {
    qb.push(" AND i.parent_id = (SELECT id FROM items WHERE workspace_id = ")
        .push_bind(ws.id)
        .push(" AND prefix = ")
        .push_bind(p.prefix.clone())
        .push(" AND number = ")
        .push_bind(p.number)
        .push(")");
}
