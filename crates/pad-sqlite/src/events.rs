//! The event log (docs/api.md, Events): appends, in the writing
//! transaction, and reads by id.

use async_trait::async_trait;
use pad_core::{Event, EventFilter, EventKind, ItemRef, Timestamp, Workspace};
use pad_store::steps::EventSteps;
use pad_store::{Actor, EventOps, StoreResult};
use rusqlite::Row;
use serde_json::Value;

use crate::sql::{Col, Db, Sql, micros};
use crate::{SqliteStore, Tx};

#[async_trait]
impl EventSteps for Tx {
    async fn event(
        &mut self, ws: i64, kind: EventKind, r: &ItemRef, actor: Option<Actor>, at: Timestamp, data: Value,
    ) -> StoreResult<()> {
        let conn = self.conn();
        conn.exec(
            "INSERT INTO events (workspace_id, type, item_ref, actor_id, at, data) VALUES (?, ?, ?, ?, ?, ?)",
            (ws, kind.as_str(), r.to_string(), actor.map(|a| a.user_id), micros(at), data.to_string()),
        )?;
        // The event's webhook deliveries, in its transaction (docs/webhooks.md).
        crate::webhooks::enqueue(conn, ws, conn.last_insert_rowid(), kind, micros(at))
    }
}

#[async_trait]
impl EventOps for SqliteStore {
    async fn events_where(
        &self, ws: &Workspace, after: i64, limit: u32, filter: &EventFilter,
    ) -> StoreResult<Vec<Event>> {
        let mut q = Sql::new(
            "SELECT e.id, e.type, e.item_ref, u.email, e.at, e.data FROM events e LEFT JOIN users u ON u.id = e.actor_id
             WHERE e.workspace_id = ",
        );
        q.bind(ws.id).push(" AND e.id > ").bind(after);
        if let Some(r) = &filter.item_ref {
            q.push(" AND e.item_ref = ").bind(r.to_string());
        }
        q.bind_in("e.type", filter.kinds.iter().map(|k| k.as_str().to_string()));
        q.push(" ORDER BY e.id LIMIT ").bind(i64::from(limit.clamp(1, 1000)));
        self.read(move |c| c.all_built(&q, event_from_row)).await
    }
}
/// A row of `events` joined with its actor's `email`.
pub(crate) fn event_from_row(row: &Row<'_>) -> StoreResult<Event> {
    Ok(Event {
        id: row.col("id")?,
        kind: pad_store::rows::event_kind(&row.col::<String>("type")?)?,
        item_ref: row.col("item_ref")?,
        actor: row.col("email")?,
        at: row.ts("at")?,
        data: row.json("data")?,
    })
}
