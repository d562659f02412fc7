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

/// The transactions that never write pad's events: those another backend
/// type or another database owns, by their `backend_xid` (32 bits, as
/// `xid(…)` of a snapshot's entries). Read by a statement of its own, before
/// the statement that takes the horizon's snapshot ([`event_horizon!`]).
const FOREIGN_XIDS: &str = "SELECT COALESCE(array_agg(a.backend_xid::text::bigint), '{}') FROM pg_stat_activity a
    WHERE a.backend_xid IS NOT NULL
      AND (a.backend_type <> 'client backend'
           OR a.datid <> (SELECT oid FROM pg_database WHERE datname = current_database()))";

/// [`FOREIGN_XIDS`], for a statement with [`event_horizon!`] to bind.
pub(crate) async fn foreign_xids(pool: &sqlx::PgPool) -> StoreResult<Vec<i64>> {
    sqlx::query_scalar(FOREIGN_XIDS).fetch_one(pool).await.map_err(db)
}

/// The head of a workspace's event page, oldest first, stopping below
/// the visibility horizon: the oldest transaction that was running when this
/// statement's snapshot was taken and may write events, i.e. all of them but
/// the foreign ones ([`foreign_xids`], read before, bound as $1; unknown
/// ones count). With no such transaction, the snapshot's `xmax`: no
/// transaction that starts writing later can take a smaller id
/// ([`event_horizon!`]).
const EVENTS_AFTER: &str = concat!(
    "WITH ",
    event_horizon!("$1"),
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
        let foreign = foreign_xids(&self.pool).await?;
        let mut args = sqlx::postgres::PgArguments::default();
        sqlx::Arguments::add(&mut args, foreign).map_err(|e| StoreError::Internal(e.to_string()))?;
        let mut qb: QueryBuilder<Postgres> = QueryBuilder::with_arguments(EVENTS_AFTER, args);
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
