//! Items: their reads, and the item steps of the shared write flows
//! (`pad_store::steps`), with their comments and history.

use std::sync::LazyLock;

use async_trait::async_trait;
use pad_core::{Comment, Item, ItemFilter, ItemRef, Page, Status, Timestamp, Version, Workspace};
use pad_store::steps::{ItemSteps, Locked, NewRow};
use pad_store::{Actor, ItemOps, StoreError, StoreResult, shared};
use rusqlite::Connection;
use serde_json::{Map, Value};

use crate::rows::{self, ITEM_SELECT, item_from_row};
use crate::sql::{Col, Db, Sql, micros};
use crate::{SqliteStore, Tx};

/// [`ITEM_SELECT`] by ref and by id, built once: they run on every item read
/// and at the end of most write flows.
static ITEM_BY_REF: LazyLock<String> =
    LazyLock::new(|| format!("{ITEM_SELECT} WHERE i.workspace_id = ? AND i.prefix = ? AND i.number = ?"));
static ITEM_BY_ID: LazyLock<String> = LazyLock::new(|| format!("{ITEM_SELECT} WHERE i.id = ?"));

#[async_trait]
impl ItemOps for SqliteStore {
    async fn get_item(&self, ws: &Workspace, r: &ItemRef) -> StoreResult<Item> {
        let now = self.clock.read();
        let key = (ws.id, r.prefix.clone(), r.number);
        self.read(move |c| c.opt(&ITEM_BY_REF, key, |row| item_from_row(row, now)))
            .await?
            .ok_or_else(|| StoreError::not_found(format!("item {r}")))
    }

    async fn list_items(
        &self, ws: &Workspace, filter: &ItemFilter, limit: u32, cursor: Option<&str>,
    ) -> StoreResult<Page<Item>> {
        let (after, limit) = shared::list_window(filter, limit, cursor)?;
        let now = self.clock.read();
        let mut q = Sql::new(ITEM_SELECT);
        q.push(" WHERE i.workspace_id = ").bind(ws.id).push(" AND i.id > ").bind(after);
        if !filter.include_deleted {
            q.push(" AND i.deleted_at IS NULL");
        }
        q.bind_in("i.status", filter.status.iter().map(|s| s.as_str().to_string()));
        q.bind_in("i.kind", filter.kind.iter().map(|k| k.to_ascii_lowercase()));
        q.bind_in("i.priority", filter.priority.iter().map(|p| p.rank()));
        for l in &filter.labels {
            q.push(" AND EXISTS (SELECT 1 FROM json_each(i.labels) WHERE value = ").bind(l.clone()).push(")");
        }
        if let Some(a) = &filter.assignee {
            q.push(" AND a.email = ").bind(a.to_lowercase());
        }
        if let Some(p) = &filter.parent {
            push_parent(&mut q, ws, p);
        }
        match filter.leased {
            Some(true) => {
                q.push(" AND i.lease_holder IS NOT NULL AND i.lease_expires_at > ").bind(micros(now));
            }
            Some(false) => {
                q.push(" AND (i.lease_holder IS NULL OR i.lease_expires_at <= ").bind(micros(now)).push(")");
            }
            None => {}
        }
        if let Some(text) = &filter.q {
            let text = text.to_lowercase();
            q.push(" AND (instr(lower(i.title), ")
                .bind(text.clone())
                .push(") > 0 OR instr(lower(i.body), ")
                .bind(text)
                .push(") > 0)");
        }
        q.push(" ORDER BY i.id LIMIT ").bind(i64::from(limit) + 1);
        let rows =
            self.read(move |c| c.all_built(&q, |row| Ok((row.col::<i64>("id")?, item_from_row(row, now)?)))).await?;
        shared::page(&rows, limit, |(id, item)| Ok((*id, item.clone())))
    }

    async fn versions(&self, ws: &Workspace, r: &ItemRef, before: Option<i64>, n: u32) -> StoreResult<Vec<Version>> {
        let (ws_id, r) = (ws.id, r.clone());
        self.read(move |c| {
            let id = find_id(c, ws_id, &r)?;
            c.all(
                "SELECT v.version, u.email, v.at, v.changes FROM item_versions v JOIN users u ON u.id = v.actor_id
                 WHERE v.item_id = ? AND v.version < ? ORDER BY v.version DESC LIMIT ?",
                (id, before.unwrap_or(i64::MAX), i64::from(n)),
                |row| {
                    Ok(Version {
                        version: row.col("version")?,
                        actor: row.col("email")?,
                        at: row.ts("at")?,
                        changes: row.json("changes")?,
                    })
                },
            )
        })
        .await
    }

