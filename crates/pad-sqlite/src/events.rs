//! The event log (docs/api.md, Events): appends, in the writing
//! transaction, and reads by id.

use async_trait::async_trait;
use pad_core::{Event, EventFilter, EventKind, ItemRef, Timestamp, Workspace};
use pad_store::steps::EventSteps;
use pad_store::{Actor, StoreError, StoreResult};
use serde_json::Value;
use sqlx::{QueryBuilder, Row, Sqlite};

use crate::items::push_in;
use crate::rows::{micros, ts};
use crate::{SqliteStore, Tx, db};

#[async_trait]
impl EventSteps for Tx {
    async fn event(
        &mut self,
        ws: i64,
        kind: EventKind,
        r: &ItemRef,
        actor: Option<Actor>,
        at: Timestamp,
        data: Value,
    ) -> StoreResult<()> {
        sqlx::query("INSERT INTO events (workspace_id, type, item_ref, actor_id, at, data) VALUES (?, ?, ?, ?, ?, ?)")
            .bind(ws)
            .bind(kind.as_str())
            .bind(r.to_string())
            .bind(actor.map(|a| a.user_id))
            .bind(micros(at))
            .bind(data.to_string())
            .execute(&mut *self.conn)
            .await
            .map_err(db)?;
        // The event's webhook deliveries, in its transaction (docs/webhooks.md).
        crate::webhooks::enqueue(&mut self.conn, ws, kind, micros(at)).await?;
        Ok(())
    }
}

pub(crate) async fn events_where(
    s: &SqliteStore,
    ws: &Workspace,
    after: i64,
    limit: u32,
    filter: &EventFilter,
) -> StoreResult<Vec<Event>> {
    let mut qb: QueryBuilder<Sqlite> = QueryBuilder::new(
        "SELECT e.id, e.type, e.item_ref, u.email, e.at, e.data FROM events e LEFT JOIN users u ON u.id = e.actor_id
         WHERE e.workspace_id = ",
    );
    qb.push_bind(ws.id).push(" AND e.id > ").push_bind(after);
    if let Some(r) = &filter.item_ref {
        qb.push(" AND e.item_ref = ").push_bind(r.to_string());
    }
    push_in(&mut qb, "e.type", filter.kinds.iter().map(|k| k.as_str().to_string()));
    qb.push(" ORDER BY e.id LIMIT ").push_bind(i64::from(limit.clamp(1, 1000)));
    let rows = qb.build().fetch_all(&s.reader).await.map_err(db)?;
    rows.iter()
        .map(|row| {
            Ok(Event {
                id: row.get("id"),
                kind: row.get("type"),
                item_ref: row.get("item_ref"),
                actor: row.get("email"),
                at: ts(row.get("at"))?,
                data: serde_json::from_str(row.get("data")).map_err(|e| StoreError::Internal(e.to_string()))?,
            })
        })
        .collect()
}
