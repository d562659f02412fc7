//! Items: their reads, and the item steps of the shared write flows
//! (`pad_store::steps`), with their comments and history.

use async_trait::async_trait;
use pad_core::{Comment, Item, ItemFilter, ItemRef, Page, Status, Timestamp, Version, Workspace};
use pad_store::steps::{ItemSteps, Locked, NewRow};
use pad_store::{Actor, StoreError, StoreResult, shared};
use serde_json::{Map, Value};
use sqlx::{QueryBuilder, Row, Sqlite};

use crate::rows::{self, ITEM_SELECT, item_from_row, micros, ts};
use crate::{SqliteStore, Tx, db};

pub(crate) async fn get_item(s: &SqliteStore, ws: &Workspace, r: &ItemRef) -> StoreResult<Item> {
    let sql = format!("{ITEM_SELECT} WHERE i.workspace_id = ? AND i.prefix = ? AND i.number = ?");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(ws.id)
        .bind(&r.prefix)
        .bind(r.number)
        .fetch_optional(&s.reader)
        .await
        .map_err(db)?
        .ok_or_else(|| StoreError::not_found(format!("item {r}")))?;
    item_from_row(&row, s.clock.read())
}

pub(crate) async fn list_items(
    s: &SqliteStore,
    ws: &Workspace,
    filter: &ItemFilter,
    limit: u32,
    cursor: Option<&str>,
) -> StoreResult<Page<Item>> {
    let (after, limit) = shared::list_window(filter, limit, cursor)?;
    let now = s.clock.read();
    let mut qb: QueryBuilder<Sqlite> = QueryBuilder::new(ITEM_SELECT);
    qb.push(" WHERE i.workspace_id = ").push_bind(ws.id).push(" AND i.id > ").push_bind(after);
    if !filter.include_deleted {
        qb.push(" AND i.deleted_at IS NULL");
    }
    push_in(&mut qb, "i.status", filter.status.iter().map(|s| s.as_str().to_string()));
    push_in(&mut qb, "i.kind", filter.kind.iter().map(|k| k.to_ascii_lowercase()));
    push_in(&mut qb, "i.priority", filter.priority.iter().map(|p| p.rank()));
    for l in &filter.labels {
        qb.push(" AND EXISTS (SELECT 1 FROM json_each(i.labels) WHERE value = ").push_bind(l.clone()).push(")");
    }
    if let Some(a) = &filter.assignee {
        qb.push(" AND a.email = ").push_bind(a.to_lowercase());
    }
    if let Some(p) = &filter.parent {
        push_parent(&mut qb, ws, p);
    }
    match filter.leased {
        Some(true) => {
            qb.push(" AND i.lease_holder IS NOT NULL AND i.lease_expires_at > ").push_bind(micros(now));
        }
        Some(false) => {
            qb.push(" AND (i.lease_holder IS NULL OR i.lease_expires_at <= ").push_bind(micros(now)).push(")");
        }
        None => {}
    }
    if let Some(q) = &filter.q {
        let q = q.to_lowercase();
        qb.push(" AND (instr(lower(i.title), ")
            .push_bind(q.clone())
            .push(") > 0 OR instr(lower(i.body), ")
            .push_bind(q)
            .push(") > 0)");
    }
    qb.push(" ORDER BY i.id LIMIT ").push_bind(i64::from(limit) + 1);
    let rows = qb.build().fetch_all(&s.reader).await.map_err(db)?;
    shared::page(&rows, limit, |row| Ok((row.get("id"), item_from_row(row, now)?)))
}

pub(crate) async fn history(s: &SqliteStore, ws: &Workspace, r: &ItemRef) -> StoreResult<Vec<Version>> {
    let id = find_id(s, ws, r).await?;
    let rows = sqlx::query("SELECT v.version, u.email, v.at, v.changes FROM item_versions v JOIN users u ON u.id = v.actor_id WHERE v.item_id = ? ORDER BY v.version DESC")
        .bind(id)
        .fetch_all(&s.reader)
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| {
            Ok(Version {
                version: row.get("version"),
                actor: row.get("email"),
                at: ts(row.get("at"))?,
                changes: serde_json::from_str(row.get("changes")).map_err(|e| StoreError::Internal(e.to_string()))?,
            })
        })
        .collect()
}