    async fn comments(&self, ws: &Workspace, r: &ItemRef, after: i64, n: u32) -> StoreResult<Vec<Comment>> {
        let (ws_id, r) = (ws.id, r.clone());
        self.read(move |c| {
            let id = find_id(c, ws_id, &r)?;
            c.all(
                "SELECT c.id, u.email, c.body, c.created_at FROM comments c JOIN users u ON u.id = c.author_id
                 WHERE c.item_id = ? AND c.id > ? ORDER BY c.id LIMIT ?",
                (id, after, i64::from(n)),
                |row| {
                    Ok(Comment {
                        id: row.col("id")?,
                        author: row.col("email")?,
                        body: row.col("body")?,
                        created_at: row.ts("created_at")?,
                    })
                },
            )
        })
        .await
    }
}
fn find_id(c: &Connection, ws_id: i64, r: &ItemRef) -> StoreResult<i64> {
    c.opt(
        "SELECT id FROM items WHERE workspace_id = ? AND prefix = ? AND number = ?",
        (ws_id, &r.prefix, r.number),
        |row| row.col(0),
    )?
    .ok_or_else(|| StoreError::not_found(format!("item {r}")))
}

#[async_trait]
impl ItemSteps for Tx {
    async fn lock_item(&mut self, ws: &Workspace, r: &ItemRef) -> StoreResult<Locked> {
        // The writer connection is the lock: this flow is the only writer.
        let now = self.now;
        self.conn()
            .opt(
                "SELECT id, deleted_at, lease_holder, lease_user_id, lease_session_id, lease_epoch, lease_acquired_at,
                        lease_renewed_at, lease_expires_at, lease_ttl_seconds, lease_hold_until, lease_id
                 FROM items WHERE workspace_id = ? AND prefix = ? AND number = ?",
                (ws.id, &r.prefix, r.number),
                |row| rows::locked_from_row(row, now),
            )?
            .ok_or_else(|| StoreError::not_found(format!("item {r}")))
    }

    async fn lock_blockers(&mut self, _ws: &Workspace) -> StoreResult<()> {
        // Writers are serialized (one writer connection): blocker changes already take turns.
        Ok(())
    }

    async fn load_item(&mut self, id: i64, now: Timestamp) -> StoreResult<Item> {
        self.conn().one(&ITEM_BY_ID, [id], |row| item_from_row(row, now))
    }

    async fn next_number(&mut self, ws: &Workspace, kind: &str) -> StoreResult<Option<(String, i64, Timestamp)>> {
        let now = self.now;
        self.conn().opt(
            "UPDATE kinds SET next_number = next_number + 1 WHERE workspace_id = ? AND name = ?
             RETURNING prefix, next_number - 1 AS number",
            (ws.id, kind),
            |row| Ok((row.col("prefix")?, row.col("number")?, now)),
        )
    }

    async fn insert_item(&mut self, ws: &Workspace, n: &NewRow<'_>) -> StoreResult<i64> {
        let v = n.v;
        self.conn().scalar(
            "INSERT INTO items (workspace_id, prefix, number, kind, title, body, status, priority, labels, parent_id,
                                assignee_id, created_by, created_at, updated_at, not_before)
             VALUES (?, ?, ?, ?, ?, ?, 'open', ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            rusqlite::params![
                ws.id,
                n.prefix,
                n.number,
                &v.kind,
                &v.title,
                &v.body,
                v.priority.rank(),
                serde_json::to_string(&v.labels).expect("labels serialize"),
                n.parent,
                n.assignee,
                n.actor.user_id,
                micros(n.now),
                micros(n.now),
                v.not_before.map(micros),
            ],
        )
    }

    async fn kind_exists(&mut self, ws: &Workspace, kind: &str) -> StoreResult<bool> {
        let known =
            self.conn().opt("SELECT 1 FROM kinds WHERE workspace_id = ? AND name = ?", (ws.id, kind), |_| Ok(()))?;
        Ok(known.is_some())
    }

    async fn item_id(&mut self, ws: &Workspace, field: &str, r: &ItemRef) -> StoreResult<i64> {
        self.conn()
            .opt(
                "SELECT id FROM items WHERE workspace_id = ? AND prefix = ? AND number = ? AND deleted_at IS NULL",
                (ws.id, &r.prefix, r.number),
                |row| row.col(0),
            )?
            .ok_or_else(|| StoreError::invalid(field, format!("{r} does not exist in this workspace")))
    }

    async fn member_id(&mut self, ws: &Workspace, field: &str, email: &str) -> StoreResult<i64> {
        self.conn()
            .opt(
                "SELECT u.id FROM users u JOIN members m ON m.user_id = u.id WHERE m.workspace_id = ? AND u.email = ?",
                (ws.id, email.to_lowercase()),
                |row| row.col(0),
            )?
            .ok_or_else(|| StoreError::invalid(field, format!("{email} is not a member of this workspace")))
    }

