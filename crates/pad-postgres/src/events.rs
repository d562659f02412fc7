//! The event log (docs/api.md, Events): appends, in the writing
//! transaction, and reads by id in visibility order.

use async_trait::async_trait;
use pad_core::{Event, EventFilter, EventKind, ItemRef, Timestamp, Workspace};
use pad_store::steps::EventSteps;
use pad_store::{Actor, EventOps, StoreError, StoreResult};
use serde_json::Value;
use sqlx::{Postgres, QueryBuilder, Row};

use crate::{PgStore, Tx, db};

/// Event ids must become visible in id order, or a reader paging by
/// `after = last id` (SSE resume) could skip an event whose transaction
/// committed after a later id's. Without serializing writers: an event's id
/// is its transaction's id times [`EVENTS_PER_TRANSACTION`] plus its index
/// in the transaction ([`INSERT_EVENT`]), and readers serve only ids below
/// the oldest transaction that may still write one ([`EVENTS_AFTER`]). Every
/// event that can still commit has a larger id than any id served, so none is
/// skipped (docs/api.md, "Event order on PostgreSQL").
const EVENTS_PER_TRANSACTION: i64 = 65_536;

/// Appends one event and queues its webhook deliveries, in one statement.
/// $1 workspace, $2 type, $3 ref, $4 actor, $5 at, $6 data. Inserts nothing
/// (and the caller errs) past [`EVENTS_PER_TRANSACTION`]. The next index is
/// one past this transaction's last event, found by one backward step of the
/// primary key within the transaction's id range.
const INSERT_EVENT: &str = concat!(
    "WITH ",
    event_slot!(),
    ",
    ev AS (
        INSERT INTO events (id, workspace_id, type, item_ref, actor_id, at, data)
        SELECT slot.base + slot.n, $1, $2, $3, $4, $5, $6 FROM slot WHERE slot.n < 65536
        RETURNING id, workspace_id, type
    ),
    ",
    enqueue_events!(),
    "
    SELECT count(*) FROM ev"
);

/// The head of a workspace's event page, oldest first, stopping below
/// the visibility horizon: the oldest transaction that was running when this
/// statement's snapshot was taken and may write events, i.e. all of them but
/// those another backend type or another database owns, which never write
/// pad's events (known by their `backend_xid`; unknown ones count). With no
/// such transaction, the snapshot's `xmax`: no transaction that starts
/// writing later can take a smaller id ([`event_horizon!`]).
const EVENTS_AFTER: &str = concat!(
    "WITH ",
    event_horizon!(),
    "
    SELECT e.id, e.type, e.item_ref, u.email, e.at, e.data
    FROM events e CROSS JOIN horizon h LEFT JOIN users u ON u.id = e.actor_id
    WHERE e.id < h.below AND e.workspace_id = "
);

#[async_trait]
impl EventSteps for Tx {
    /// Appends to the event log; see [`EVENTS_PER_TRANSACTION`] for its ids.
    async fn event(
        &mut self, ws: i64, kind: EventKind, r: &ItemRef, actor: Option<Actor>, at: Timestamp, data: Value,
    ) -> StoreResult<()> {
        let written: i64 = sqlx::query_scalar(INSERT_EVENT)
            .bind(ws)
            .bind(kind.as_str())
            .bind(r.to_string())
            .bind(actor.map(|a| a.user_id))
            .bind(at)
            .bind(data)
            .fetch_one(&mut *self.conn)
            .await
            .map_err(db)?;
        if written != 1 {
            return Err(too_many_events());
        }
        Ok(())
    }
}

pub(crate) fn too_many_events() -> StoreError {
    StoreError::Internal(format!("more than {EVENTS_PER_TRANSACTION} events in one transaction"))
}

#[async_trait]
impl EventOps for PgStore {
    async fn events_where(
        &self, ws: &Workspace, after: i64, limit: u32, filter: &EventFilter,
    ) -> StoreResult<Vec<Event>> {
        let mut qb: QueryBuilder<Postgres> = QueryBuilder::new(EVENTS_AFTER);
        qb.push_bind(ws.id).push(" AND e.id > ").push_bind(after);
        if let Some(r) = &filter.item_ref {
            qb.push(" AND e.item_ref = ").push_bind(r.to_string());
        }
        if !filter.kinds.is_empty() {
            let kinds: Vec<&str> = filter.kinds.iter().map(|k| k.as_str()).collect();
            qb.push(" AND e.type = ANY(").push_bind(kinds).push(")");
        }
        qb.push(" ORDER BY e.id LIMIT ").push_bind(i64::from(limit.clamp(1, 1000)));
        let rows = qb.build().fetch_all(&self.pool).await.map_err(db)?;
        rows.iter()
            .map(|row| {
                Ok(Event {
                    id: row.get("id"),
                    kind: pad_store::rows::event_kind(row.get("type"))?,
                    item_ref: row.get("item_ref"),
                    actor: row.get("email"),
                    at: row.get("at"),
                    data: row.get("data"),
                })
            })
            .collect()
    }
}