pub(crate) async fn list_comments(s: &SqliteStore, ws: &Workspace, r: &ItemRef) -> StoreResult<Vec<Comment>> {
    let id = find_id(s, ws, r).await?;
    let rows = sqlx::query("SELECT c.id, u.email, c.body, c.created_at FROM comments c JOIN users u ON u.id = c.author_id WHERE c.item_id = ? ORDER BY c.id")
        .bind(id)
        .fetch_all(&s.reader)
        .await
        .map_err(db)?;
    rows.iter()
        .map(|row| {
            Ok(Comment {
                id: row.get("id"),
                author: row.get("email"),
                body: row.get("body"),
                created_at: ts(row.get("created_at"))?,
            })
        })
        .collect()
}

async fn find_id(s: &SqliteStore, ws: &Workspace, r: &ItemRef) -> StoreResult<i64> {
    sqlx::query_scalar("SELECT id FROM items WHERE workspace_id = ? AND prefix = ? AND number = ?")
        .bind(ws.id)
        .bind(&r.prefix)
        .bind(r.number)
        .fetch_optional(&s.reader)
        .await
        .map_err(db)?
        .ok_or_else(|| StoreError::not_found(format!("item {r}")))
}

#[async_trait]
impl ItemSteps for Tx {
    async fn lock_item(&mut self, ws: &Workspace, r: &ItemRef) -> StoreResult<Locked> {
        // The write lock is the lock: this transaction is the only writer.
        let row = sqlx::query(
            "SELECT id, deleted_at, lease_holder, lease_user_id, lease_session_id, lease_epoch, lease_acquired_at,
                    lease_renewed_at, lease_expires_at, lease_ttl_seconds, lease_id
             FROM items WHERE workspace_id = ? AND prefix = ? AND number = ?",
        )
        .bind(ws.id)
        .bind(&r.prefix)
        .bind(r.number)
        .fetch_optional(&mut *self.conn)
        .await
        .map_err(db)?
        .ok_or_else(|| StoreError::not_found(format!("item {r}")))?;
        Ok(Locked {
            id: row.get("id"),
            deleted: row.get::<Option<i64>, _>("deleted_at").is_some(),
            slot: rows::lease_slot(&row)?,
            now: self.now,
        })
    }

    async fn lock_blockers(&mut self, _ws: &Workspace) -> StoreResult<()> {
        // Writers are serialized (BEGIN IMMEDIATE): blocker changes already take turns.
        Ok(())
    }

    async fn load_item(&mut self, id: i64, now: Timestamp) -> StoreResult<Item> {
        let sql = format!("{ITEM_SELECT} WHERE i.id = ?");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_one(&mut *self.conn).await.map_err(db)?;
        item_from_row(&row, now)
    }

    async fn next_number(&mut self, ws: &Workspace, kind: &str) -> StoreResult<Option<(String, i64, Timestamp)>> {
        let row = sqlx::query(
            "UPDATE kinds SET next_number = next_number + 1 WHERE workspace_id = ? AND name = ?
             RETURNING prefix, next_number - 1 AS number",
        )
        .bind(ws.id)
        .bind(kind)
        .fetch_optional(&mut *self.conn)
        .await
        .map_err(db)?;
        Ok(row.map(|row| (row.get("prefix"), row.get("number"), self.now)))
    }