    async fn is_ancestor(&mut self, item: i64, parent: i64) -> StoreResult<bool> {
        // Walk up from the new parent.
        let found: i64 = self.conn().scalar(
            "WITH RECURSIVE up(id) AS (SELECT ? UNION SELECT i.parent_id FROM items i JOIN up ON i.id = up.id
                                       WHERE i.parent_id IS NOT NULL)
             SELECT COUNT(*) FROM up WHERE id = ?",
            (parent, item),
        )?;
        Ok(found > 0)
    }

    async fn replace_blockers(&mut self, item: i64, blockers: &[i64]) -> StoreResult<()> {
        let conn = self.conn();
        conn.exec("DELETE FROM item_blockers WHERE item_id = ?", [item])?;
        for b in blockers {
            conn.exec("INSERT INTO item_blockers (item_id, blocker_id) VALUES (?, ?)", (item, b))?;
        }
        Ok(())
    }

    async fn blocker_edges(&mut self, item: i64) -> StoreResult<Vec<(ItemRef, ItemRef)>> {
        self.conn().all(
            "WITH RECURSIVE reach(id) AS (SELECT ? UNION SELECT b.blocker_id FROM item_blockers b JOIN reach r ON b.item_id = r.id)
             SELECT i.prefix AS ip, i.number AS inum, j.prefix AS bp, j.number AS bnum
             FROM reach r JOIN item_blockers b ON b.item_id = r.id JOIN items i ON i.id = b.item_id
             JOIN items j ON j.id = b.blocker_id",
            [item],
            |row| {
                Ok((
                    ItemRef { prefix: row.col("ip")?, number: row.col("inum")? },
                    ItemRef { prefix: row.col("bp")?, number: row.col("bnum")? },
                ))
            },
        )
    }

    async fn write_content(
        &mut self, id: i64, new: &Item, parent: Option<i64>, assignee: Option<i64>, now: Timestamp,
    ) -> StoreResult<Timestamp> {
        self.conn().exec(
            "UPDATE items SET title = ?, body = ?, kind = ?, status = ?, priority = ?, labels = ?, parent_id = ?,
                    assignee_id = ?, not_before = ?, updated_at = ?, version = version + 1 WHERE id = ?",
            rusqlite::params![
                &new.title,
                &new.body,
                &new.kind,
                new.status.as_str(),
                new.priority.rank(),
                serde_json::to_string(&new.labels).expect("labels serialize"),
                parent,
                assignee,
                new.not_before.map(micros),
                micros(now),
                id,
            ],
        )?;
        Ok(now)
    }

    async fn write_status(&mut self, id: i64, status: Status, now: Timestamp) -> StoreResult<Timestamp> {
        self.conn().exec(
            "UPDATE items SET status = ?, updated_at = ?, version = version + 1 WHERE id = ?",
            (status.as_str(), micros(now), id),
        )?;
        Ok(now)
    }

    async fn write_deleted(&mut self, id: i64, deleted: bool, now: Timestamp) -> StoreResult<Timestamp> {
        self.conn().exec(
            "UPDATE items SET deleted_at = ?, updated_at = ?, version = version + 1 WHERE id = ?",
            (deleted.then(|| micros(now)), micros(now), id),
        )?;
        Ok(now)
    }

    async fn lease_expiries(&mut self, id: i64) -> StoreResult<i64> {
        self.conn().scalar("SELECT lease_expiries FROM items WHERE id = ?", [id])
    }

    async fn write_requeue(&mut self, id: i64, labels: &[String], now: Timestamp) -> StoreResult<Timestamp> {
        self.conn().exec(
            "UPDATE items SET labels = ?, lease_expiries = 0, failures = 0, retry_at = NULL, updated_at = ?,
                    version = version + 1 WHERE id = ?",
            (serde_json::to_string(labels).expect("labels serialize"), micros(now), id),
        )?;
        Ok(now)
    }

    async fn add_label(&mut self, id: i64, label: &str) -> StoreResult<()> {
        self.conn().exec("UPDATE items SET labels = json_insert(labels, '$[#]', ?) WHERE id = ?", (label, id))?;
        Ok(())
    }

    async fn add_version(
        &mut self, id: i64, actor: Actor, changes: Map<String, Value>, at: Timestamp,
    ) -> StoreResult<()> {
        self.conn().exec(
            "INSERT INTO item_versions (item_id, version, actor_id, at, changes)
             VALUES (?1, (SELECT COALESCE(MAX(version), 0) + 1 FROM item_versions WHERE item_id = ?1), ?2, ?3, ?4)",
            (id, actor.user_id, micros(at), Value::Object(changes).to_string()),
        )?;
        Ok(())
    }

    async fn insert_comment(
        &mut self, item: i64, actor: Actor, body: &str, at: Timestamp,
    ) -> StoreResult<(i64, String)> {
        self.conn().one(
            "INSERT INTO comments (item_id, author_id, body, created_at) VALUES (?1, ?2, ?3, ?4)
             RETURNING id, (SELECT email FROM users WHERE id = ?2) AS author",
            (item, actor.user_id, body, micros(at)),
            |row| Ok((row.col("id")?, row.col("author")?)),
        )
    }
}

/// ` AND` the item is a child of `p`.
pub(crate) fn push_parent(q: &mut Sql, ws: &Workspace, p: &ItemRef) {
    q.push(" AND i.parent_id = (SELECT id FROM items WHERE workspace_id = ")
        .bind(ws.id)
        .push(" AND prefix = ")
        .bind(p.prefix.clone())
        .push(" AND number = ")
        .bind(p.number)
        .push(")");
}