    async fn insert_item(&mut self, ws: &Workspace, n: &NewRow<'_>) -> StoreResult<i64> {
        let v = n.v;
        sqlx::query_scalar(
            "INSERT INTO items (workspace_id, prefix, number, kind, title, body, status, priority, labels, parent_id, assignee_id, created_by, created_at, updated_at, not_before)
             VALUES (?, ?, ?, ?, ?, ?, 'open', ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(ws.id)
        .bind(n.prefix)
        .bind(n.number)
        .bind(&v.kind)
        .bind(&v.title)
        .bind(&v.body)
        .bind(v.priority.rank())
        .bind(serde_json::to_string(&v.labels).expect("labels serialize"))
        .bind(n.parent)
        .bind(n.assignee)
        .bind(n.actor.user_id)
        .bind(micros(n.now))
        .bind(micros(n.now))
        .bind(v.not_before.map(micros))
        .fetch_one(&mut *self.conn)
        .await
        .map_err(db)
    }

    async fn kind_exists(&mut self, ws: &Workspace, kind: &str) -> StoreResult<bool> {
        let known: Option<String> = sqlx::query_scalar("SELECT name FROM kinds WHERE workspace_id = ? AND name = ?")
            .bind(ws.id)
            .bind(kind)
            .fetch_optional(&mut *self.conn)
            .await
            .map_err(db)?;
        Ok(known.is_some())
    }

    async fn item_id(&mut self, ws: &Workspace, field: &str, r: &ItemRef) -> StoreResult<i64> {
        sqlx::query_scalar(
            "SELECT id FROM items WHERE workspace_id = ? AND prefix = ? AND number = ? AND deleted_at IS NULL",
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
            "SELECT u.id FROM users u JOIN members m ON m.user_id = u.id WHERE m.workspace_id = ? AND u.email = ?",
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
        let found: i64 = sqlx::query_scalar(
            "WITH RECURSIVE up(id) AS (SELECT ? UNION SELECT i.parent_id FROM items i JOIN up ON i.id = up.id WHERE i.parent_id IS NOT NULL)
             SELECT COUNT(*) FROM up WHERE id = ?",
        )
        .bind(parent)
        .bind(item)
        .fetch_one(&mut *self.conn)
        .await
        .map_err(db)?;
        Ok(found > 0)
    }

    async fn replace_blockers(&mut self, item: i64, blockers: &[i64]) -> StoreResult<()> {
        sqlx::query("DELETE FROM item_blockers WHERE item_id = ?")
            .bind(item)
            .execute(&mut *self.conn)
            .await
            .map_err(db)?;
        for b in blockers {
            sqlx::query("INSERT INTO item_blockers (item_id, blocker_id) VALUES (?, ?)")
                .bind(item)
                .bind(b)
                .execute(&mut *self.conn)
                .await
                .map_err(db)?;
        }
        Ok(())
    }

    async fn blocker_edges(&mut self, item: i64) -> StoreResult<Vec<(ItemRef, ItemRef)>> {
        let rows = sqlx::query(
            "WITH RECURSIVE reach(id) AS (SELECT ? UNION SELECT b.blocker_id FROM item_blockers b JOIN reach r ON b.item_id = r.id)
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

    async fn write_content(
        &mut self,
        id: i64,
        new: &Item,
        parent: Option<i64>,
        assignee: Option<i64>,
        now: Timestamp,
    ) -> StoreResult<Timestamp> {
        sqlx::query(
            "UPDATE items SET title = ?, body = ?, kind = ?, status = ?, priority = ?, labels = ?, parent_id = ?, assignee_id = ?,
                    not_before = ?, updated_at = ?, version = version + 1 WHERE id = ?",
        )
        .bind(&new.title)
        .bind(&new.body)
        .bind(&new.kind)
        .bind(new.status.as_str())
        .bind(new.priority.rank())
        .bind(serde_json::to_string(&new.labels).expect("labels serialize"))
        .bind(parent)
        .bind(assignee)
        .bind(new.not_before.map(micros))
        .bind(micros(now))
        .bind(id)
        .execute(&mut *self.conn)
        .await
        .map_err(db)?;
        Ok(now)
    }

    async fn write_status(&mut self, id: i64, status: Status, now: Timestamp) -> StoreResult<Timestamp> {
        sqlx::query("UPDATE items SET status = ?, updated_at = ?, version = version + 1 WHERE id = ?")
            .bind(status.as_str())
            .bind(micros(now))
            .bind(id)
            .execute(&mut *self.conn)
            .await
            .map_err(db)?;
        Ok(now)
    }

    async fn write_deleted(&mut self, id: i64, deleted: bool, now: Timestamp) -> StoreResult<Timestamp> {
        sqlx::query("UPDATE items SET deleted_at = ?, updated_at = ?, version = version + 1 WHERE id = ?")
            .bind(deleted.then(|| micros(now)))
            .bind(micros(now))
            .bind(id)
            .execute(&mut *self.conn)
            .await
            .map_err(db)?;
        Ok(now)
    }

    async fn lease_expiries(&mut self, id: i64) -> StoreResult<i64> {
        sqlx::query_scalar("SELECT lease_expiries FROM items WHERE id = ?")
            .bind(id)
            .fetch_one(&mut *self.conn)
            .await
            .map_err(db)
    }

    async fn write_requeue(&mut self, id: i64, labels: &[String], now: Timestamp) -> StoreResult<Timestamp> {
        sqlx::query(
            "UPDATE items SET labels = ?, lease_expiries = 0, failures = 0, retry_at = NULL, updated_at = ?,
                    version = version + 1 WHERE id = ?",
        )
        .bind(serde_json::to_string(labels).expect("labels serialize"))
        .bind(micros(now))
        .bind(id)
        .execute(&mut *self.conn)
        .await
        .map_err(db)?;
        Ok(now)
    }

    async fn add_label(&mut self, id: i64, label: &str) -> StoreResult<()> {
        sqlx::query("UPDATE items SET labels = json_insert(labels, '$[#]', ?) WHERE id = ?")
            .bind(label)
            .bind(id)
            .execute(&mut *self.conn)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn add_version(
        &mut self,
        id: i64,
        actor: Actor,
        changes: Map<String, Value>,
        at: Timestamp,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO item_versions (item_id, version, actor_id, at, changes)
             VALUES (?, (SELECT COALESCE(MAX(version), 0) + 1 FROM item_versions WHERE item_id = ?), ?, ?, ?)",
        )
        .bind(id)
        .bind(id)
        .bind(actor.user_id)
        .bind(micros(at))
        .bind(Value::Object(changes).to_string())
        .execute(&mut *self.conn)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn insert_comment(
        &mut self,
        item: i64,
        actor: Actor,
        body: &str,
        at: Timestamp,
    ) -> StoreResult<(i64, String)> {
        let row = sqlx::query(
            "INSERT INTO comments (item_id, author_id, body, created_at) VALUES (?, ?, ?, ?)
             RETURNING id, (SELECT email FROM users WHERE id = ?) AS author",
        )
        .bind(item)
        .bind(actor.user_id)
        .bind(body)
        .bind(micros(at))
        .bind(actor.user_id)
        .fetch_one(&mut *self.conn)
        .await
        .map_err(db)?;
        Ok((row.get("id"), row.get("author")))
    }
}

/// ` AND column IN (…)` for a non-empty list; nothing for an empty one.
pub(crate) fn push_in<T>(qb: &mut QueryBuilder<Sqlite>, column: &str, values: impl Iterator<Item = T>)
where
    T: for<'q> sqlx::Encode<'q, Sqlite> + sqlx::Type<Sqlite> + Send + 'static,
{
    let mut values = values.peekable();
    if values.peek().is_none() {
        return;
    }
    qb.push(format!(" AND {column} IN ("));
    let mut sep = qb.separated(", ");
    for v in values {
        sep.push_bind(v);
    }
    qb.push(")");
}

/// ` AND` the item is a child of `p`.
pub(crate) fn push_parent(qb: &mut QueryBuilder<Sqlite>, ws: &Workspace, p: &ItemRef) {
    qb.push(" AND i.parent_id = (SELECT id FROM items WHERE workspace_id = ")
        .push_bind(ws.id)
        .push(" AND prefix = ")
        .push_bind(p.prefix.clone())
        .push(" AND number = ")
        .push_bind(p.number)
        .push(")");
}
